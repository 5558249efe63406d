"""``weir.spark.read``: a topic's history from its Iceberg table, only the rest from the log.

The tables are written here directly with PyIceberg, as the topic-table contract says (rows
of the topic read over the protocol, the ``weir.next-offsets`` marker in the snapshot
summary), so these tests do not depend on the brokers' table writer.  One broker, one Spark
session, one topic and one table shared by the module.
"""

from __future__ import annotations

import datetime
import json
import uuid

import pytest

pytest.importorskip("pyiceberg")

from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient

import weir.spark
from tests.spark.helpers import create_topic, produce
from tests.spark.tables import catalog_options, open_catalog, write_table
from weir.common import TopicPartition as TP
from weir.spark.driver import OPTION as DRIVER_OPTION
from weir.spark.history import split
from weir.spark.registration import load_source

PARTITIONS = 2
PER_PARTITION = 40
IN_TABLE = {0: 25, 1: 10}  # weir.next-offsets of the table


@pytest.fixture(scope="module")
def history(spark, bootstrap, tmp_path_factory):
    """A topic (2 partitions x 40 records, headers on some) and its table (offsets below
    IN_TABLE), plus the rows a read over the protocol gave before any deletion."""
    topic = f"history-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, [
        {"partition": i % PARTITIONS, "key": None if i % 5 == 0 else b"k%d" % i,
         "value": None if i % 7 == 3 else b"v%d" % i,
         "headers": [("h", b"%d" % i), ("n", None)] if i % 3 == 0 else None}
        for i in range(PARTITIONS * PER_PARTITION)])
    catalog_opts = catalog_options(tmp_path_factory.mktemp("iceberg"))
    catalog = open_catalog(catalog_opts)
    base = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "includeHeaders": "true"}
    reference = _rows(load_source(spark, base))
    assert len(reference) == PARTITIONS * PER_PARTITION
    write_table(catalog, topic, reference, IN_TABLE)
    return {"topic": topic, "base": base, "catalog": catalog_opts, "reference": reference}


def _rows(df) -> list[dict]:
    return sorted((r.asDict(recursive=True) for r in df.collect()),
                  key=lambda r: (r["partition"], r["offset"]))


def _normalise(rows: list[dict]) -> list[dict]:
    """Timestamps compared as instants (the Parquet and Arrow paths may differ in tzinfo)."""
    return [dict(r, timestamp=r["timestamp"].timestamp()) for r in rows]


# weir.spark.read reads up to this many offsets on the driver (weir.spark.driver): the
# tests of Spark's own plan turn that off, the driver tests keep the default.
IN_SPARK = {DRIVER_OPTION: "0"}


def _on_driver(df) -> bool:
    """True when the DataFrame is the driver's Arrow table: a local scan, no data source
    (so no Python daemon or worker), no Parquet scan."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return ("LocalTableScan" in plan or "Scan ExistingRDD" in plan) and (
        "BatchScan" not in plan and "parquet" not in plan.lower())


def test_history_reads_the_table_and_the_log_above_it(spark, history):
    df = weir.spark.read(spark, {**history["base"], **history["catalog"], **IN_SPARK})
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "parquet" in plan.lower(), plan  # Spark's own Parquet scan for the table part
    assert "FileScan parquet" in plan and "Batched: true" in plan, plan  # vectorized
    assert "Filter (" not in plan, plan  # whole partitions of the table: no offset filter
    assert _normalise(_rows(df)) == _normalise(history["reference"])
    assert df.count() == PARTITIONS * PER_PARTITION


def test_offsets_across_the_table_boundary_equal_a_log_read(spark, history):
    topic = history["topic"]
    bounds = {"startingOffsets": json.dumps({topic: {"0": 20, "1": 3}}),
              "endingOffsets": json.dumps({topic: {"0": 31, "1": -1}})}
    got = weir.spark.read(spark, {**history["base"], **history["catalog"], **bounds,
                                  **IN_SPARK})
    want = load_source(spark, {**history["base"], **bounds})
    assert "Filter (" in got._jdf.queryExecution().executedPlan().toString()
    assert _normalise(_rows(got)) == _normalise(_rows(want))
    assert {(r["partition"], r["offset"]) for r in _rows(got)} == (
        {(0, o) for o in range(20, 31)} | {(1, o) for o in range(3, PER_PARTITION)})


def test_history_log_is_format_weir(spark, history):
    df = weir.spark.read(spark, {**history["base"], **history["catalog"], "history": "log",
                                 **IN_SPARK})
    assert "parquet" not in df._jdf.queryExecution().executedPlan().toString().lower()
    assert _normalise(_rows(df)) == _normalise(history["reference"])


def test_the_data_source_refuses_history_table(spark, history):
    """What SQL (USING weir) reaches: the Python data source reads the log only."""
    with pytest.raises(Exception, match="weir.spark.register"):
        load_source(spark, {**history["base"], "history": "table"}).count()
    with pytest.raises(weir.spark.OptionError, match="'table' or 'log'"):
        weir.spark.read(spark, {**history["base"], "history": "parquet"})


def test_without_a_table_history_reads_the_log(spark, bootstrap, history, topic_name):
    create_topic(bootstrap, topic_name, 1)
    produce(bootstrap, topic_name, [{"value": b"x%d" % i} for i in range(5)])
    opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic_name}
    assert weir.spark.read(spark, {**opts, **history["catalog"]}).count() == 5
    in_spark = weir.spark.read(spark, {**opts, **history["catalog"], **IN_SPARK})
    on_driver = weir.spark.read(spark, {**opts, **history["catalog"]})
    assert _on_driver(on_driver) and not _on_driver(in_spark)
    assert _rows(on_driver) == _rows(in_spark)
    empty = {"startingOffsets": json.dumps({topic_name: {"0": 5}})}
    assert weir.spark.read(spark, {**opts, **empty}).count() == 0
    assert weir.spark.read(spark, {**opts, **empty, **IN_SPARK}).count() == 0
    # no catalog options: the brokers are asked (DescribeConfigs); no table for it either way
    assert weir.spark.read(spark, opts).count() == 5
    with pytest.raises(weir.spark.OptionError, match="no subscribed topic has a table"):
        weir.spark.read(spark, {**opts, **history["catalog"], "history": "table"})


def test_records_deleted_from_the_log_are_still_read_from_the_table(spark, bootstrap, history):
    """Last in the module: DeleteRecords moves partition 0's log start to offset 20."""
    topic = history["topic"]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([KafkaTP(topic, 0, 20)], request_timeout=30)
    for future in futures.values():
        future.result(30)
    log_only = load_source(spark, history["base"])
    assert log_only.count() == PARTITIONS * PER_PARTITION - 20
    df = weir.spark.read(spark, {**history["base"], **history["catalog"], **IN_SPARK})
    assert _normalise(_rows(df)) == _normalise(history["reference"])
    small = weir.spark.read(spark, {**history["base"], **history["catalog"]})
    assert _on_driver(small)
    assert _rows(small) == _rows(df)


def test_small_reads_on_the_driver_equal_the_spark_reads(spark, history):
    """Table + log, offsets across the table's boundary, the log only: the driver's rows,
    schema and types are those of the same read through Spark's tasks."""
    topic = history["topic"]
    bounds = {"startingOffsets": json.dumps({topic: {"0": 20, "1": 3}}),
              "endingOffsets": json.dumps({topic: {"0": 31, "1": -1}})}
    for extra in ({}, bounds, {"history": "log"}, {"includeHeaders": "false"},
                  {**bounds, "history": "log", "includeHeaders": "false"}):
        opts = {**history["base"], **history["catalog"], **extra}
        small = weir.spark.read(spark, opts)
        assert _on_driver(small), extra
        big = weir.spark.read(spark, {**opts, **IN_SPARK})
        assert not _on_driver(big), extra
        assert small.schema == big.schema, extra
        assert _rows(small) == _rows(big), extra
        assert small.count() == big.count(), extra
    # Above the limit the read goes to Spark's tasks.
    over = weir.spark.read(spark, {**history["base"], **history["catalog"],
                                   DRIVER_OPTION: str(PARTITIONS * PER_PARTITION - 1)})
    assert not _on_driver(over)
    with pytest.raises(weir.spark.OptionError, match=DRIVER_OPTION):
        weir.spark.read(spark, {**history["base"], DRIVER_OPTION: "many"})


def test_split_plans_table_and_log_ranges():
    a0, a1, b0 = TP("a", 0), TP("a", 1), TP("b", 0)
    start = {a0: 5, a1: 0, b0: 0}
    end = {a0: 100, a1: 50, b0: 10}
    plan = split(start, end, {"a": {0: 60, 1: 80}}, {})
    assert plan.table == {a0: (5, 60), a1: (0, 50)}
    assert plan.log == {a0: (60, 100), b0: (0, 10)}
    # earliest: the table from its first row, the log from the marker (a gap below the
    # log's start offset is then reported by the log read, as data loss)
    plan = split({a0: 70, a1: 3}, {a0: 100, a1: 50}, {"a": {0: 60}}, {a0: True, a1: True})
    assert plan.table == {a0: (0, 60)}
    assert plan.log == {a0: (60, 100), a1: (3, 50)}


def test_catalog_settings_from_configs():
    from weir.spark import tables

    assert tables.catalog_settings({}) is None  # Apache Kafka: no catalog described
    got = tables.catalog_settings({"weir.iceberg.catalog.uri": "sqlite:////d/c.db",
                                   "weir.iceberg.warehouse": "/d/w"})
    assert got == tables.CatalogSettings("sql", "sqlite:////d/c.db", "/d/w", "weir")
    with pytest.raises(tables.TableError, match="must be one of sql, rest"):
        tables.catalog_settings({"weir.iceberg.catalog.uri": "x",
                                 "weir.iceberg.catalog.type": "hive"})
    with pytest.raises(tables.TableError, match="without dots"):
        tables.catalog_settings({"weir.iceberg.catalog.uri": "x",
                                 "weir.iceberg.namespace": "a.b"})


def test_reader_pins_the_writers_marker_and_names_a_bad_one(tmp_path):
    """The reader opens the catalog and reads ``weir.next-offsets`` as the writer's contract
    (weir.tables.catalog) says; a marker that is not partition → offset is a TableError."""
    import pyarrow as pa

    from weir.spark import tables
    from weir.tables import catalog as contract

    options = catalog_options(tmp_path)
    settings = tables.catalog_settings(options)
    catalog = tables.load_catalog(settings)
    rows = [{"key": None, "value": b"v%d" % i, "topic": "t", "partition": 0, "offset": i,
             "timestamp": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
             "timestampType": 0, "headers": None} for i in range(3)]
    write_table(open_catalog(options), "t", rows, {0: 2})
    assert tables.table_snapshot(catalog, settings, "other") is None
    snap = tables.table_snapshot(catalog, settings, "t")
    assert snap is not None and dict(snap.next_offsets) == {0: 2}
    assert snap.snapshot_id == snap.table.current_snapshot().snapshot_id
    assert len(snap.files({0: (0, 2)})) == 1
    table = catalog.load_table(contract.table_identifier(settings, "t"))
    table.append(pa.Table.from_pylist([dict(rows[2], headers=[])],
                                      schema=table.schema().as_arrow()),
                 snapshot_properties={contract.NEXT_OFFSETS: "[1, 2]"})
    with pytest.raises(tables.TableError, match="weir.next-offsets='\\[1, 2\\]'"):
        tables.table_snapshot(catalog, settings, "t")


def test_a_driver_read_reports_lost_records_as_a_task_does(spark, bootstrap, topic_name):
    """Offsets below the log start: DataLossError with failOnDataLoss=true (raised when the
    read is planned, since the driver reads then), skipped with false, as format("weir")."""
    create_topic(bootstrap, topic_name, 1)
    produce(bootstrap, topic_name, [{"value": b"x%d" % i} for i in range(10)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([KafkaTP(topic_name, 0, 4)],
                                       request_timeout=30).values():
        future.result(30)
    opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic_name,
            "startingOffsets": json.dumps({topic_name: {"0": 2}}), "history": "log"}
    with pytest.raises(weir.spark.DataLossError, match="below the log start offset 4"):
        weir.spark.read(spark, opts)
    lenient = {**opts, "failOnDataLoss": "false"}
    small = weir.spark.read(spark, lenient)
    assert _on_driver(small)
    assert _rows(small) == _rows(load_source(spark, lenient))
    assert [r["offset"] for r in _rows(small)] == list(range(4, 10))


def test_driver_read_limit_option():
    from weir.spark import driver

    assert driver.max_records({}) == driver.DEFAULT_MAX_RECORDS
    assert driver.max_records({DRIVER_OPTION.lower(): " 0 "}) == 0
    for bad in ("-1", "1e3", ""):
        with pytest.raises(weir.spark.OptionError, match=DRIVER_OPTION):
            driver.max_records({DRIVER_OPTION.lower(): bad})
    assert driver.span({TP("a", 0): (5, 9)}, {TP("a", 1): (0, 3), TP("b", 0): (2, 2)}) == 7

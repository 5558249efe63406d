"""``spark.read.format("weir")`` in a session given to ``weir.spark.register``.

A batch read there is ``weir.spark.read``: the topic's table through Spark's Parquet reader,
the log above it, small reads on the driver.  Its rows are compared with the same read through
the Python data source itself (:func:`weir.spark.session.load_source`: over the Kafka
protocol), on one topic whose table holds the offsets below ``IN_TABLE``.
"""

from __future__ import annotations

import json
import uuid

import pytest

pytest.importorskip("pyiceberg")

import weir.spark
from tests.spark.helpers import create_topic, produce
from tests.spark.tables import catalog_options, open_catalog, write_table
from weir.spark import registration
from weir.spark import session as weir_session
from weir.spark.driver import OPTION as DRIVER_OPTION
from weir.spark.schema import kafka_schema

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_PARTITION = 30
IN_TABLE = {0: 20, 1: 8}
BASE_TS = 1_700_000_000_000
IN_SPARK = {DRIVER_OPTION: "0"}


def _via_source(spark, **options: str):
    """The read through the Python data source: the log over the protocol."""
    return registration.load_source(spark, options)


def _rows(df) -> list[dict]:
    rows = [r.asDict(recursive=True) for r in df.collect()]
    for r in rows:  # instants (the Parquet and Arrow paths may differ in tzinfo)
        r["timestamp"] = r["timestamp"].timestamp()
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture(scope="module")
def topic(spark, bootstrap, tmp_path_factory):
    """A topic (2 partitions x 30 records; keys, headers, timestamps 1 s apart) and its table."""
    name = f"fmt-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, PARTITIONS)
    produce(bootstrap, name, [
        {"partition": i % PARTITIONS, "key": None if i % 5 == 0 else b"k%d" % i,
         "value": b"v%d" % i, "timestamp": BASE_TS + i * 1000,
         "headers": [("h", b"%d" % i)] if i % 3 == 0 else None}
        for i in range(PARTITIONS * PER_PARTITION)])
    catalog = catalog_options(tmp_path_factory.mktemp("iceberg"))
    base = {"kafka.bootstrap.servers": bootstrap, "subscribe": name, "includeHeaders": "true"}
    reference = _via_source(spark, **base)
    write_table(open_catalog(catalog), name, [r.asDict(recursive=True)
                                              for r in reference.collect()], IN_TABLE)
    return {"name": name, "base": base, "catalog": catalog, "reference": _rows(reference)}


def test_format_weir_reads_the_table_through_parquet_and_the_log_above(spark, topic):
    opts = {**topic["base"], **topic["catalog"]}
    df = spark.read.format("weir").options(**opts, **IN_SPARK).load()
    plan = _plan(df)
    assert "FileScan parquet" in plan and "Batched: true" in plan, plan  # vectorized
    assert "BatchScan" in plan, plan  # the log above the table: the Python data source
    assert df.schema == kafka_schema(include_headers=True)
    assert _rows(df) == topic["reference"]
    # load(format=..., **options) and option() calls are the same read
    via_load = spark.read.option("includeHeaders", "true").load(
        format="WEIR", **{k: v for k, v in opts.items() if k != "includeHeaders"})
    assert "LocalTableScan" in _plan(via_load)  # small: read on the driver
    assert _rows(via_load) == topic["reference"]
    # Spark partitions asked for: read in Spark's tasks, however small
    split = spark.read.format("weir").options(**opts, history="log", minPartitions="3").load()
    assert "BatchScan" in _plan(split) and split.rdd.getNumPartitions() >= 3
    assert _rows(split) == topic["reference"]


def test_bounds_and_history_equal_a_read_over_the_protocol(spark, topic):
    name = topic["name"]
    cases = [
        {},
        {"history": "log"},
        {"startingOffsets": json.dumps({name: {"0": 15, "1": 3}}),
         "endingOffsets": json.dumps({name: {"0": 25, "1": -1}})},
        {"startingTimestamp": str(BASE_TS + 10_000), "endingTimestamp": str(BASE_TS + 50_000)},
        {"startingOffsets": json.dumps({name: {"0": 30, "1": 30}})},  # empty
        {"includeHeaders": "false", "startingOffsets": json.dumps({name: {"0": 19, "1": -2}})},
    ]
    for extra in cases:
        want = _rows(_via_source(spark, **{**topic["base"], **extra}))
        for driver in ({}, IN_SPARK):
            got = spark.read.format("weir").options(
                **{**topic["base"], **topic["catalog"], **extra, **driver}).load()
            assert _rows(got) == want, (extra, driver)
    log_only = spark.read.format("weir").options(**topic["base"], **topic["catalog"],
                                                 history="log", **IN_SPARK).load()
    assert "parquet" not in _plan(log_only).lower()


def test_topics_without_tables_and_unknown_topics_read_as_the_source(spark, bootstrap, topic):
    plain = f"fmt-plain-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, plain, 1)
    produce(bootstrap, plain, [{"value": b"x%d" % i} for i in range(5)])
    opts = {"kafka.bootstrap.servers": bootstrap, "subscribe": plain}
    want = _rows(_via_source(spark, **opts))
    assert len(want) == 5
    assert _rows(spark.read.format("weir").options(**opts, **topic["catalog"]).load()) == want
    assert _rows(spark.read.format("weir").options(**opts).load()) == want  # brokers asked
    with pytest.raises(weir.spark.OptionError, match="no subscribed topic has a table"):
        spark.read.format("weir").options(**opts, **topic["catalog"], history="table").load()
    missing = {"kafka.bootstrap.servers": bootstrap, "subscribe": f"absent-{uuid.uuid4().hex}"}
    assert _rows(spark.read.format("weir").options(**missing).load()) == []
    assert _via_source(spark, **missing).count() == 0
    assigned = {"kafka.bootstrap.servers": bootstrap, "assign": json.dumps({"absent-x": [0]})}
    with pytest.raises(Exception) as from_source:
        _via_source(spark, **assigned).collect()
    with pytest.raises(Exception) as from_format:
        spark.read.format("weir").options(**assigned).load().collect()
    # the source's planning error (ListOffsets of a partition no broker leads), unwrapped
    assert "No leaders found" in str(from_format.value), from_format.value
    assert str(from_format.value) in str(from_source.value), from_source.value


def test_schema_and_options_are_checked_as_the_source_checks_them(spark, topic):
    reader = spark.read.format("weir").options(**topic["base"], **topic["catalog"])
    assert reader.schema(kafka_schema(True)).load().count() == PARTITIONS * PER_PARTITION
    with pytest.raises(weir.spark.OptionError, match="fixed schema"):
        spark.read.format("weir").schema("key binary").options(**topic["base"]).load()
    with pytest.raises(weir.spark.OptionError, match="'table' or 'log'"):
        spark.read.format("weir").options(**topic["base"], history="parquet").load()


def test_other_sessions_and_formats_are_unchanged(spark, topic, tmp_path):
    """A session not given to register() reaches the data source, which refuses
    history=table; another format in the registered session reads as it always did."""
    other = spark.newSession()
    registration.ensure_source(other)  # the data source, without register()
    with pytest.raises(Exception, match="weir.spark.register"):
        other.read.format("weir").options(**topic["base"], **topic["catalog"],
                                          history="table").load().collect()
    assert not weir_session.is_registered(other)
    path = tmp_path / "rows.json"
    path.write_text('{"a": 1}\n{"a": 2}\n')
    assert spark.read.format("json").load(str(path)).count() == 2
    assert spark.read.format("json").option("primitivesAsString", "true").load(
        str(path)).schema.simpleString() == "struct<a:string>"


def test_streams_writes_and_sql_register_the_source_when_first_used(spark, bootstrap, topic,
                                                                    tmp_path):
    """A fresh session given to register(): the Python data source is not registered with
    Spark until a stream, a write or SQL names weir."""
    fresh = spark.newSession()
    weir.spark.register(fresh)
    weir.spark.register(fresh)  # idempotent
    assert not registration.source_known(fresh)
    small = fresh.read.format("weir").options(**topic["base"], **topic["catalog"]).load()
    assert small.count() == PARTITIONS * PER_PARTITION  # on the driver: no source needed
    assert not registration.source_known(fresh)

    stream = (fresh.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic["name"]).option("startingOffsets", "earliest").load())
    assert registration.source_known(fresh)
    query = (stream.writeStream.format("memory").queryName("fmt_stream")
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert fresh.table("fmt_stream").count() == PARTITIONS * PER_PARTITION

    copy = f"fmt-copy-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, copy, 1)
    writer_session = spark.newSession()
    weir.spark.register(writer_session)
    rows = writer_session.createDataFrame([("a",), ("b",)], "value string")
    (rows.write.format("weir").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", copy).save())
    sql_session = spark.newSession()
    weir.spark.register(sql_session)
    sql_session.sql(f"CREATE TEMPORARY VIEW copied USING weir OPTIONS ("
                    f"`kafka.bootstrap.servers` '{bootstrap}', subscribe '{copy}')")
    got = sorted(bytes(r.value) for r in sql_session.table("copied").collect())
    assert got == [b"a", b"b"]


def test_register_is_lazy_and_idempotent():
    """register() touches no Spark: the source is registered once, when first needed."""

    class Registry:
        def __init__(self) -> None:
            self.calls: list[type] = []

        def register(self, source: type) -> None:
            self.calls.append(source)

    class Session:  # stands in for a SparkSession: only what register() may touch
        def __init__(self) -> None:
            self.dataSource = Registry()

    fake = Session()
    weir.spark.register(fake)
    weir.spark.register(fake)
    assert fake.dataSource.calls == [] and weir_session.is_registered(fake)
    registration.ensure_source(fake)
    registration.ensure_source(fake)
    assert fake.dataSource.calls == [weir.spark.WeirDataSource]
    assert not weir_session.is_registered(Session())

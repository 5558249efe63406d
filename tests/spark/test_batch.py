"""Batch reads and writes of the weir data source against a real broker."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from tests.spark.helpers import create_topic, offsets, produce
from weir.spark.registration import load_source
from weir.spark.schema import kafka_schema

pytestmark = pytest.mark.integration

BASE_TS = 1_700_000_000_000


def _records(n: int, partitions: int) -> list[dict]:
    return [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % partitions,
             "headers": [("n", str(i).encode()), ("even", b"1" if i % 2 == 0 else None)],
             "timestamp": BASE_TS + i * 1000} for i in range(n)]


def _read(spark, bootstrap: str, **options: str):
    """Through the Python data source itself (Spark's tasks): format("weir") of a registered
    session is weir.spark.read, which reads a read this small on the driver."""
    return load_source(spark, {"kafka.bootstrap.servers": bootstrap, **options})


@pytest.fixture(scope="module")
def filled(bootstrap) -> tuple[str, list[dict], list[tuple[int, int]]]:
    """A 3-partition topic with 600 records (keys, headers, timestamps 1 s apart)."""
    topic = "spark-batch-filled"
    create_topic(bootstrap, topic, 3)
    records = _records(600, 3)
    return topic, records, produce(bootstrap, topic, records)


def test_batch_read_equals_produced_with_headers(spark, bootstrap, filled):
    topic, records, acked = filled
    df = _read(spark, bootstrap, subscribe=topic, includeHeaders="true", minPartitions="5")
    assert df.schema == kafka_schema(include_headers=True)
    assert df.rdd.getNumPartitions() >= 5
    rows = df.collect()
    assert len(rows) == len(records)
    got = {(r.partition, r.offset): r for r in rows}
    for record, (partition, offset) in zip(records, acked, strict=True):
        row = got[(partition, offset)]
        assert row.topic == topic
        assert bytes(row.key) == record["key"] and bytes(row.value) == record["value"]
        assert [(h.key, None if h.value is None else bytes(h.value)) for h in row.headers] \
            == record["headers"]
        assert int(row.timestamp.timestamp() * 1000) == record["timestamp"]
        assert row.timestampType == 0


def test_batch_read_without_headers_has_kafka_schema(spark, bootstrap, filled):
    _topic, records, _ = filled
    df = _read(spark, bootstrap, subscribePattern="spark-batch-fil.*")
    assert df.schema == kafka_schema(include_headers=False)
    assert df.count() == len(records)


def test_offset_ranges_are_honoured(spark, bootstrap, filled):
    topic, _, _ = filled
    ends = offsets(bootstrap, topic, 3)
    starting = json.dumps({topic: {"0": 10, "1": -2, "2": 50}})
    ending = json.dumps({topic: {"0": 20, "1": 5, "2": -1}})
    df = _read(spark, bootstrap, subscribe=topic, startingOffsets=starting,
               endingOffsets=ending)
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = sorted([(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]
                  + [(2, o) for o in range(50, ends[2])])
    assert got == want


def test_assign_reads_only_the_given_partitions(spark, bootstrap, filled):
    topic, _records, acked = filled
    df = _read(spark, bootstrap, assign=json.dumps({topic: [1]}))
    assert {r.partition for r in df.select("partition").collect()} == {1}
    assert df.count() == sum(1 for p, _ in acked if p == 1)


def test_timestamps_are_honoured(spark, bootstrap, filled):
    topic, _records, _ = filled
    start, end = BASE_TS + 100_000, BASE_TS + 200_000  # records 100..199
    df = _read(spark, bootstrap, subscribe=topic, startingTimestamp=str(start),
               endingTimestamp=str(end))
    values = sorted(int(bytes(r.value)[1:]) for r in df.select("value").collect())
    assert values == list(range(100, 200))
    late = _read(spark, bootstrap, subscribe=topic, startingTimestamp=str(BASE_TS + 10**9),
                 startingOffsetsByTimestampStrategy="latest")
    assert late.count() == 0


def test_batch_write_reads_back_equal(spark, bootstrap, topic_name):
    create_topic(bootstrap, topic_name, 2)
    header = F.array(F.struct(F.lit("src").alias("key"),
                              F.lit(b"spark").cast("binary").alias("value")))
    df = (spark.range(0, 1000, numPartitions=3)
          .select(F.col("id").cast("string").alias("key"),
                  F.concat(F.lit("value-"), F.col("id").cast("string")).alias("value"),
                  (F.col("id") % 2).cast("int").alias("partition"),
                  header.alias("headers")))
    df.write.format("weir").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic_name).mode("append").save()
    back = _read(spark, bootstrap, subscribe=topic_name, includeHeaders="true").collect()
    assert len(back) == 1000
    for row in back:
        number = int(bytes(row.key))
        assert bytes(row.value) == f"value-{number}".encode()
        assert row.partition == number % 2
        assert [(h.key, bytes(h.value)) for h in row.headers] == [("src", b"spark")]


def test_write_uses_topic_column(spark, bootstrap, topic_name):
    create_topic(bootstrap, topic_name, 1)
    df = spark.createDataFrame([(topic_name, f"r{i}") for i in range(20)], "topic string,"
                               " value string")
    df.write.format("weir").option("bootstrap.servers", bootstrap).mode("append").save()
    back = _read(spark, bootstrap, subscribe=topic_name).collect()
    assert sorted(bytes(r.value).decode() for r in back) == sorted(f"r{i}" for i in range(20))

"""Data loss after retention (failOnDataLoss both ways) and bad options failing clearly."""

from __future__ import annotations

import json
import time

import pytest

from tests.spark.conftest import wait_until
from tests.spark.helpers import create_topic, offsets, produce
from weir.spark.registration import load_source

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def trimmed(bootstrap) -> tuple[str, int, int]:
    """A topic whose first records were deleted by retention: (topic, log start, end)."""
    topic = "spark-trimmed"
    create_topic(bootstrap, topic, 1, {"segment.bytes": "1024", "retention.ms": "60000"})
    old = int(time.time() * 1000) - HOUR_MS  # older than retention.ms: deleted at next check
    for i in range(10):  # separate requests: separate batches, several segments
        produce(bootstrap, topic, [{"value": b"x" * 100 + b"%d" % (10 * i + j),
                                    "timestamp": old} for j in range(10)])
    start = wait_until(lambda: offsets(bootstrap, topic, 1, "earliest")[0], 30,
                       "retention to delete the first segments")
    return topic, start, offsets(bootstrap, topic, 1)[0]


def _read(spark, bootstrap, topic, fail: str):
    """Through the Python data source itself: the tasks report the loss (a small
    format("weir") read of a registered session is read on the driver)."""
    return load_source(spark, {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                               "failOnDataLoss": fail,
                               "startingOffsets": json.dumps({topic: {"0": 0}})})


def test_batch_fails_on_data_loss(spark, bootstrap, trimmed):
    topic, _start, _ = trimmed
    with pytest.raises(Exception, match="below the log start offset"):
        _read(spark, bootstrap, topic, "true").collect()


def test_batch_skips_lost_data_when_told(spark, bootstrap, trimmed):
    topic, start, end = trimmed
    got = sorted(r.offset for r in _read(spark, bootstrap, topic, "false").collect())
    assert got and got[0] >= start > 0
    assert got == list(range(got[0], end))


@pytest.mark.slow
@pytest.mark.parametrize("fail", ["true", "false"])
def test_stream_data_loss(spark, bootstrap, trimmed, tmp_path, fail):
    topic, start, end = trimmed
    seen: list[int] = []
    query = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("failOnDataLoss", fail)
             .option("startingOffsets", json.dumps({topic: {"0": 0}})).load()
             .writeStream.foreachBatch(lambda df, _id: seen.extend(
                 r.offset for r in df.select("offset").collect()))
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    try:
        if fail == "true":
            with pytest.raises(Exception, match="below the log start offset"):
                query.awaitTermination(120)
        else:
            assert query.awaitTermination(120)
            assert query.exception() is None
            assert seen and seen[0] >= start and sorted(seen) == list(range(seen[0], end))
    finally:
        query.stop()


BAD_READS = [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({"subscribe": "t", "assign": '{"t":[0]}', "B": 1}, "exactly one of"),
    ({"B": 1}, "exactly one of"),
    ({"subscribe": "t", "startingOffsets": "latest", "B": 1}, "not allowed for batch"),
    ({"subscribe": "t", "endingOffsets": "earliest", "B": 1}, "not allowed for batch"),
    ({"subscribe": "t", "startingOffsets": "{bad", "B": 1}, "not valid JSON"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "10", "B": 1}, "streaming queries only"),
    ({"subscribe": "t", "failOnDataLoss": "maybe", "B": 1}, "true or false"),
    ({"subscribe": "t", "minPartitions": "0", "B": 1}, "positive integer"),
    ({"assign": "[1]", "B": 1}, "option 'assign' must be JSON"),
    ({"subscribe": "t", "startingOffsets": '{"u":{"0":1}}', "B": 1}, "not in the subscribe"),
]


@pytest.mark.parametrize(("options", "message"), BAD_READS)
def test_bad_read_options_fail_clearly(spark, bootstrap, options, message):
    reader = spark.read.format("weir")
    for key, value in options.items():
        reader = reader.option("kafka.bootstrap.servers", bootstrap) if key == "B" \
            else reader.option(key, value)
    with pytest.raises(Exception, match=message):
        reader.load().collect()


def test_bad_stream_options_fail_clearly(spark, bootstrap):
    df = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", "t").option("endingOffsets", "latest").load())
    with pytest.raises(Exception, match="a streaming query has no end"):
        query = df.writeStream.format("console").start()
        try:
            query.awaitTermination(60)
        finally:
            query.stop()


def test_bad_writes_fail_clearly(spark, bootstrap):
    df = spark.createDataFrame([("a",)], "value string")
    write = df.write.format("weir").option("kafka.bootstrap.servers", bootstrap)
    with pytest.raises(Exception, match="set the 'topic' option or add a 'topic' column"):
        write.mode("append").save()
    with pytest.raises(Exception, match="only appends"):
        write.option("topic", "t").mode("overwrite").save()
    no_value = spark.createDataFrame([("a",)], "payload string").write.format("weir")
    with pytest.raises(Exception, match="a 'value' column"):
        no_value.option("kafka.bootstrap.servers", bootstrap).option("topic", "t") \
            .mode("append").save()

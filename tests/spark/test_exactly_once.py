"""``exactlyOnce`` streaming writes: each task's micro-batch in one Kafka transaction,
written at most once per (query, partition, micro-batch), against a real broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTP

from tests.spark.conftest import wait_until
from tests.spark.helpers import create_topic, offsets, produce
from weir.spark.options import OptionError, parse_write_options
from weir.spark.produce import ProduceFailed, write_batches_exactly_once

pytestmark = pytest.mark.integration
QUERY_TIMEOUT_S = 180


def _batch(values: list[bytes], partition: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": values,
                                       "partition": [partition] * len(values)})


def _committed_values(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every record a read_committed consumer sees (up to each partition's end)."""
    ends = offsets(bootstrap, topic, partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eo-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})
    tps = [KafkaTP(topic, p, 0) for p in range(partitions)]
    consumer.assign(tps)
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(num_messages=1000, timeout=0.1)
            for msg in msgs:
                if not msg.error():
                    got.append(msg.value())
                elif msg.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(msg.error())
            if not msgs and all(tp.offset >= ends[tp.partition]
                                for tp in consumer.position(tps)):
                return got
        raise AssertionError(f"{topic}: did not reach {ends}: {consumer.position(tps)}")
    finally:
        consumer.close()


def test_a_micro_batch_is_written_once(bootstrap, topic_name):
    create_topic(bootstrap, topic_name, 1)
    conf = {"bootstrap.servers": bootstrap}
    txn_id = f"eo-{topic_name}-0"
    first = [b"a", b"b", b"c"]
    assert write_batches_exactly_once(conf, topic_name, [_batch(first)], txn_id, 0) == 3
    # A retried (or replayed) task of micro-batch 0 writes nothing.
    assert write_batches_exactly_once(conf, topic_name, [_batch(first)], txn_id, 0) == 0
    assert write_batches_exactly_once(conf, topic_name, [_batch([b"d"])], txn_id, 1) == 1
    # A failing attempt (a partition that does not exist) leaves nothing visible...
    with pytest.raises(ProduceFailed):
        write_batches_exactly_once(conf, topic_name, [_batch([b"x"]), _batch([b"y"], 7)],
                                   txn_id, 2)
    # ...and its retry writes the micro-batch.
    assert write_batches_exactly_once(conf, topic_name, [_batch([b"e"])], txn_id, 2) == 1
    assert _committed_values(bootstrap, topic_name, 1) == [b"a", b"b", b"c", b"d", b"e"]


def test_exactly_once_option_checks():
    columns = {"value": "binary"}
    base = {"kafka.bootstrap.servers": "h:1", "exactlyOnce": "true"}
    with pytest.raises(OptionError, match="streaming"):
        parse_write_options({**base, "topic": "t"}, columns)
    with pytest.raises(OptionError, match="topic"):
        parse_write_options(base, {**columns, "topic": "string"}, streaming=True)
    with pytest.raises(OptionError, match="transactional.id"):
        parse_write_options({**base, "topic": "t", "kafka.transactional.id": "x"}, columns,
                            streaming=True)
    assert parse_write_options({**base, "topic": "t"}, columns, streaming=True).exactly_once


@pytest.mark.slow
def test_streaming_exactly_once_write(spark, bootstrap, topic_name, tmp_path):
    source, target = topic_name, topic_name + "-eo"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, target, 2)
    produce(bootstrap, source, [{"value": b"w%d" % i, "partition": i % 2} for i in range(100)])
    stream = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "60").load().selectExpr("value", "partition"))
    query = (stream.writeStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", target).option("exactlyOnce", "true")
             .option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()
    assert query.exception() is None
    got = _committed_values(bootstrap, target, 2)
    assert sorted(got) == sorted(b"w%d" % i for i in range(100))


@pytest.mark.slow
def test_killed_and_restarted_query_writes_each_record_once(spark, bootstrap, topic_name,
                                                            tmp_path):
    """SIGKILL the driver (and its JVM and Python workers) between micro-batches or in the
    middle of one, then restart the query from its checkpoint: the sink holds every source
    record exactly once. A micro-batch whose transaction committed before Spark recorded it
    is replayed and writes nothing; a transaction left open by the kill is aborted by the
    restarted task's InitProducerId (the same transactional id fences it)."""
    source, target = topic_name, topic_name + "-eo"
    total = 2000
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, target, 2)
    produce(bootstrap, source, [{"value": b"k%d" % i, "partition": i % 2}
                                for i in range(total)])
    checkpoint = str(tmp_path / "cp")
    driver = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.eo_driver", bootstrap, source, target, checkpoint],
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: sum(offsets(bootstrap, target, 2)) >= 100, QUERY_TIMEOUT_S,
                   "the first query to commit a few micro-batches")
        time.sleep(0.3)  # not a synchronisation: lands the kill at an arbitrary point
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    before = _committed_values(bootstrap, target, 2)
    assert 0 < len(before) < total, "the kill must land in the middle of the query"

    stream = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "500").load().selectExpr("value", "partition"))
    query = (stream.writeStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", target).option("exactlyOnce", "true")
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()
    assert query.exception() is None
    got = _committed_values(bootstrap, target, 2)
    assert len(got) == len(set(got)) == total, (len(got), len(set(got)))
    assert set(got) == {b"k%d" % i for i in range(total)}


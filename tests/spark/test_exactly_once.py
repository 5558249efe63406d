"""``exactlyOnce`` streaming writes: each task's micro-batch in one Kafka transaction,
written at most once per (query, partition, micro-batch), against a real broker."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTP

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
    try:
        for _ in range(600):
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                got.append(msg.value())
            elif msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                raise KafkaException(msg.error())
            elif msg is None and all(tp.offset >= ends[tp.partition]
                                     for tp in consumer.position(tps)):
                return got
        raise AssertionError(f"{topic}: did not reach {ends}")
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

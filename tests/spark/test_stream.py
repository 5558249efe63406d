"""Structured Streaming with the weir data source: exactly-once restarts, admission control,
new partitions, streaming writes."""

from __future__ import annotations

import json
import threading

import pytest

from tests.spark.helpers import add_partitions, create_topic, produce

pytestmark = pytest.mark.integration

QUERY_TIMEOUT_S = 120


def _values(prefix: str, n: int, partitions: int) -> list[dict]:
    return [{"value": f"{prefix}{i}".encode(), "partition": i % partitions} for i in range(n)]


class Collector:
    """A foreachBatch sink keeping every micro-batch's rows (on the driver)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list]] = []
        self._lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.select("partition", "offset", "value").collect()
        with self._lock:
            self.batches.append((batch_id, rows))

    def records(self) -> list[tuple[int, int]]:
        return [(r.partition, r.offset) for _, rows in self.batches for r in rows]


def _run_available_now(spark, bootstrap: str, topic: str, checkpoint: str, sink: Collector,
                       **options: str) -> None:
    reader = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.foreachBatch(sink)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "streaming query did not finish"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()


def test_restart_from_checkpoint_reads_each_record_once(spark, bootstrap, topic_name,
                                                        tmp_path):
    create_topic(bootstrap, topic_name, 2)
    acked = produce(bootstrap, topic_name, _values("a", 100, 2))
    checkpoint = str(tmp_path / "checkpoint")
    sink = Collector()
    _run_available_now(spark, bootstrap, topic_name, checkpoint, sink,
                       startingOffsets="earliest")
    assert sorted(sink.records()) == sorted(acked)
    first_run = len(sink.batches)

    acked += produce(bootstrap, topic_name, _values("b", 60, 2))
    add_partitions(bootstrap, topic_name, 3)  # a partition added between the runs
    acked += produce(bootstrap, topic_name, [{"value": b"c%d" % i, "partition": 2}
                                             for i in range(30)])
    _run_available_now(spark, bootstrap, topic_name, checkpoint, sink,
                       startingOffsets="earliest")
    seen = sink.records()
    assert len(seen) == len(set(seen)), "a record was read twice"
    assert sorted(seen) == sorted(acked), "a record was missed"
    assert len(sink.batches) > first_run
    last = max((tmp_path / "checkpoint" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    offsets = json.loads(last.read_text().strip().splitlines()[-1])
    assert offsets == {topic_name: {"0": 80, "1": 80, "2": 30}}  # Spark's Kafka JSON shape


def test_max_offsets_per_trigger_yields_several_batches(spark, bootstrap, topic_name,
                                                        tmp_path):
    create_topic(bootstrap, topic_name, 3)
    acked = produce(bootstrap, topic_name, _values("m", 90, 3))
    sink = Collector()
    _run_available_now(spark, bootstrap, topic_name, str(tmp_path / "cp"), sink,
                       startingOffsets="earliest", maxOffsetsPerTrigger="20")
    sizes = [len(rows) for _, rows in sink.batches if rows]
    assert len(sizes) >= 5 and max(sizes) <= 20, sizes
    assert sorted(sink.records()) == sorted(acked)


def test_streaming_write_reads_back_equal(spark, bootstrap, topic_name, tmp_path):
    source, target = topic_name, topic_name + "-out"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, target, 2)
    produce(bootstrap, source, [{"key": b"k%d" % i, "value": b"w%d" % i, "partition": i % 2}
                                for i in range(200)])
    stream = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "120").load()
              .selectExpr("key", "value", "partition"))
    query = (stream.writeStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", target).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S)
    finally:
        query.stop()
    assert query.exception() is None
    back = (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", target).load().collect())
    got = sorted((r.partition, bytes(r.key), bytes(r.value)) for r in back)
    assert got == sorted((i % 2, b"k%d" % i, b"w%d" % i) for i in range(200))

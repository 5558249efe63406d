"""The Fetch + bulk-decode read path against a real broker: codecs, headers, nulls,
splitting into offset ranges, empty and deleted ranges, byte-bounded micro-batches."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient

from tests.spark.helpers import TIMEOUT_S, create_topic, offsets, produce
from tests.spark.test_stream import Collector, _run_available_now
from weir.common import TopicPartition
from weir.spark.fetch import read_range_native
from weir.spark.offsets import OffsetRange
from weir.spark.registration import load_source

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _read(spark, bootstrap: str, topic: str, **options: str):
    """Through the Python data source itself (Spark's tasks, the columnar decoder)."""
    return load_source(spark, {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                               **options})


def _record(i: int) -> dict:
    record: dict = {"value": None if i % 5 == 0 else b"v%d-" % i + b"x" * (i % 150),
                    "key": None if i % 3 == 0 else b"k%d" % i, "partition": i % 2}
    if i % 4:
        record["headers"] = [("n", b"%d" % i), ("none", None)]
    return record


def _produce_with(bootstrap: str, topic: str, records: list[dict], codec: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "linger.ms": 20, "enable.idempotence": True})
    for r in records:
        producer.produce(topic, **r)
    assert producer.flush(TIMEOUT_S) == 0


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_headers_and_nulls(spark, bootstrap, topic_name, codec):
    create_topic(bootstrap, topic_name, 2)
    records = [_record(i) for i in range(300)]
    _produce_with(bootstrap, topic_name, records, codec)
    rows = _read(spark, bootstrap, topic_name, includeHeaders="true").collect()
    assert len(rows) == len(records)
    by_partition = {p: sorted((r for r in rows if r.partition == p), key=lambda r: r.offset)
                    for p in (0, 1)}
    for p in (0, 1):
        want = [r for r in records if r["partition"] == p]
        got = by_partition[p]
        assert [r.offset for r in got] == list(range(len(want)))
        for w, g in zip(want, got, strict=True):
            assert (g.key, g.value) == (w["key"], w["value"])
            if "headers" in w:
                assert [(h.key, h.value) for h in g.headers] == w["headers"]
            else:
                assert g.headers is None


def test_split_by_max_records_and_min_partitions(spark, bootstrap, topic_name):
    create_topic(bootstrap, topic_name, 2)
    produce(bootstrap, topic_name, [{"value": b"%d" % i, "partition": i % 2}
                                    for i in range(1000)])
    capped = _read(spark, bootstrap, topic_name, maxRecordsPerPartition="120")
    assert capped.rdd.getNumPartitions() == 10  # 500 per Weir partition: 5 ranges each
    rows = capped.select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (p, o) for p in (0, 1) for o in range(500))
    spread = _read(spark, bootstrap, topic_name, minPartitions="7")
    assert spread.rdd.getNumPartitions() >= 7
    assert spread.count() == 1000
    assert spread.select("offset").distinct().count() == 500


def test_empty_topic_and_empty_range(spark, bootstrap, topic_name):
    create_topic(bootstrap, topic_name, 1)
    assert _read(spark, bootstrap, topic_name).count() == 0
    produce(bootstrap, topic_name, [{"value": b"a"}, {"value": b"b"}])
    same = json.dumps({topic_name: {"0": 1}})
    assert _read(spark, bootstrap, topic_name, startingOffsets=same,
                 endingOffsets=same).count() == 0
    assert [r.value for r in _read(spark, bootstrap, topic_name,
                                   startingOffsets=same).collect()] == [b"b"]


def test_deleted_records_start_reads_at_the_log_start(spark, bootstrap, topic_name):
    create_topic(bootstrap, topic_name, 1)
    for i in range(4):  # separate batches
        produce(bootstrap, topic_name, [{"value": b"%d" % (10 * i + j)} for j in range(10)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    done = admin.delete_records([KafkaTP(topic_name, 0, 15)], request_timeout=TIMEOUT_S)
    for future in done.values():
        future.result(TIMEOUT_S)
    assert offsets(bootstrap, topic_name, 1, "earliest") == [15]
    rows = _read(spark, bootstrap, topic_name).collect()
    assert [r.offset for r in rows] == list(range(15, 40))  # 15 is inside a batch
    assert [r.value for r in rows] == [b"%d" % i for i in range(15, 40)]
    with pytest.raises(Exception, match="below the log start offset"):
        _read(spark, bootstrap, topic_name,
              startingOffsets=json.dumps({topic_name: {"0": 3}})).collect()


def test_reader_skips_deleted_records_when_told(bootstrap, topic_name):
    """The executor side alone: a range planned before records were deleted."""
    create_topic(bootstrap, topic_name, 1)
    for i in range(3):
        produce(bootstrap, topic_name, [{"value": b"%d" % (10 * i + j)} for j in range(10)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([KafkaTP(topic_name, 0, 12)],
                                       request_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)
    rng = OffsetRange(topic_name, 0, 5, 30)
    conf = {"bootstrap.servers": bootstrap}
    batches = list(read_range_native(conf, rng, include_headers=False,
                                     fail_on_data_loss=False, poll_timeout_ms=30_000))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(12, 30))
    from weir.spark.offsets import DataLossError

    with pytest.raises(DataLossError, match="below the log start offset"):
        list(read_range_native(conf, rng, include_headers=False, fail_on_data_loss=True,
                               poll_timeout_ms=30_000))
    assert TopicPartition(topic_name, 0) == rng.tp


def test_max_bytes_per_trigger_bounds_micro_batches(spark, bootstrap, topic_name, tmp_path):
    create_topic(bootstrap, topic_name, 1)
    for i in range(6):  # 6 batches of 20 records of about 1 KB
        produce(bootstrap, topic_name, [{"value": b"%04d" % (20 * i + j) + b"x" * 1000}
                                        for j in range(20)])
    sink = Collector()
    _run_available_now(spark, bootstrap, topic_name, str(tmp_path / "cp"), sink,
                       startingOffsets="earliest", maxBytesPerTrigger="30000")
    sizes = [len(rows) for _, rows in sink.batches if rows]
    assert sum(sizes) == 120 and len(sizes) >= 4 and max(sizes) <= 40
    assert sorted(o for _, o in sink.records()) == list(range(120))

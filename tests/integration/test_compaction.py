"""Log compaction on real brokers with real clients: the latest value per key survives with
its offset, tombstones go after delete.retention.ms, keyless records are refused, a SIGKILL
during a cleaning loses nothing, group offsets survive the compaction of
__consumer_offsets."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CTP

from tests.integration.clients import create_topic, produce
from tests.integration.conftest import serve_cluster
from weir.ops.cluster import LocalCluster

pytestmark = pytest.mark.integration

FAST_CLEANER = {"log.cleaner.backoff.ms": "100", "log.cleaner.min.cleanable.ratio": "0.01"}
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096",
             "min.cleanable.dirty.ratio": "0.01"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from serve_cluster(tmp_path_factory, 1, FAST_CLEANER)


def read_all(bootstrap: str, topic: str, idle_s: float = 0.5, timeout_s: float = 60) -> list:
    """Every record of partition 0 from the beginning, up to the end of the partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([CTP(topic, 0, 0)])
    got, deadline = [], time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(idle_s)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise AssertionError(msg.error())
            got.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


def latest_per_key(acked_keys: list[tuple[int, bytes, bytes | None]]) -> dict[bytes, tuple]:
    latest: dict[bytes, tuple] = {}
    for offset, key, value in sorted(acked_keys):
        latest[key] = (offset, value)
    return latest


def produce_keyed(bootstrap, topic, pairs, **config):
    config.setdefault("batch.size", 1024)  # many small batches: many small segments
    acked = produce(bootstrap, topic, [v for _k, v in pairs], keys=[k for k, _v in pairs],
                    partition=0, **config)
    return [(offset, pairs_key, value) for (_p, offset, value), (pairs_key, _v)
            in zip(sorted(acked, key=lambda a: a[1]), pairs, strict=True)]


def wait_until(predicate, timeout_s: float, what: str, poke=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if poke is not None:
            poke()
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def cleaner_checkpoint(log_dir: Path, topic: str) -> int | None:
    path = log_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return None
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.rsplit(" ", 2)
        if name == topic and partition == "0":
            return int(offset)
    return None


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_latest_value_per_key_survives_with_its_offset(cluster, topic_name, codec):
    create_topic(cluster.bootstrap, topic_name, config=COMPACTED)
    pairs = [(b"key-%02d" % (i % 20), b"value-%05d" % i + b"." * 40) for i in range(3000)]
    acked = produce_keyed(cluster.bootstrap, topic_name, pairs, **{"compression.type": codec})
    log_dir = cluster.broker_log_dirs(cluster.broker_ids[0])[0]
    wait_until(lambda: (cleaner_checkpoint(log_dir, topic_name) or 0) > 2000, 60,
               "a cleaning of most of the log")
    view = read_all(cluster.bootstrap, topic_name)
    offsets = [o for o, _k, _v in view]
    assert offsets == sorted(set(offsets)) and len(view) < len(pairs) // 2  # gaps, compacted
    expected = latest_per_key(acked)
    seen = {k: (o, v) for o, k, v in view}  # the last occurrence wins
    assert seen == expected
    for o, k, v in view:  # every record read is one that was produced at that offset
        assert (o, k, v) in set(acked)


def test_tombstones_disappear_after_delete_retention(cluster, topic_name):
    create_topic(cluster.bootstrap, topic_name,
                 config={**COMPACTED, "delete.retention.ms": "1500"})
    keys = [b"k%02d" % i for i in range(10)]
    produce_keyed(cluster.bootstrap, topic_name, [(k, b"v" * 100) for k in keys] * 5)
    produce_keyed(cluster.bootstrap, topic_name, [(k, None) for k in keys[:5]])
    filler = iter(range(10**6))

    def more():  # new dirty data keeps the cleaner coming back (Kafka's rule too)
        produce_keyed(cluster.bootstrap, topic_name,
                      [(b"filler-%d" % (next(filler) % 3), b"f" * 200) for _ in range(30)])

    def tombstones_seen():
        return {k for _o, k, v in read_all(cluster.bootstrap, topic_name, idle_s=0.5)
                if v is None}

    more()
    wait_until(lambda: len(read_all(cluster.bootstrap, topic_name, idle_s=0.5)) < 40, 60,
               "the first cleaning", poke=more)
    assert tombstones_seen() == set(keys[:5])  # kept until delete.retention.ms passes
    wait_until(lambda: not tombstones_seen(), 60, "tombstones removed", poke=more)
    view = read_all(cluster.bootstrap, topic_name)
    assert {k for _o, k, _v in view if k in keys} == set(keys[5:])


def test_keyless_records_to_a_compacted_topic_are_refused(cluster, topic_name):
    create_topic(cluster.bootstrap, topic_name, config=COMPACTED)
    errors = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "retries": 0})
    producer.produce(topic_name, value=b"no key", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    producer.produce(topic_name, value=b"keyed", key=b"k", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    codes = sorted(e.code() if e is not None else 0 for e in errors)
    assert KafkaError.INVALID_RECORD in codes, errors


@pytest.mark.slow
def test_sigkill_during_cleaning_loses_nothing(tmp_path, topic_name):
    overrides = {**FAST_CLEANER, "log.cleaner.io.max.bytes.per.second": "40000"}
    cluster = LocalCluster(tmp_path / "data", brokers=1, port_base=0, overrides=overrides)
    cluster.start(timeout_s=90)
    try:
        create_topic(cluster.bootstrap, topic_name, config=COMPACTED)
        pairs = [(b"key-%03d" % (i % 50), b"value-%05d" % i + b"." * 60) for i in range(3000)]
        acked = produce_keyed(cluster.bootstrap, topic_name, pairs)
        part = cluster.broker_log_dirs(cluster.broker_ids[0])[0] / f"{topic_name}-0"
        wait_until(lambda: any(p.name.endswith(".cleaned") for p in part.iterdir()), 60,
                   "a cleaning in progress")
        cluster.kill_broker(cluster.broker_ids[0], signal.SIGKILL)
        cluster = LocalCluster(tmp_path / "data", brokers=1, port_base=0, overrides=overrides)
        cluster.start(timeout_s=90)
        view = read_all(cluster.bootstrap, topic_name)
        assert {k: (o, v) for o, k, v in view} == latest_per_key(acked)
        offsets = [o for o, _k, _v in view]
        assert offsets == sorted(set(offsets))
        assert not [p for p in part.iterdir() if p.name.endswith(".swap")]
    finally:
        cluster.stop()


@pytest.mark.slow
def test_group_offsets_survive_compaction_of_consumer_offsets(tmp_path, topic_name):
    overrides = {**FAST_CLEANER, "offsets.topic.num.partitions": "1",
                 "offsets.topic.segment.bytes": "2048"}
    cluster = LocalCluster(tmp_path / "data", brokers=1, port_base=0, overrides=overrides)
    cluster.start(timeout_s=90)
    group = f"g-{topic_name}"
    try:
        create_topic(cluster.bootstrap, topic_name, partitions=3)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                             "enable.auto.commit": False})
        final = {}
        for i in range(150):
            offsets = [CTP(topic_name, p, i * 10 + p) for p in range(3)]
            consumer.commit(offsets=offsets, asynchronous=False)
            final = {p: i * 10 + p for p in range(3)}
        consumer.close()
        log_dir = cluster.broker_log_dirs(cluster.broker_ids[0])[0]
        wait_until(lambda: (cleaner_checkpoint(log_dir, "__consumer_offsets") or 0) > 100, 60,
                   "a cleaning of __consumer_offsets")
        cluster.stop_broker(cluster.broker_ids[0])  # the coordinator reloads from the log
        cluster = LocalCluster(tmp_path / "data", brokers=1, port_base=0, overrides=overrides)
        cluster.start(timeout_s=90)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                             "enable.auto.commit": False})
        try:
            committed = consumer.committed([CTP(topic_name, p) for p in range(3)], timeout=30)
        finally:
            consumer.close()
        assert {tp.partition: tp.offset for tp in committed} == final
    finally:
        cluster.stop()


@pytest.mark.slow
def test_follower_rebuilt_from_a_compacted_leader(tmp_path, topic_name):
    """Leader and follower clean independently; a follower whose log is lost copies the
    leader's compacted log, offset gaps included, and serves the same view as leader."""
    from tests.integration.replication_checks import partition_isrs, partition_leaders

    cluster = LocalCluster(tmp_path / "data", brokers=2, port_base=0, overrides=FAST_CLEANER)
    cluster.start(timeout_s=90)
    try:
        create_topic(cluster.bootstrap, topic_name, replication=2, config=COMPACTED)
        pairs = [(b"key-%02d" % (i % 30), b"value-%05d" % i + b"." * 40) for i in range(3000)]
        acked = produce_keyed(cluster.bootstrap, topic_name, pairs, acks="all")
        leader = partition_leaders(cluster.bootstrap, topic_name)[0]
        follower = next(b for b in cluster.broker_ids if b != leader)
        dirs = {b: cluster.broker_log_dirs(b)[0] for b in cluster.broker_ids}
        for b in cluster.broker_ids:  # both replicas clean on their own
            wait_until(lambda b=b: (cleaner_checkpoint(dirs[b], topic_name) or 0) > 2000, 60,
                       f"a cleaning on broker {b}")
        cluster.stop_broker(follower)
        shutil.rmtree(dirs[follower] / f"{topic_name}-0")
        cluster.start_broker(follower)
        wait_until(lambda: partition_isrs(cluster.bootstrap, topic_name)[0] == sorted(
            cluster.broker_ids), 60, "the rebuilt follower back in the ISR")
        cluster.stop_broker(leader)  # the follower leads now
        wait_until(lambda: partition_leaders(cluster.bootstrap, topic_name)[0] == follower, 60,
                   "the follower leading")
        view = read_all(cluster.bootstrap, topic_name)
        assert {k: (o, v) for o, k, v in view} == latest_per_key(acked)
        offsets = [o for o, _k, _v in view]
        assert offsets == sorted(set(offsets)) and len(offsets) < len(pairs) // 2
    finally:
        cluster.stop()

"""The oldest and newest versions Kafka 3.9 serves, answered by a real broker with Kafka's
per-version semantics (raw requests: no client library sends most of these)."""

from __future__ import annotations

import datetime

import pytest

from tests.integration.clients import create_topic, produce, raw_request
from tests.integration.replication_checks import wait_until
from weir.coordination import paths
from weir.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration


def _addr(cluster):
    slot = cluster.brokers[0]
    return slot.host, slot.port


def _led(cluster, topic: str, partitions: int = 1) -> None:
    def ready():
        md = raw_request(*_addr(cluster), 3, 12, topics=[{"name": topic, "topic_id": None}])
        parts = md.topics[0].partitions
        return len(parts) == partitions and all(p.leader_id >= 0 for p in parts)
    wait_until(ready, 30, f"{topic} led")


def test_list_offsets_v0_answers_segment_boundaries(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name, 1, 1)
    _led(cluster1, topic_name)
    produce(cluster1.bootstrap, topic_name, [b"x"] * 5, partition=0, acks="all")

    def v0(timestamp: int, max_num: int = 10):
        r = raw_request(*_addr(cluster1), 2, 0, replica_id=-1, topics=[{
            "name": topic_name, "partitions": [{"partition_index": 0, "timestamp": timestamp,
                                                "max_num_offsets": max_num}]}])
        p = r.topics[0].partitions[0]
        return int(p.error_code), list(p.old_style_offsets)

    # One segment starting at 0, with data: latest gives the log end then the segment base.
    assert v0(-1) == (0, [5, 0])
    assert v0(-1, 1) == (0, [5])
    assert v0(-2) == (0, [0])
    assert v0(-3) == (ErrorCode.unsupported_version, [])
    # A time before the segment file was written: nothing.
    assert v0(1) == (0, [])
    unknown = raw_request(*_addr(cluster1), 2, 0, replica_id=-1, topics=[{
        "name": "no-such-topic-v0", "partitions": [{"partition_index": 0, "timestamp": -1,
                                                     "max_num_offsets": 1}]}])
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_list_offsets_v9_earliest_local_and_latest_tiered(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name, 1, 1)
    _led(cluster1, topic_name)
    produce(cluster1.bootstrap, topic_name, [b"y"] * 3, partition=0, acks="all")
    r = raw_request(*_addr(cluster1), 2, 9, replica_id=-1, isolation_level=0, topics=[{
        "name": topic_name, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}
            for ts in (-4, -5, -1)]}])
    got = [(int(p.error_code), int(p.offset), int(p.leader_epoch))
           for p in r.topics[0].partitions]
    # No tiered storage: the local log starts at the log start offset, nothing is tiered.
    assert got[0][:2] == (0, 0) and got[0][2] >= 0
    assert got[1] == (0, -1, -1)
    assert got[2][:2] == (0, 3)


def test_offset_commit_v0_goes_to_zookeeper_and_offset_fetch_v0_reads_it(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name, 2, 1)
    _led(cluster1, topic_name, 2)
    group = f"old-{topic_name}"
    commit = raw_request(*_addr(cluster1), 8, 0, group_id=group, topics=[
        {"name": topic_name, "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_metadata": "m"},
            {"partition_index": 7, "committed_offset": 1, "committed_metadata": None}]}])
    errors = {int(p.partition_index): int(p.error_code) for p in commit.topics[0].partitions}
    assert errors == {0: 0, 7: ErrorCode.unknown_topic_or_partition}
    data, _ = cluster1.zk().get_data(paths.consumer_offset(group, topic_name, 0))
    assert data == b"42"
    fetched = raw_request(*_addr(cluster1), 9, 0, group_id=group, topics=[
        {"name": topic_name, "partition_indexes": [0, 1]}])
    got = {int(p.partition_index): (int(p.committed_offset), int(p.error_code))
           for p in fetched.topics[0].partitions}
    assert got == {0: (42, 0), 1: (-1, 0)}
    # The group coordinator (v1+) does not see ZooKeeper offsets, as in Kafka.
    newer = raw_request(*_addr(cluster1), 9, 1, group_id=group, topics=[
        {"name": topic_name, "partition_indexes": [0]}])
    assert int(newer.topics[0].partitions[0].committed_offset) == -1


def _coordinator_ready(cluster, group: str) -> None:
    def found():
        r = raw_request(*_addr(cluster), 10, 0, key=group)
        return int(r.error_code) == 0
    wait_until(found, 60, "the group coordinator")


def test_offset_commit_v1_keeps_the_given_commit_timestamp(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name, 1, 1)
    _led(cluster1, topic_name)
    group = f"v1-{topic_name}"
    _coordinator_ready(cluster1, group)
    commit = raw_request(*_addr(cluster1), 8, 1, group_id=group,
                         generation_id_or_member_epoch=-1, member_id="", topics=[
                             {"name": topic_name, "partitions": [
                                 {"partition_index": 0, "committed_offset": 9,
                                  "commit_timestamp": 1_700_000_000_000,
                                  "committed_metadata": ""}]}])
    assert int(commit.topics[0].partitions[0].error_code) == 0

    def committed():
        r = raw_request(*_addr(cluster1), 9, 1, group_id=group, topics=[
            {"name": topic_name, "partition_indexes": [0]}])
        return int(r.topics[0].partitions[0].committed_offset) == 9
    wait_until(committed, 30, "the v1 commit")


def test_create_and_delete_topics_v0(cluster1, topic_name):
    created = raw_request(*_addr(cluster1), 19, 0, topics=[{
        "name": topic_name, "num_partitions": 2, "replication_factor": 1, "assignments": [],
        "configs": []}], timeout=datetime.timedelta(seconds=30))
    assert [(t.name, int(t.error_code)) for t in created.topics] == [(topic_name, 0)]
    again = raw_request(*_addr(cluster1), 19, 1, topics=[{
        "name": topic_name, "num_partitions": 2, "replication_factor": 1, "assignments": [],
        "configs": []}], timeout=datetime.timedelta(seconds=30), validate_only=True)
    assert int(again.topics[0].error_code) == ErrorCode.topic_already_exists
    assert again.topics[0].error_message
    _led(cluster1, topic_name, 2)
    deleted = raw_request(*_addr(cluster1), 20, 0, topic_names=[topic_name],
                          timeout=datetime.timedelta(seconds=30))
    assert [(r.name, int(r.error_code)) for r in deleted.responses] == [(topic_name, 0)]


def test_describe_configs_v0_reports_is_default(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name, 1, 1, config={"retention.ms": "123456"})
    r = raw_request(*_addr(cluster1), 32, 0, resources=[{
        "resource_type": 2, "resource_name": topic_name,
        "configuration_keys": ["retention.ms", "segment.bytes"]}])
    configs = {c.name: (c.value, c.is_default) for c in r.results[0].configs}
    assert configs == {"retention.ms": ("123456", False), "segment.bytes": (configs[
        "segment.bytes"][0], True)}


def test_offset_for_leader_epoch_v0_and_v1(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name, 1, 1)
    _led(cluster1, topic_name)
    produce(cluster1.bootstrap, topic_name, [b"z"] * 4, partition=0, acks="all")
    for version in (0, 1):
        r = raw_request(*_addr(cluster1), 23, version, topics=[{
            "topic": topic_name, "partitions": [{"partition": 0, "leader_epoch": 0}]}])
        p = r.topics[0].partitions[0]
        assert (int(p.error_code), int(p.end_offset)) == (0, 4)
        if version == 1:
            assert int(p.leader_epoch) == 0


def test_list_groups_v5_type_filter_and_find_coordinator_v6_share_keys(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name, 1, 1)
    _led(cluster1, topic_name)
    group = f"g-{topic_name}"
    _coordinator_ready(cluster1, group)
    commit = raw_request(*_addr(cluster1), 8, 2, group_id=group,
                         generation_id_or_member_epoch=-1, member_id="",
                         retention_time=datetime.timedelta(milliseconds=-1), topics=[
                             {"name": topic_name, "partitions": [
                                 {"partition_index": 0, "committed_offset": 1,
                                  "committed_metadata": ""}]}])
    assert int(commit.topics[0].partitions[0].error_code) == 0

    def listed(types):
        r = raw_request(*_addr(cluster1), 16, 5, states_filter=[], types_filter=types)
        return {(g.group_id, g.group_type) for g in r.groups}
    wait_until(lambda: (group, "classic") in listed([]), 30, "the group listed")
    assert (group, "classic") in listed(["Classic"])
    assert listed(["consumer"]) == set()
    share = raw_request(*_addr(cluster1), 10, 6, key_type=2, coordinator_keys=["sg"])
    assert int(share.coordinators[0].error_code) == ErrorCode.coordinator_not_available
    old = raw_request(*_addr(cluster1), 10, 5, key_type=2, coordinator_keys=["sg"])
    assert int(old.coordinators[0].error_code) == ErrorCode.invalid_request


@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 9)])
def test_old_message_formats_with_kafka_python(cluster1, topic_name, api_version):
    """kafka-python pinned to an old broker version: Produce v2/Fetch v2 (message format v1)
    for 0.10.1, Produce v1/Fetch v1 (format v0) for 0.9; new clients read them and old
    clients read what new clients wrote."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition

    create_topic(cluster1.bootstrap, topic_name, 1, 1)
    _led(cluster1, topic_name)
    producer = KafkaProducer(bootstrap_servers=cluster1.bootstrap, api_version=api_version,
                             acks=1)
    try:
        for i in range(5):
            producer.send(topic_name, key=b"k%d" % i, value=b"old-%d" % i,
                          partition=0).get(timeout=30)
    finally:
        producer.close()
    produce(cluster1.bootstrap, topic_name, [b"new-%d" % i for i in range(5)], partition=0,
            acks="all")
    consumer = KafkaConsumer(bootstrap_servers=cluster1.bootstrap, api_version=api_version,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got: list[tuple[int, bytes | None, bytes]] = []
    try:
        consumer.assign([KpTopicPartition(topic_name, 0)])

        def drained():
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.key, r.value) for r in records)
            return len(got) >= 10
        wait_until(drained, 60, "ten records through an old consumer")
    finally:
        consumer.close()
    assert [o for o, _, _ in got] == list(range(10))
    assert [v for _, _, v in got] == [b"old-%d" % i for i in range(5)] + [
        b"new-%d" % i for i in range(5)]
    assert got[0][1] == b"k0"
    # And a current client reads what the old one wrote.
    from tests.integration.clients import consume_assigned

    values = [m.value() for m in consume_assigned(cluster1.bootstrap, topic_name, [0], 10)]
    assert values[:5] == [b"old-%d" % i for i in range(5)]


def test_fetch_v0_of_a_zstd_topic_is_unsupported_compression(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name, 1, 1, config={"compression.type": "zstd"})
    _led(cluster1, topic_name)
    produce(cluster1.bootstrap, topic_name, [b"z"], partition=0, acks="all")
    r = raw_request(*_addr(cluster1), 1, 0, replica_id=-1,
                    max_wait=datetime.timedelta(0), min_bytes=0,
                    topics=[{"topic": topic_name, "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}])
    p = r.responses[0].partitions[0]
    assert int(p.error_code) == ErrorCode.unsupported_compression_type and not p.records

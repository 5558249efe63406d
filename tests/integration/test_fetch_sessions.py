"""Incremental fetch sessions (KIP-227) on real brokers: raw Fetch requests, kafka-python's
session-using consumer, and a leader change in the middle."""

from __future__ import annotations

import datetime
import threading
import urllib.request
import uuid

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.integration.clients import create_topic, produce, raw_request
from tests.integration.replication_checks import partition_leaders, wait_until
from weir.config import read_properties
from weir.ops.cluster import LocalCluster
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.server.metrics import parse

pytestmark = pytest.mark.integration

PARTITIONS = 8


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("sessions") / "data", brokers=3,
                           port_base=0)
    cluster.serve_metrics = True  # each broker gets a metrics.http.port
    try:
        cluster.start(timeout_s=90)
        yield cluster
    finally:
        cluster.stop()


def _session_metrics(cluster, broker_id: int) -> tuple[float, float]:
    """(sessions, partitions cached) from the broker's /metrics."""
    port = int(read_properties(cluster.config_path(broker_id))["metrics.http.port"])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        samples = parse(r.read().decode())
    prefix = "kafka_server_fetchsessioncache_"
    return (samples[(prefix + "numincrementalfetchsessions", ())],
            samples[(prefix + "numincrementalfetchpartitionscached", ())])


def _addr(cluster, broker_id: int) -> tuple[str, int]:
    slot = next(b for b in cluster.brokers if b.id == broker_id)
    return slot.host, slot.port


def _fetch(addr, version: int, topics, session_id: int, epoch: int, wait_ms: int = 0,
           forgotten=(), min_bytes: int = 1):
    return raw_request(*addr, 1, version, replica_id=-1,
                       max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=min_bytes,
                       max_bytes=1 << 20, isolation_level=0, session_id=session_id,
                       session_epoch=epoch, topics=topics, forgotten_topics_data=list(forgotten),
                       rack_id="")


def _by_name(topic: str, partitions, offsets=None):
    offsets = offsets or {}
    return [{"topic": topic, "partitions": [
        {"partition": p, "fetch_offset": offsets.get(p, 0), "partition_max_bytes": 1 << 20,
         "current_leader_epoch": -1, "last_fetched_epoch": -1, "log_start_offset": -1}
        for p in partitions]}]


def _answered(response) -> dict[int, tuple[int, int, bytes]]:
    return {int(p.partition_index): (int(p.error_code), int(p.high_watermark), p.records or b"")
            for t in response.responses for p in t.partitions}


def _one_leader_topic(cluster, topic: str) -> tuple[int, list[int]]:
    """A topic of PARTITIONS partitions, replication 1; (a broker, the partitions it leads)."""
    create_topic(cluster.bootstrap, topic, PARTITIONS, 1)
    def all_led():
        leaders = partition_leaders(cluster.bootstrap, topic)
        return leaders if len(leaders) == PARTITIONS and min(leaders.values()) >= 0 else None

    leaders = wait_until(all_led, 30, "leaders")
    broker = leaders[0]
    mine = sorted(p for p, b in leaders.items() if b == broker)

    def serving():  # Metadata may name the leader before it has applied its LeaderAndIsr
        answered = _answered(_fetch(_addr(cluster, broker), 12, _by_name(topic, mine), 0, -1))
        return all(code == 0 for code, _hw, _records in answered.values())

    wait_until(serving, 30, f"broker {broker} serving its partitions")
    return broker, mine


def test_incremental_fetches_answer_only_partitions_with_news(cluster, topic_name):
    broker, mine = _one_leader_topic(cluster, topic_name)
    addr = _addr(cluster, broker)
    full = _fetch(addr, 12, _by_name(topic_name, mine), 0, 0)
    assert int(full.error_code) == 0 and full.session_id != 0
    assert set(_answered(full)) == set(mine)
    sid = full.session_id

    # Nothing new: an incremental fetch naming no partition gets none back.
    quiet = _fetch(addr, 12, [], sid, 1)
    assert (int(quiet.error_code), quiet.session_id, _answered(quiet)) == (0, sid, {})

    # Records on one partition: only that one is answered, with them.
    target = mine[-1]
    produce(cluster.bootstrap, topic_name, [b"a", b"b"], partition=target, acks="all")
    news = _answered(_fetch(addr, 12, [], sid, 2))
    assert list(news) == [target] and news[target][0] == 0 and news[target][1] == 2
    assert news[target][2]  # the batch

    # A repeated epoch is refused, the session survives it.
    stale = _fetch(addr, 12, [], sid, 2)
    assert int(stale.error_code) == ErrorCode.invalid_fetch_session_epoch
    assert int(_fetch(addr, 12, [], 987654, 1).error_code) == \
        ErrorCode.fetch_session_id_not_found
    # Moving the fetch offset of that partition to its end: answered (HW unchanged, but
    # it is updated), then quiet again.
    moved = _answered(_fetch(addr, 12, _by_name(topic_name, [target], {target: 2}), sid, 3))
    assert set(moved) <= {target}
    assert _answered(_fetch(addr, 12, [], sid, 4)) == {}
    # A session created with names cannot be used with topic ids (Fetch v13+).
    mixed = _fetch(addr, 13, [], sid, 5)
    assert int(mixed.error_code) == ErrorCode.fetch_session_topic_id_error
    # Forgetting every partition closes the session.
    forget = [{"topic": topic_name, "partitions": mine}]
    closed = _fetch(addr, 12, [], sid, 5, forgotten=forget)
    assert (int(closed.error_code), closed.session_id) == (0, 0)
    assert int(_fetch(addr, 12, [], sid, 6).error_code) == ErrorCode.fetch_session_id_not_found


def test_a_parked_incremental_fetch_wakes_on_new_data(cluster, topic_name):
    broker, mine = _one_leader_topic(cluster, topic_name)
    addr = _addr(cluster, broker)
    sid = _fetch(addr, 12, _by_name(topic_name, mine), 0, 0).session_id
    assert sid != 0
    target = mine[0]
    # 60 s of max wait against the helper's 30 s socket timeout: only a wake-up answers it.
    timer = threading.Timer(1.0, produce, (cluster.bootstrap, topic_name, [b"wake"]),
                            {"partition": target, "acks": "all"})
    timer.start()
    try:
        woken = _answered(_fetch(addr, 12, [], sid, 1, wait_ms=60_000))
    finally:
        timer.join()
    assert list(woken) == [target] and woken[target][2]


def test_topic_ids_sessions_and_unknown_topic_id(cluster, topic_name):
    broker, mine = _one_leader_topic(cluster, topic_name)
    addr = _addr(cluster, broker)
    md = raw_request(*addr, 3, 12, topics=[{"name": topic_name, "topic_id": None}])
    topic_id = md.topics[0].topic_id
    ghost = uuid.uuid4()
    topics = [{"topic_id": topic_id, "partitions": [
        {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20} for p in mine]},
        {"topic_id": ghost, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]
    full = _fetch(addr, 17, topics, 0, 0)
    assert int(full.error_code) == 0 and full.session_id != 0
    by_id = {t.topic_id: {int(p.partition_index): int(p.error_code) for p in t.partitions}
             for t in full.responses}
    assert by_id[topic_id] == dict.fromkeys(mine, 0)
    assert by_id[ghost] == {0: ErrorCode.unknown_topic_id}
    # The unknown id stays in the session and keeps its error; the known ones go quiet.
    again = _fetch(addr, 17, [], full.session_id, 1)
    assert {t.topic_id for t in again.responses} == {ghost}
    assert int(_fetch(addr, 12, [], full.session_id, 2).error_code) == \
        ErrorCode.fetch_session_topic_id_error


def test_kafka_python_consumer_uses_sessions_and_sees_every_record_across_a_leader_change(
        cluster, topic_name):
    partitions = 12
    create_topic(cluster.bootstrap, topic_name, partitions, 3)
    wait_until(lambda: all(v >= 0 for v in partition_leaders(cluster.bootstrap,
                                                             topic_name).values()) or None,
               30, "leaders")
    first = [b"first-%d" % i for i in range(120)]
    produce(cluster.bootstrap, topic_name, first, acks="all")
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=200,
                             request_timeout_ms=30000)
    seen: list[bytes] = []
    try:
        consumer.assign([KpTopicPartition(topic_name, p) for p in range(partitions)])

        def drain(expected: int):
            def step():
                for records in consumer.poll(timeout_ms=500).values():
                    seen.extend(r.value for r in records)
                return len(seen) >= expected or None
            wait_until(step, 60, f"{expected} records")

        drain(len(first))
        handlers = consumer._fetcher._session_handlers

        def incremental() -> bool:
            # The broker granted sessions and the client goes on with incremental fetches
            # (kafka-python's FetchSessionHandler resets to a full fetch on any error).
            seen.extend(r.value for records in consumer.poll(timeout_ms=200).values()
                        for r in records)
            return bool(handlers) and all(h.next_metadata.session_id != 0 and
                                          h.next_metadata.epoch > 3 for h in handlers.values())

        wait_until(incremental, 30, "incremental fetch sessions with every broker")

        # Leader change: stop the broker leading partition 0.
        victim = partition_leaders(cluster.bootstrap, topic_name)[0]
        cluster.stop_broker(victim)
        try:
            wait_until(lambda: partition_leaders(cluster.bootstrap, topic_name)[0] not in
                       (victim, -1) or None, 60, "a new leader for partition 0")
            second = [b"second-%d" % i for i in range(120)]
            produce(cluster.bootstrap, topic_name, second, acks="all")
            drain(len(first) + len(second))
        finally:
            cluster.start_broker(victim)
            cluster.wait_for_brokers([victim], timeout_s=60)
        assert sorted(seen) == sorted(first + second)
    finally:
        consumer.close()


def test_followers_replicate_through_incremental_sessions(cluster, topic_name):
    """A follower's fetcher keeps one session with each leader: the partitions of a new
    replication-3 topic join the sessions of the two followers of each one, so the partitions
    cached on each leader grow by twice the partitions it leads."""
    def scraped():
        try:
            return {b: _session_metrics(cluster, b)[1] for b in cluster.broker_ids}
        except OSError:  # a broker restarted by an earlier test may still be starting
            return None
    before = wait_until(scraped, 60, "every broker's /metrics")
    partitions = 6
    create_topic(cluster.bootstrap, topic_name, partitions, 3)
    produce(cluster.bootstrap, topic_name, [b"r%d" % i for i in range(60)], acks="all")
    led: dict[int, int] = {}
    for leader in partition_leaders(cluster.bootstrap, topic_name).values():
        led[leader] = led.get(leader, 0) + 1

    def grown():
        now = {b: _session_metrics(cluster, b)[1] for b in led}
        return all(now[b] - before[b] >= 2 * k for b, k in led.items()) or None
    wait_until(grown, 60, "the new partitions in the followers' sessions on every leader")


def test_leader_hints_from_a_broker_that_does_not_lead(cluster, topic_name):
    """KIP-951 (Produce v10+, Fetch v16+): a partition refused as not led here names its
    current leader and that leader's endpoint."""
    broker, mine = _one_leader_topic(cluster, topic_name)
    other = next(b for b in cluster.broker_ids if b != broker)
    addr = _addr(cluster, other)
    batch = build_batch([b"hint"])
    produced = raw_request(*addr, 0, 10, transactional_id=None, acks=1,
                           timeout=datetime.timedelta(seconds=10), topic_data=[
                               {"name": topic_name, "partition_data": [
                                   {"index": mine[0], "records": batch}]}])
    p = produced.responses[0].partition_responses[0]
    assert int(p.error_code) == ErrorCode.not_leader_or_follower
    assert p.current_leader.leader_id == broker and p.current_leader.leader_epoch >= 0
    assert [(n.node_id, n.port) for n in produced.node_endpoints] == [
        (broker, _addr(cluster, broker)[1])]
    md = raw_request(*addr, 3, 12, topics=[{"name": topic_name, "topic_id": None}])
    topics = [{"topic_id": md.topics[0].topic_id, "partitions": [
        {"partition": mine[0], "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]
    fetched = _fetch(addr, 16, topics, 0, -1)
    f = fetched.responses[0].partitions[0]
    assert int(f.error_code) == ErrorCode.not_leader_or_follower
    assert f.current_leader.leader_id == broker
    assert [n.node_id for n in fetched.node_endpoints] == [broker]

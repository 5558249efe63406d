"""Transactions on the partition side (KIP-98), driven by raw requests on real brokers.

Without the transaction coordinator a transaction is: an idempotent producer id
(InitProducerId), transactional Produce batches, and a WriteTxnMarkers request sent to the
partition leader as a coordinator would.  Real consumers then read the partition:
confluent-kafka (librdkafka) and kafka-python in read_committed must never show an aborted
record, must show every committed one and must stop at the last stable offset while a
transaction is open; read_uncommitted shows everything.
"""

from __future__ import annotations

import datetime
import signal
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from tests.integration.clients import consume_assigned, create_topic, raw_request
from tests.integration.conftest import serve_cluster
from tests.integration.replication_checks import partition_isrs, partition_leaders, wait_until
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Raw transactions have no coordinator to verify them with (KIP-890): off here, on in
    # test_transactions_e2e.py.
    yield from serve_cluster(tmp_path_factory, 3,
                             {"transaction.partition.verification.enable": "false"})


def _addr(cluster, broker_id: int) -> tuple[str, int]:
    slot = next(b for b in cluster.brokers if b.id == broker_id)
    return slot.host, slot.port


# What a client (or the transaction coordinator) retries at the leader Metadata names next.
_RETRIABLE = {ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
              ErrorCode.leader_not_available}


class Partition:
    """One partition of a new topic (replication 3) and raw requests to its leader."""

    def __init__(self, cluster, topic: str) -> None:
        self.cluster, self.topic = cluster, topic

        def created():
            try:
                create_topic(cluster.bootstrap, topic, 1, 3)
            except KafkaException as exc:  # a broker (re)started just now is not known yet
                if exc.args[0].code() != KafkaError.INVALID_REPLICATION_FACTOR:
                    raise
                return None
            return True

        wait_until(created, 60, "the topic created with every broker known")
        wait_until(lambda: len(partition_isrs(cluster.bootstrap, topic).get(0, [])) == 3,
                   60, "a full ISR")
        self.seqs: dict[int, int] = {}

    def leader(self) -> int:
        return wait_until(lambda: (partition_leaders(self.cluster.bootstrap, self.topic)
                                   .get(0, -1) + 1) or None, 60, "a leader") - 1

    def addr(self) -> tuple[str, int]:
        return _addr(self.cluster, self.leader())

    def producer(self) -> int:
        r = raw_request(*_addr(self.cluster, self.cluster.broker_ids[0]), 22, 4,
                        transactional_id=None,
                        transaction_timeout=datetime.timedelta(seconds=60),
                        producer_id=-1, producer_epoch=-1)
        assert int(r.error_code) == 0 and r.producer_epoch == 0
        return int(r.producer_id)

    def produce(self, pid: int | None, values: list[bytes], *, transactional: bool = True,
                epoch: int = 0) -> int:
        """Append one batch; its base offset."""
        seq = self.seqs.get(pid, 0) if pid is not None else -1
        batch = build_batch(values, producer_id=-1 if pid is None else pid,
                            producer_epoch=-1 if pid is None else epoch, base_sequence=seq,
                            transactional=transactional, timestamp_ms=int(time.time() * 1000))

        def send():
            r = raw_request(*self.addr(), 0, 9,
                            transactional_id="raw-txn" if transactional else None, acks=-1,
                            timeout=datetime.timedelta(seconds=30), topic_data=[
                                {"name": self.topic, "partition_data": [
                                    {"index": 0, "records": batch}]}])
            p = r.responses[0].partition_responses[0]
            # As a client does: the leader named by Metadata may not have applied its
            # LeaderAndIsr yet (a broker restarted by an earlier test).
            return None if ErrorCode(p.error_code) in _RETRIABLE else p

        p = wait_until(send, 60, "the leader to accept the batch")
        assert int(p.error_code) == 0, ErrorCode(p.error_code).name
        if pid is not None:
            self.seqs[pid] = seq + len(values)
        return int(p.base_offset)

    def marker(self, pid: int, committed: bool, *, epoch: int = 0,
               coordinator_epoch: int = 0) -> ErrorCode:
        def send():
            r = raw_request(*self.addr(), 27, 1, markers=[{
                "producer_id": pid, "producer_epoch": epoch, "transaction_result": committed,
                "topics": [{"name": self.topic, "partition_indexes": [0]}],
                "coordinator_epoch": coordinator_epoch}])
            assert r.markers[0].producer_id == pid
            code = ErrorCode(r.markers[0].topics[0].partitions[0].error_code)
            return None if code in _RETRIABLE else (code,)  # the coordinator retries these

        return wait_until(send, 60, "the leader to take the marker")[0]

    def fetch(self, broker_id: int | None = None, isolation: int = 1):
        addr = self.addr() if broker_id is None else _addr(self.cluster, broker_id)
        r = raw_request(*addr, 1, 11, replica_id=-1,
                        max_wait=datetime.timedelta(milliseconds=0), min_bytes=1,
                        max_bytes=1 << 20, isolation_level=isolation, session_id=0,
                        session_epoch=-1, topics=[{"topic": self.topic, "partitions": [{
                            "partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                            "current_leader_epoch": -1, "log_start_offset": -1}]}],
                        forgotten_topics_data=[], rack_id="")
        return r.responses[0].partitions[0]

    def latest(self, isolation: int) -> int:
        r = raw_request(*self.addr(), 2, 5, replica_id=-1, isolation_level=isolation,
                        topics=[{"name": self.topic, "partitions": [{
                            "partition_index": 0, "current_leader_epoch": -1,
                            "timestamp": -1}]}])
        p = r.topics[0].partitions[0]
        assert int(p.error_code) == 0
        return int(p.offset)


def _aborted(p) -> list[tuple[int, int]]:
    return sorted((int(t.producer_id), int(t.first_offset))
                  for t in (p.aborted_transactions or ()))


def _confluent_values(cluster, topic: str, isolation: str, expected: int,
                      timeout_s: float = 30) -> list[bytes]:
    msgs = consume_assigned(cluster.bootstrap, topic, [0], expected, timeout_s=timeout_s,
                            **{"isolation.level": isolation})
    return [m.value() for m in msgs]


def _kafka_python_values(cluster, topic: str, isolation: str, idle_s: float = 3) -> list[bytes]:
    """Everything kafka-python returns until ``idle_s`` pass with nothing new."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=None,
                             enable_auto_commit=False, isolation_level=isolation,
                             auto_offset_reset="earliest")
    tp = KTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[bytes] = []
    quiet_since = time.monotonic()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() - quiet_since < idle_s and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=500)
            for records in batch.values():
                got.extend(r.value for r in records)
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return got


def test_read_committed_consumers_see_committed_records_only(cluster, topic_name):
    part = Partition(cluster, topic_name)
    a, b, c = part.producer(), part.producer(), part.producer()
    part.produce(None, [b"plain-0"], transactional=False)
    part.produce(a, [b"aborted-0", b"aborted-1"])
    first_b = part.produce(b, [b"committed-0"])
    part.produce(a, [b"aborted-2"])
    part.produce(b, [b"committed-1", b"committed-2"])
    assert part.marker(a, False) == ErrorCode.none
    part.produce(None, [b"plain-1"], transactional=False)
    assert part.marker(b, True) == ErrorCode.none
    open_first = part.produce(c, [b"open-0"])
    part.produce(None, [b"plain-2"], transactional=False)

    committed = [b"plain-0", b"committed-0", b"committed-1", b"committed-2", b"plain-1"]
    uncommitted = [b"plain-0", b"aborted-0", b"aborted-1", b"committed-0", b"aborted-2",
                   b"committed-1", b"committed-2", b"plain-1", b"open-0", b"plain-2"]
    # The LSO is the open transaction's first offset: read_committed stops there.
    fetched = part.fetch()
    assert fetched.last_stable_offset == open_first < fetched.high_watermark
    assert _aborted(fetched) == [(a, 1)]
    assert part.latest(1) == open_first and part.latest(0) == fetched.high_watermark
    assert part.fetch(isolation=0).aborted_transactions is None
    assert _kafka_python_values(cluster, topic_name, "read_committed") == committed
    assert _confluent_values(cluster, topic_name, "read_committed", len(committed)) == committed
    assert _confluent_values(cluster, topic_name, "read_committed", len(committed) + 1,
                             timeout_s=3) == committed  # nothing past the LSO
    assert _kafka_python_values(cluster, topic_name, "read_uncommitted") == uncommitted
    assert _confluent_values(cluster, topic_name, "read_uncommitted",
                             len(uncommitted)) == uncommitted

    # DescribeProducers shows the open transaction on every replica.
    for broker in cluster.broker_ids:
        r = raw_request(*_addr(cluster, broker), 61, 0, topics=[
            {"name": topic_name, "partition_indexes": [0]}])
        pr = r.topics[0].partitions[0]
        assert int(pr.error_code) == 0
        states = {int(s.producer_id): s for s in pr.active_producers}
        assert states[c].current_txn_start_offset == open_first
        assert states[b].current_txn_start_offset == -1 and states[b].last_sequence == 2
        assert states[a].last_sequence == 2

    # Committing the open transaction releases everything after it.
    assert part.marker(c, True, coordinator_epoch=1) == ErrorCode.none
    assert part.fetch().last_stable_offset == part.fetch().high_watermark
    final = [*committed, b"open-0", b"plain-2"]
    assert _confluent_values(cluster, topic_name, "read_committed", len(final)) == final
    assert first_b == 3


def test_marker_fencing_and_client_rules(cluster, topic_name):
    part = Partition(cluster, topic_name)
    p = part.producer()
    part.produce(p, [b"x"])
    assert part.marker(p, True, coordinator_epoch=5) == ErrorCode.none
    part.produce(p, [b"y"])
    # a zombie coordinator (older coordinator epoch) is fenced
    assert part.marker(p, False, coordinator_epoch=4) == ErrorCode.transaction_coordinator_fenced
    # a newer producer epoch fences the old one
    assert part.marker(p, False, epoch=1, coordinator_epoch=5) == ErrorCode.none
    assert part.marker(p, True, epoch=0, coordinator_epoch=5) == ErrorCode.invalid_producer_epoch
    # a partition no broker hosts
    r = raw_request(*part.addr(), 27, 1, markers=[{
        "producer_id": p, "producer_epoch": 1, "transaction_result": True,
        "topics": [{"name": topic_name, "partition_indexes": [7]}], "coordinator_epoch": 5}])
    assert int(r.markers[0].topics[0].partitions[0].error_code) == \
        ErrorCode.unknown_topic_or_partition
    # transactional records need a transactional id
    batch = build_batch([b"z"], producer_id=p, producer_epoch=1, base_sequence=0,
                        transactional=True)
    r = raw_request(*part.addr(), 0, 9, transactional_id=None, acks=1,
                    timeout=datetime.timedelta(seconds=10), topic_data=[
                        {"name": topic_name, "partition_data": [{"index": 0, "records": batch}]}])
    assert int(r.responses[0].partition_responses[0].error_code) == \
        ErrorCode.transactional_id_authorization_failed


def test_leader_sigkill_with_open_transaction_keeps_lso_and_aborted_list(cluster, topic_name):
    part = Partition(cluster, topic_name)
    a, b = part.producer(), part.producer()
    part.produce(a, [b"a0", b"a1"])
    open_first = part.produce(b, [b"b0"])
    part.produce(a, [b"a2"])
    assert part.marker(a, False) == ErrorCode.none
    part.produce(None, [b"plain"], transactional=False)
    before = part.fetch()
    assert before.last_stable_offset == open_first
    assert _aborted(before) == [(a, 0)]
    old = part.leader()
    # every replica has everything (acks=all) before the kill
    cluster.kill_broker(old, signal.SIGKILL)
    try:
        wait_until(lambda: part.leader() != old or None, 60, "a new leader")

        def same():
            try:
                now = part.fetch()
            except OSError:
                return None
            if int(now.error_code) or now.high_watermark < before.high_watermark:
                return None
            return now
        after = wait_until(same, 60, "the new leader serving with its high watermark")
        assert after.last_stable_offset == before.last_stable_offset
        assert _aborted(after) == _aborted(before)
        assert _kafka_python_values(cluster, topic_name, "read_committed") == []
        assert part.marker(b, True) == ErrorCode.none
        assert _confluent_values(cluster, topic_name, "read_committed", 2) == [b"b0", b"plain"]
    finally:
        cluster.start_broker(old)
        cluster.wait_for_brokers(cluster.broker_ids, timeout_s=60)


def test_restart_keeps_producer_and_transaction_state(cluster, topic_name):
    part = Partition(cluster, topic_name)
    a, b = part.producer(), part.producer()
    part.produce(a, [b"a0"])
    assert part.marker(a, False, coordinator_epoch=3) == ErrorCode.none
    open_first = part.produce(b, [b"b0", b"b1"])
    leader = part.leader()

    def describe(broker):
        r = raw_request(*_addr(cluster, broker), 61, 0, topics=[
            {"name": topic_name, "partition_indexes": [0]}])
        pr = r.topics[0].partitions[0]
        if int(pr.error_code):
            return None
        return sorted((int(s.producer_id), int(s.producer_epoch), int(s.last_sequence),
                       int(s.coordinator_epoch), int(s.current_txn_start_offset))
                      for s in pr.active_producers)

    expected = [(a, 0, 0, 3, -1), (b, 0, 1, -1, open_first)]
    assert describe(leader) == expected
    cluster.stop_broker(leader)  # clean shutdown: a producer snapshot at the log end
    part_dir = next(d / f"{topic_name}-0" for d in cluster.broker_log_dirs(leader)
                    if (d / f"{topic_name}-0").exists())
    assert list(part_dir.glob("*.snapshot"))
    cluster.start_broker(leader)
    cluster.wait_for_brokers(cluster.broker_ids, timeout_s=60)
    assert wait_until(lambda: describe(leader), 60, "the restarted replica") == expected
    # The transaction is still open everywhere: committing it works and releases it.
    assert part.marker(b, True, coordinator_epoch=3) == ErrorCode.none
    wait_until(lambda: part.fetch().last_stable_offset == part.fetch().high_watermark or None,
               30, "LSO = HW")
    assert _confluent_values(cluster, topic_name, "read_committed", 2) == [b"b0", b"b1"]


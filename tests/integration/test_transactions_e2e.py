"""Transactions end to end (KIP-98, KIP-890): real transactional producers through the
transaction coordinator, the partition leaders (with transaction verification on, Kafka's
default) and the group coordinator; real consumers in read_committed."""

from __future__ import annotations

import datetime
import time

import pytest

from tests.integration.clients import raw_request
from tests.integration.conftest import serve_cluster
from tests.integration.replication_checks import wait_until
from tests.integration.test_transactions_partition import (
    Partition,
    _confluent_values,
    _kafka_python_values,
)
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from serve_cluster(tmp_path_factory, 3, {})


def test_transactional_producer_end_to_end(cluster, topic_name):
    """A real transactional producer (librdkafka) through the transaction coordinator:
    committed transactions are read, aborted ones never, by both consumers."""
    from confluent_kafka import Producer

    Partition(cluster, topic_name)
    producer = Producer({"bootstrap.servers": cluster.bootstrap,
                         "transactional.id": f"txn-{topic_name}", "linger.ms": 5})
    producer.init_transactions(60)
    expected = []
    for n, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        values = [f"t{n}-{i}".encode() for i in range(3)]
        for v in values:
            producer.produce(topic_name, value=v, partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(60)
            expected.extend(values)
        else:
            producer.abort_transaction(60)
    assert _confluent_values(cluster, topic_name, "read_committed", len(expected)) == expected
    assert _kafka_python_values(cluster, topic_name, "read_committed") == expected
    assert len(_kafka_python_values(cluster, topic_name, "read_uncommitted")) == 15


def test_transactional_offsets_are_applied_by_the_commit_marker(cluster, topic_name):
    """send_offsets_to_transaction (TxnOffsetCommit): the offsets become the group's
    committed offsets only when the COMMIT marker reaches __consumer_offsets (the
    WriteTxnMarkers handler's call to the group coordinator); an ABORT drops them."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTopicPartition

    Partition(cluster, topic_name)
    group = f"g-{topic_name}"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": cluster.bootstrap,
                         "transactional.id": f"txo-{topic_name}"})
    try:
        producer.init_transactions(60)

        def send(offset: int, commit: bool) -> None:
            producer.begin_transaction()
            producer.produce(topic_name, value=b"out-%d" % offset, partition=0)
            producer.send_offsets_to_transaction(
                [CTopicPartition(topic_name, 0, offset)], consumer.consumer_group_metadata(),
                60)
            if commit:
                producer.commit_transaction(60)
            else:
                producer.abort_transaction(60)

        def committed() -> int:
            got = consumer.committed([CTopicPartition(topic_name, 0)], timeout=30)
            return got[0].offset

        # Markers are written after EndTxn is answered: poll until the commit shows.
        send(5, True)
        wait_until(lambda: committed() == 5 or None, 30, "offset 5 committed")
        send(9, False)
        seen = set()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            seen.add(committed())
        assert seen == {5}  # the aborted offsets never show
        send(12, True)
        wait_until(lambda: committed() == 12 or None, 30, "offset 12 committed")
    finally:
        consumer.close()
    assert _confluent_values(cluster, topic_name, "read_committed", 2) == [b"out-5", b"out-12"]


def test_leader_refuses_a_partition_not_in_the_transaction(cluster, topic_name):
    """KIP-890: the first transactional batch of a partition the coordinator does not
    have in the transaction is INVALID_TXN_STATE; after AddPartitionsToTxn it is appended."""
    part = Partition(cluster, topic_name)
    txn_id = f"verify-{topic_name}"
    any_broker = part.addr()

    def init():
        r = raw_request(*any_broker, 10, 3, key=txn_id, key_type=1)
        if int(r.error_code):
            return None
        coordinator = next(b for b in cluster.brokers if b.id == r.node_id)
        r = raw_request(coordinator.host, coordinator.port, 22, 4, transactional_id=txn_id,
                        transaction_timeout=datetime.timedelta(seconds=60),
                        producer_id=-1, producer_epoch=-1)
        return (coordinator, r) if int(r.error_code) == 0 else None

    coordinator, init_response = wait_until(init, 60, "a transactional producer id")
    pid, epoch = int(init_response.producer_id), int(init_response.producer_epoch)

    def produce(seq):
        batch = build_batch([b"v%d" % seq], producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, transactional=True,
                            timestamp_ms=int(time.time() * 1000))
        r = raw_request(*part.addr(), 0, 9, transactional_id=txn_id, acks=-1,
                        timeout=datetime.timedelta(seconds=30), topic_data=[
                            {"name": topic_name, "partition_data": [
                                {"index": 0, "records": batch}]}])
        return ErrorCode(r.responses[0].partition_responses[0].error_code)

    assert produce(0) == ErrorCode.invalid_txn_state
    assert part.fetch(isolation=0).high_watermark == 0  # nothing was appended
    added = raw_request(coordinator.host, coordinator.port, 24, 3,
                        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                            {"name": topic_name, "partitions": [0]}])
    assert int(added.results_by_topic_v3_and_below[0].results_by_partition[0]
               .partition_error_code) == 0
    assert produce(0) == ErrorCode.none
    assert part.fetch().last_stable_offset == 0  # the transaction is open

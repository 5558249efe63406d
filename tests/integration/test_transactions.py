"""Transactions (KIP-98) end to end: real brokers (3, ``__transaction_state`` RF 3, min ISR
2) and real transactional clients (confluent-kafka, kafka-python).

Commit/abort with read_committed consumers, consume-transform-produce with
``send_offsets_to_transaction``, fencing of a zombie producer, the coordinator's abort of a
transaction that outlives its timeout, DescribeTransactions/ListTransactions, and a SIGKILL
of the coordinator in the middle of a transaction (the transaction still ends cleanly).
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient

from tests.conftest import wait_for
from tests.integration.clients import create_topic, produce, raw_request
from tests.integration.conftest import serve_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

OVERRIDES = {
    "transaction.state.log.num.partitions": "5",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}


@pytest.fixture(scope="module")
def tcluster(tmp_path_factory):
    for cluster in serve_cluster(tmp_path_factory, 3, OVERRIDES):
        wait_for(lambda c=cluster: _every_broker_knows_every_broker(c), 60, interval_s=0.3,
                 what="broker metadata")
        yield cluster


def _every_broker_knows_every_broker(cluster) -> bool:
    return all(len(AdminClient({"bootstrap.servers": f"{s.host}:{s.port}"})
                   .list_topics(timeout=5).brokers) == 3 for s in cluster.brokers)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _producer(bootstrap: str, txn_id: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                     "enable.idempotence": True, "acks": "all", **extra})


def _read_all(bootstrap: str, topic: str, partitions: int, isolation: str,
              timeout_s: float = 60) -> list[bytes]:
    """Every record ``isolation`` shows, read until each partition's position reaches its
    high watermark (markers and aborted records are skipped by the client)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("reader"),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": isolation})
    tps = [CTopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(tps)
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        ends = {p: consumer.get_watermark_offsets(CTopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
        while time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is not None:
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(msg.error())
                got.append(msg.value())
                continue
            positions = {tp.partition: tp.offset for tp in consumer.position(tps)}
            if all(positions[p] >= ends[p] for p in range(partitions)):
                return got
        raise AssertionError(f"{topic}: did not reach the end (ends {ends})")
    finally:
        consumer.close()


def _coordinator_of(cluster, txn_id: str, avoid: int | None = None) -> int:
    asked = [s for s in cluster.brokers if s.id != avoid]

    def lookup():
        s = asked[int(time.monotonic() * 5) % len(asked)]  # any live broker answers
        resp = raw_request(s.host, s.port, 10, 4, key_type=1, coordinator_keys=[txn_id])
        entry = resp.coordinators[0]
        return int(entry.node_id) if entry.error_code == 0 else None

    return wait_for(lookup, 30, interval_s=0.2, what="transaction coordinator")


def _describe(cluster, txn_id: str):
    node = _coordinator_of(cluster, txn_id)
    s = next(b for b in cluster.brokers if b.id == node)
    return raw_request(s.host, s.port, 65, 0, transactional_ids=[txn_id]).transaction_states[0]


def _wait_state(cluster, txn_id: str, wanted: str):
    def reached():
        state = _describe(cluster, txn_id)
        return state if state.transaction_state == wanted else None

    return wait_for(reached, 30, interval_s=0.2, what=f"{txn_id} in {wanted}")


def test_commit_and_abort_with_read_committed(tcluster, topic_name):
    bootstrap = tcluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=2, replication=3)
    txn_id = _name("tx")
    p = _producer(bootstrap, txn_id)
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, f"c1-{i}".encode(), partition=i % 2)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic_name, f"ab-{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(60)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic_name, f"c2-{i}".encode(), partition=i % 2)
    p.commit_transaction(60)

    committed = _read_all(bootstrap, topic_name, 2, "read_committed")
    assert sorted(committed) == sorted([f"c1-{i}".encode() for i in range(10)]
                                       + [f"c2-{i}".encode() for i in range(4)])
    everything = _read_all(bootstrap, topic_name, 2, "read_uncommitted")
    assert len(everything) == 20 and any(v.startswith(b"ab-") for v in everything)

    state = _wait_state(tcluster, txn_id, "CompleteCommit")
    assert state.error_code == 0 and list(state.topics) == []


def test_kafka_python_transactions(tcluster, topic_name):
    from kafka import KafkaProducer

    bootstrap = tcluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=1, replication=3)
    p = KafkaProducer(bootstrap_servers=bootstrap.split(","), transactional_id=_name("kp"),
                      acks="all", enable_idempotence=True)
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(5):
            p.send(topic_name, f"keep-{i}".encode(), partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic_name, b"drop", partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=10)
    assert _read_all(bootstrap, topic_name, 1, "read_committed") == [
        f"keep-{i}".encode() for i in range(5)]


def _consume_transform_produce(bootstrap: str, source: str, sink: str, group: str,
                               txn_id: str, commit: bool, before_end=None) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed",
                         "session.timeout.ms": 6000})
    consumer.subscribe([source])
    producer = _producer(bootstrap, txn_id)
    producer.init_transactions(60)
    try:
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(msg)
        assert len(got) == 10
        producer.begin_transaction()
        for msg in got:
            producer.produce(sink, msg.value().upper(), partition=0)
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 60)
        if before_end is not None:
            before_end()
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
        return len(got)
    finally:
        consumer.close()


def test_send_offsets_to_transaction(tcluster):
    bootstrap = tcluster.bootstrap
    source, sink = _name("in"), _name("out")
    create_topic(bootstrap, source, partitions=1, replication=3)
    create_topic(bootstrap, sink, partitions=1, replication=3)
    produce(bootstrap, source, [f"r{i}".encode() for i in range(10)], partition=0)
    group = _name("ctp")

    def committed() -> int:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "enable.auto.commit": False})
        try:
            return c.committed([CTopicPartition(source, 0)], timeout=10)[0].offset
        finally:
            c.close()

    def unstable_while_open() -> None:
        # OffsetFetch v7 require_stable (KIP-447): the undecided commit is not served.
        s = tcluster.brokers[0]
        found = raw_request(s.host, s.port, 10, 4, key_type=0, coordinator_keys=[group])
        node = int(found.coordinators[0].node_id)
        c = next(b for b in tcluster.brokers if b.id == node)
        resp = raw_request(c.host, c.port, 9, 7, group_id=group, require_stable=True,
                           topics=[{"name": source, "partition_indexes": [0]}])
        assert resp.topics[0].partitions[0].error_code == 88  # UNSTABLE_OFFSET_COMMIT

    # Aborted: neither the output nor the offsets count.
    _consume_transform_produce(bootstrap, source, sink, group, _name("ctp-tx"), commit=False,
                               before_end=unstable_while_open)
    assert _read_all(bootstrap, sink, 1, "read_committed") == []
    assert committed() < 0
    # Committed: both at once.
    _consume_transform_produce(bootstrap, source, sink, group, _name("ctp-tx"), commit=True)
    assert _read_all(bootstrap, sink, 1, "read_committed") == [
        f"R{i}".encode() for i in range(10)]
    wait_for(lambda: committed() == 10, 30, what="transactional offsets committed")


def test_zombie_producer_is_fenced(tcluster, topic_name):
    bootstrap = tcluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=1, replication=3)
    txn_id = _name("zombie")
    old = _producer(bootstrap, txn_id)
    old.init_transactions(60)
    old.begin_transaction()
    old.produce(topic_name, b"zombie", partition=0)
    old.flush(30)
    new = _producer(bootstrap, txn_id)
    new.init_transactions(60)  # aborts the old transaction and bumps the epoch
    new.begin_transaction()
    new.produce(topic_name, b"alive", partition=0)
    new.commit_transaction(60)
    with pytest.raises(KafkaException) as err:
        old.commit_transaction(30)
    assert err.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                        KafkaError.INVALID_PRODUCER_EPOCH)
    assert _read_all(bootstrap, topic_name, 1, "read_committed") == [b"alive"]


def test_timed_out_transaction_is_aborted(tcluster, topic_name):
    bootstrap = tcluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=1, replication=3)
    txn_id = _name("slow")
    p = _producer(bootstrap, txn_id, **{"transaction.timeout.ms": 2000})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic_name, b"too-late", partition=0)
    p.flush(30)
    state = _wait_state(tcluster, txn_id, "CompleteAbort")  # the coordinator's abort
    assert state.producer_epoch == 1  # bumped: the producer is fenced
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert _read_all(bootstrap, topic_name, 1, "read_committed") == []


def test_list_and_describe_transactions(tcluster, topic_name):
    bootstrap = tcluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=1, replication=3)
    txn_id = _name("listed")
    p = _producer(bootstrap, txn_id)
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic_name, b"open", partition=0)
    p.flush(30)
    state = _describe(tcluster, txn_id)
    assert (state.error_code, state.transaction_state) == (0, "Ongoing")
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic_name, [0])]
    node = _coordinator_of(tcluster, txn_id)
    s = next(b for b in tcluster.brokers if b.id == node)
    listed = raw_request(s.host, s.port, 66, 1, state_filters=["Ongoing", "Nope"],
                         producer_id_filters=[], duration_filter=-1)
    assert listed.error_code == 0 and list(listed.unknown_state_filters) == ["Nope"]
    assert txn_id in {t.transactional_id for t in listed.transaction_states}
    p.commit_transaction(60)


def test_coordinator_killed_mid_transaction(tcluster, topic_name):
    """SIGKILL of the transaction coordinator between the writes and the commit: the
    client finds the new coordinator and the transaction ends whole (committed, or aborted
    and retried), never half-visible, never hanging."""
    bootstrap = tcluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=2, replication=3)
    txn_id = _name("failover")
    p = _producer(bootstrap, txn_id)
    p.init_transactions(60)
    p.begin_transaction()
    values = [f"v{i}".encode() for i in range(20)]
    for i, v in enumerate(values):
        p.produce(topic_name, v, partition=i % 2)
    p.flush(30)
    victim = _coordinator_of(tcluster, txn_id)
    tcluster.kill_broker(victim, signal.SIGKILL)
    try:
        try:
            p.commit_transaction(90)
            outcome = "committed"
        except KafkaException as exc:
            assert exc.args[0].txn_requires_abort(), exc
            p.abort_transaction(90)
            outcome = "aborted"
        assert _coordinator_of(tcluster, txn_id, avoid=victim) != victim
        seen = _read_all(bootstrap, topic_name, 2, "read_committed", timeout_s=90)
        assert sorted(seen) == (sorted(values) if outcome == "committed" else [])
        # The producer goes on with the new coordinator.
        p.begin_transaction()
        p.produce(topic_name, b"after", partition=0)
        p.commit_transaction(60)
        assert b"after" in _read_all(bootstrap, topic_name, 2, "read_committed")
    finally:
        tcluster.start_broker(victim)
        tcluster.wait_for_brokers([victim], timeout_s=60)


def test_bad_transactional_requests(tcluster, topic_name):
    """Kafka's error codes for requests a client library would not send."""
    create_topic(tcluster.bootstrap, topic_name, partitions=1, replication=3)
    txn_id = _name("raw")
    node = _coordinator_of(tcluster, txn_id)
    s = next(b for b in tcluster.brokers if b.id == node)
    other = next(b for b in tcluster.brokers if b.id != node)

    def init(broker, timeout_ms: int, version: int = 4, txn: str = txn_id):
        import datetime

        return raw_request(broker.host, broker.port, 22, version, transactional_id=txn,
                           transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                           producer_id=-1, producer_epoch=-1)

    assert init(other, 60000).error_code == 16  # NOT_COORDINATOR
    assert init(s, 0).error_code == 50  # INVALID_TRANSACTION_TIMEOUT
    assert init(s, 900001).error_code == 50
    ok = init(s, 60000)
    assert ok.error_code == 0 and ok.producer_epoch == 0
    pid = int(ok.producer_id)

    def add(topics, epoch=0, producer_id=pid):
        resp = raw_request(s.host, s.port, 24, 3, v3_and_below_transactional_id=txn_id,
                           v3_and_below_producer_id=producer_id,
                           v3_and_below_producer_epoch=epoch,
                           v3_and_below_topics=[{"name": t, "partitions": [0]} for t in topics])
        return {r.name: int(r.results_by_partition[0].partition_error_code)
                for r in resp.results_by_topic_v3_and_below}

    assert add(["no-such-topic", topic_name]) == {"no-such-topic": 3, topic_name: 55}
    assert add(["__consumer_offsets"]) == {"__consumer_offsets": 29}
    assert add([topic_name], producer_id=pid + 12345) == {topic_name: 49}
    assert add([topic_name], epoch=1) == {topic_name: 90}  # PRODUCER_FENCED
    assert add([topic_name]) == {topic_name: 0}

    def end(committed: bool, version: int = 3, epoch: int = 0) -> int:
        return int(raw_request(s.host, s.port, 26, version, transactional_id=txn_id,
                               producer_id=pid, producer_epoch=epoch,
                               committed=committed).error_code)

    assert end(True, version=1, epoch=5) == 47  # INVALID_PRODUCER_EPOCH before KIP-588
    assert end(True, epoch=5) == 90
    assert end(False) == 0
    _wait_state(tcluster, txn_id, "CompleteAbort")
    assert end(True) == 48  # INVALID_TXN_STATE: it was aborted


def test_transactions_stay_whole_across_a_coordinator_kill(tcluster, topic_name):
    """A producer commits transactions in a loop while its coordinator is SIGKILLed: every
    transaction is visible whole or not at all, and every acknowledged commit is visible."""
    import threading

    bootstrap = tcluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=2, replication=3)
    txn_id = _name("loop")
    p = _producer(bootstrap, txn_id)
    p.init_transactions(60)
    committed: list[int] = []
    aborted: list[int] = []
    started = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for i in range(30):
                p.begin_transaction()
                p.produce(topic_name, f"t{i}-a".encode(), partition=0)
                p.produce(topic_name, f"t{i}-b".encode(), partition=1)
                try:
                    p.commit_transaction(90)
                    committed.append(i)
                except KafkaException as exc:
                    if not exc.args[0].txn_requires_abort():
                        raise
                    p.abort_transaction(90)
                    aborted.append(i)
                if i == 4:
                    started.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)
            started.set()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert started.wait(120)
    victim = _coordinator_of(tcluster, txn_id)
    tcluster.kill_broker(victim, signal.SIGKILL)
    try:
        worker.join(240)
        assert not worker.is_alive(), "the producer hung"
        assert not errors, errors
        assert len(committed) + len(aborted) == 30
        seen = set(_read_all(bootstrap, topic_name, 2, "read_committed", timeout_s=90))
        for i in range(30):
            pair = {f"t{i}-a".encode(), f"t{i}-b".encode()}
            assert pair <= seen if i in committed else not pair & seen, i
    finally:
        tcluster.start_broker(victim)
        tcluster.wait_for_brokers([victim], timeout_s=60)


def test_kafka_python_consume_transform_produce(tcluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTopicPartition

    bootstrap = tcluster.bootstrap
    source, sink, group = _name("kin"), _name("kout"), _name("kgroup")
    create_topic(bootstrap, source, partitions=1, replication=3)
    create_topic(bootstrap, sink, partitions=1, replication=3)
    produce(bootstrap, source, [f"m{i}".encode() for i in range(8)], partition=0)
    consumer = KafkaConsumer(source, bootstrap_servers=bootstrap.split(","), group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             isolation_level="read_committed")
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","),
                             transactional_id=_name("kctp"), acks="all",
                             enable_idempotence=True)
    try:
        producer.init_transactions()
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 8 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        assert len(got) == 8
        producer.begin_transaction()
        for rec in got:
            producer.send(sink, rec.value[::-1], partition=0)
        tp = KTopicPartition(source, 0)
        # The consumer's group metadata (member id, generation: KIP-447's fencing).
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(8, "", -1)},
                                             consumer.group_metadata())
        producer.commit_transaction()
        assert wait_for(lambda: consumer.committed(tp) == 8, 30, what="committed offset")
    finally:
        producer.close(timeout=10)
        consumer.close()
    assert _read_all(bootstrap, sink, 1, "read_committed") == [
        f"m{i}".encode()[::-1] for i in range(8)]

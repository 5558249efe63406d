"""Consumer groups against real clients: confluent-kafka (range, cooperative-sticky),
kafka-python and aiokafka; committed offsets across restarts; session expiry.

Each group consumer runs in its own thread, commits synchronously after what it processed,
and records every (partition, offset) it saw: exactly-once means every acknowledged record
is seen once, across a rebalance caused by a member joining and another leaving.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient

from tests.conftest import wait_for
from tests.integration.clients import create_topic, produce
from tests.integration.conftest import serve_cluster
from weir.groups.codec import OFFSETS_TOPIC, partition_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "5",
    "offsets.topic.replication.factor": "1",
}
SESSION_MS = 6000
HEARTBEAT_MS = 300


@pytest.fixture(scope="module")
def gcluster(tmp_path_factory):
    yield from serve_cluster(tmp_path_factory, 1, GROUP_OVERRIDES)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- consumers in threads ----------------------------------------------------------------------


class Worker(threading.Thread):
    """One group member: consume, record, commit; leave the group on ``stop()``.

    Offsets of processed records stay ``pending`` until a commit succeeds; commits that
    fail (a rebalance moved the generation on, as Kafka does) are retried after the next
    record and, for partitions being revoked, in the revocation callback — the usual way to
    get exactly-once processing across rebalances with manual commits.
    """

    def __init__(self, bootstrap: str, topic: str, group: str, seen: list) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.group, self.seen = bootstrap, topic, group, seen
        self.stopping = threading.Event()
        self.count = 0
        self.pending: dict[int, int] = {}
        self.commit_failures: list[BaseException] = []
        self.errors: list[BaseException] = []

    def record(self, partition: int, offset: int) -> None:
        self.seen.append((partition, offset, self.name))
        self.pending[partition] = offset + 1
        self.count += 1

    def take(self, partitions: list[int] | None = None) -> dict[int, int]:
        wanted = self.pending if partitions is None else {
            p: o for p, o in self.pending.items() if p in partitions}
        return dict(wanted)

    def committed_ok(self, offsets: dict[int, int]) -> None:
        for p, o in offsets.items():
            if self.pending.get(p) == o:
                del self.pending[p]

    def stop(self, timeout_s: float = 30) -> None:
        self.stopping.set()
        self.join(timeout_s)
        assert not self.is_alive(), f"{self.name} did not stop"

    def run(self) -> None:
        try:
            self.consume()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)


class ConfluentWorker(Worker):
    assignor = "range"
    extra: dict = {}  # noqa: RUF012 - e.g. {"debug": "cgrp"} when investigating

    def _commit(self, c: Consumer, partitions: list[int] | None = None) -> None:
        offsets = self.take(partitions)
        if not offsets:
            return
        try:
            c.commit(offsets=[CTopicPartition(self.topic, p, o) for p, o in offsets.items()],
                     asynchronous=False)
            self.committed_ok(offsets)
        except KafkaException as exc:
            self.commit_failures.append(exc)

    def consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                      "partition.assignment.strategy": self.assignor, **self.extra})

        def on_revoke(consumer, partitions) -> None:
            self._commit(consumer, [tp.partition for tp in partitions])

        c.subscribe([self.topic], on_revoke=on_revoke)
        try:
            while not self.stopping.is_set():
                m = c.poll(0.1)
                if m is None or m.error():
                    continue
                self.record(m.partition(), m.offset())
                self._commit(c)
        finally:
            c.close()


class CooperativeWorker(ConfluentWorker):
    assignor = "cooperative-sticky"


class KafkaPythonWorker(Worker):
    def consume(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka import TopicPartition as KTopicPartition
        from kafka.errors import KafkaError as KError
        from kafka.structs import OffsetAndMetadata as KOffset

        worker = self

        def commit(c, partitions=None) -> None:
            offsets = worker.take(partitions)
            if not offsets:
                return
            try:
                c.commit({KTopicPartition(worker.topic, p): KOffset(o, "", -1)
                          for p, o in offsets.items()})
                worker.committed_ok(offsets)
            except KError as exc:
                worker.commit_failures.append(exc)

        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                          enable_auto_commit=False, auto_offset_reset="earliest",
                          session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                commit(c, [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned):
                pass

        c.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping.is_set():
                batch = c.poll(timeout_ms=100)
                for tp, msgs in batch.items():
                    for m in msgs:
                        self.record(tp.partition, m.offset)
                commit(c)
        finally:
            c.close()


class AioKafkaWorker(Worker):
    def consume(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka import TopicPartition as ATopicPartition
        from aiokafka.errors import KafkaError as AError

        worker = self

        async def commit(c, partitions=None) -> None:
            offsets = worker.take(partitions)
            if not offsets:
                return
            try:
                await c.commit({ATopicPartition(worker.topic, p): o for p, o in offsets.items()})
                worker.committed_ok(offsets)
            except AError as exc:
                worker.commit_failures.append(exc)

        c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=SESSION_MS,
                             heartbeat_interval_ms=HEARTBEAT_MS)

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                await commit(c, [tp.partition for tp in revoked])

            async def on_partitions_assigned(self, assigned):
                pass

        await c.start()
        c.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping.is_set():
                batch = await c.getmany(timeout_ms=100)
                for tp, msgs in batch.items():
                    for m in msgs:
                        self.record(tp.partition, m.offset)
                await commit(c)
        finally:
            await commit(c)
            await c.stop()


class SteadyProducer(threading.Thread):
    """Produce round-robin over the partitions at a steady pace until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, per_s: int = 300) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.per_s = topic, partitions, per_s
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.acked: set[tuple[int, int]] = set()
        self.errors: list = []
        self.stopping = threading.Event()

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.add((msg.partition(), msg.offset()))

    def run(self) -> None:
        i = 0
        start = time.monotonic()
        while not self.stopping.is_set():
            self.producer.produce(self.topic, value=b"%d" % i, partition=i % self.partitions,
                                  on_delivery=self._delivered)
            i += 1
            self.producer.poll(0)
            ahead = i / self.per_s - (time.monotonic() - start)
            if ahead > 0:
                self.stopping.wait(ahead)  # pacing, not synchronisation
        assert self.producer.flush(30) == 0


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([CTopicPartition(topic, p) for p in range(partitions)], timeout=20)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


@pytest.mark.slow
@pytest.mark.parametrize("worker_cls", [ConfluentWorker, CooperativeWorker,
                                        KafkaPythonWorker, AioKafkaWorker],
                         ids=["confluent-range", "confluent-cooperative", "kafka-python",
                              "aiokafka"])
def test_exactly_once_across_join_and_leave(gcluster, worker_cls):
    bootstrap, topic, group = gcluster.bootstrap, _name("g6"), _name("grp")
    create_topic(bootstrap, topic, 6)
    seen: list[tuple[int, int, str]] = []
    producer = SteadyProducer(bootstrap, topic, 6)
    workers = [worker_cls(bootstrap, topic, group, seen) for _ in range(3)]
    producer.start()
    try:
        for w in workers:
            w.start()
        wait_for(lambda: len(seen) >= 200, 60, what="three consumers consuming")
        joiner = worker_cls(bootstrap, topic, group, seen)
        joiner.start()
        workers.append(joiner)
        wait_for(lambda: joiner.count >= 20, 60, what="the fourth member to get partitions")
        workers[0].stop()
        mark = len(seen)
        wait_for(lambda: len(seen) >= mark + 300, 60, what="consumption after a member left")
        producer.stopping.set()
        producer.join(60)
        assert not producer.errors
        wait_for(lambda: len(seen) >= len(producer.acked), 60, what="every record consumed")
    finally:
        producer.stopping.set()
        for w in workers:
            w.stop()
    errors = [e for w in workers for e in w.errors]
    assert not errors, errors
    positions = [(p, o) for p, o, _ in seen]
    duplicates = {po for po in positions if positions.count(po) > 1}
    assert not duplicates, f"{len(duplicates)} records seen twice, e.g. {sorted(duplicates)[:5]}"
    assert set(positions) == producer.acked
    ends: dict[int, int] = {}
    for p, o in producer.acked:
        ends[p] = max(ends.get(p, 0), o + 1)
    assert _committed(bootstrap, group, topic, 6) == ends


def test_restarted_consumer_resumes_from_committed(gcluster):
    bootstrap, topic, group = gcluster.bootstrap, _name("resume"), _name("grp")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [b"a%d" % i for i in range(20)], partition=0)
    produce(bootstrap, topic, [b"b%d" % i for i in range(20)], partition=1)
    first = _consume_n(bootstrap, topic, group, 15)
    assert len(first) == 15
    second = _consume_n(bootstrap, topic, group, 25)
    assert len(second) == 25
    assert sorted(first + second) == sorted((p, o) for p in (0, 1) for o in range(20))


def _consume_n(bootstrap: str, topic: str, group: str, n: int,
               timeout_s: float = 40) -> list[tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS})
    c.subscribe([topic])
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            got.append((m.partition(), m.offset()))
            c.commit(message=m, asynchronous=False)
    finally:
        c.close()
    return got


def test_offsets_reloaded_after_coordinator_restart(gcluster):
    """RF 1: SIGKILL the only broker; the restarted coordinator loads the offsets back."""
    bootstrap, topic, group = gcluster.bootstrap, _name("reload"), _name("grp")
    create_topic(bootstrap, topic, 3)
    for p in range(3):
        produce(bootstrap, topic, [b"x%d" % i for i in range(10)], partition=p)
    assert len(_consume_n(bootstrap, topic, group, 30)) == 30
    before = _committed(bootstrap, group, topic, 3)
    assert sum(before.values()) == 30
    gcluster.kill_broker(1, signal.SIGKILL)
    gcluster.start_broker(1)
    after = wait_for(lambda: _committed(gcluster.bootstrap, group, topic, 3) == before and before,
                     90, what="committed offsets after the restart")
    assert after


def _describe(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)


_LONE_CONSUMER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": 2000, "heartbeat.interval.ms": 200})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.2)
"""


def test_member_without_heartbeats_expires(gcluster):
    bootstrap, topic, group = gcluster.bootstrap, _name("expire"), _name("grp")
    create_topic(bootstrap, topic, 2)
    proc = subprocess.Popen([sys.executable, "-c", _LONE_CONSUMER, bootstrap, group, topic])
    try:
        wait_for(lambda: len(_describe(bootstrap, group).members) == 1, 60,
                 what="the member to join")
        proc.send_signal(signal.SIGKILL)  # no LeaveGroup, no more heartbeats
        proc.wait(10)
        killed = time.monotonic()
        desc = wait_for(lambda: (d := _describe(bootstrap, group)) and not d.members and d, 30,
                        what="the member to be dropped")
        assert time.monotonic() - killed >= 1.0  # it took a session timeout, not a leave
        assert str(desc.state).upper().endswith("EMPTY")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_admin_list_describe_delete(gcluster):
    bootstrap, topic, group = gcluster.bootstrap, _name("admin"), _name("grp")
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [b"v"] * 3, partition=0)
    assert len(_consume_n(bootstrap, topic, group, 3)) == 3
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
    assert group in {g.group_id for g in listed.valid}
    desc = _describe(bootstrap, group)
    assert not desc.members
    admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert _committed(bootstrap, group, topic, 1) == {0: -1001}


@pytest.fixture(scope="module")
def gcluster3(tmp_path_factory):
    overrides = dict(GROUP_OVERRIDES, **{"offsets.topic.replication.factor": "3",
                                         "offsets.topic.num.partitions": "3"})
    yield from serve_cluster(tmp_path_factory, 3, overrides)


def _coordinator_id(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(OFFSETS_TOPIC, timeout=10)
    parts = md.topics[OFFSETS_TOPIC].partitions
    return parts[partition_for(group, len(parts))].leader


@pytest.mark.slow
def test_offsets_survive_sigkill_of_coordinator(gcluster3):
    bootstrap, topic, group = gcluster3.bootstrap, _name("kill"), _name("grp")
    create_topic(bootstrap, topic, 3, replication=3)
    for p in range(3):
        produce(bootstrap, topic, [b"k%d" % i for i in range(10)], partition=p)
    assert len(_consume_n(bootstrap, topic, group, 30)) == 30
    before = _committed(bootstrap, group, topic, 3)
    assert sum(before.values()) == 30
    victim = _coordinator_id(bootstrap, group)
    gcluster3.kill_broker(victim, signal.SIGKILL)
    survivors = ",".join(f"{s.host}:{s.port}" for s in gcluster3.brokers if s.id != victim)
    wait_for(lambda: _coordinator_id(survivors, group) not in (victim, -1), 60,
             what="a new coordinator")
    wait_for(lambda: _committed(survivors, group, topic, 3) == before, 60,
             what="committed offsets on the new coordinator")
    produce(survivors, topic, [b"late"] * 3, partition=0)
    resumed = _consume_n(survivors, topic, group, 3)
    assert resumed == [(0, before[0]), (0, before[0] + 1), (0, before[0] + 2)]

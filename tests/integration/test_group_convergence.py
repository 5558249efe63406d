"""Many group members with real clients converge on one generation, commit promptly while
the group rebalances, and rejoin after the coordinator is SIGKILLed.

The references are Apache Kafka's GroupCoordinator (DelayedJoin, DelayedSync,
DelayedHeartbeat) and kafka-python's own ``test_group`` integration test.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer

from tests.conftest import wait_for
from tests.integration.clients import create_topic
from tests.integration.conftest import serve_cluster
from weir.groups.codec import OFFSETS_TOPIC, partition_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# kafka-python's test broker settings (servers/resources/*/kafka.properties).
OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "2",
    "offsets.topic.replication.factor": "1",
    "offsets.commit.timeout.ms": "500",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from serve_cluster(tmp_path_factory, 1, OVERRIDES)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class KafkaPythonMembers:
    """kafka-python's ConsumerGroupRunner: each consumer polls in its own thread.

    Two things keep clear of a kafka-python 3.0 bug (its ``BaseCoordinator.join_group_async``
    and ``ConsumerCoordinator.need_rejoin``) that leaves the group's leader silent forever,
    with Apache Kafka as with Weir. A leader that assigned partitions from metadata that
    had not yet seen the topic rejoins because its metadata snapshot changed, a trigger that
    does not set ``rejoin_needed``. If ``poll`` times out after the leader's join task ran
    the assignment but before the SyncGroup answer came, ``need_rejoin()`` is False from
    then on and nothing ever awaits the finished task: no heartbeat, no rejoin, and the
    coordinator expires the member (the Java client had the same hole, KAFKA-9815). So each
    member starts polling only once its metadata holds every partition of the topic (no
    snapshot-triggered rejoin), and polls for 1 s at a time (a narrower window than 200 ms).
    """

    POLL_MS = 1000

    def __init__(self, bootstrap: str, topic: str, group: str, count: int, partitions: int,
                 **extra) -> None:
        from kafka import KafkaConsumer

        self.consumers: list = []
        self.stop = threading.Event()
        self.threads = []
        self.errors: list[BaseException] = []
        for i in range(count):
            ready = threading.Event()

            def run(i=i, ready=ready) -> None:
                try:
                    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                      client_id=f"member-{i}", heartbeat_interval_ms=500,
                                      auto_offset_reset="earliest", session_timeout_ms=3000,
                                      request_timeout_ms=4000, **extra)
                    self.consumers.append(c)
                    ready.set()
                    try:
                        wait_for(lambda: len(c.partitions_for_topic(topic)) == partitions, 15,
                                 what=f"member {i}'s metadata for {topic}")
                        while not self.stop.is_set():
                            c.poll(timeout_ms=self.POLL_MS)
                    finally:
                        c.close()
                except BaseException as exc:  # noqa: BLE001 - reported by the test
                    self.errors.append(exc)
                finally:
                    ready.set()

            t = threading.Thread(target=run, daemon=True, name=f"member-{i}")
            t.start()
            self.threads.append(t)
            assert ready.wait(15)

    def stable(self, partitions: int) -> bool:
        from kafka.coordinator.base import MemberState

        seen: set = set()
        generations = set()
        for c in self.consumers:
            meta = c.group_metadata()
            assigned = c.assignment()
            if meta.state != MemberState.STABLE or not assigned or seen & assigned:
                return False
            seen |= assigned
            generations.add(meta.generation_id)
        return len(seen) == partitions and len(generations) == 1

    def describe(self, bootstrap: str, group: str) -> str:
        """Each member's state, generation and assignment, and the coordinator's view."""
        from confluent_kafka.admin import AdminClient

        lines = []
        for i, c in enumerate(self.consumers):
            meta = c.group_metadata()
            lines.append(f"consumer {i}: {c._coordinator.state} generation "
                         f"{meta.generation_id} {meta.member_id} assigned "
                         f"{sorted(tp.partition for tp in c.assignment())}")
        try:
            d = AdminClient({"bootstrap.servers": bootstrap}).describe_consumer_groups(
                [group])[group].result(10)
            lines.append(f"coordinator: {d.state} " + ", ".join(
                f"{m.member_id} {sorted(tp.partition for tp in m.assignment.topic_partitions)}"
                for m in d.members))
        except Exception as exc:  # noqa: BLE001 - a diagnostic only
            lines.append(f"coordinator: {exc!r}")
        return "\n".join(lines + [f"errors: {self.errors!r}"])

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)


@pytest.mark.parametrize("members", [4, 8])
def test_kafka_python_group_converges(cluster, members):
    """kafka-python's test_group: every member STABLE, assignments disjoint and covering
    all partitions, one generation (Kafka's GroupCoordinator DelayedJoin completes the join
    once every known member rejoined)."""
    topic, group = _name("conv"), _name("grp")
    create_topic(cluster.bootstrap, topic, members)
    runner = KafkaPythonMembers(cluster.bootstrap, topic, group, members, partitions=members)
    try:
        try:
            wait_for(lambda: runner.stable(members), 30, what="a stable group")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{runner.describe(cluster.bootstrap, group)}") from None
        assert not runner.errors
    finally:
        runner.close()


def test_aiokafka_and_confluent_members_converge(cluster):
    """Members of two clients in one group (range assignor on both): the union of their
    assignments covers every partition once (Kafka's GroupCoordinator)."""
    topic, group = _name("mixed"), _name("grp")
    partitions = 8
    create_topic(cluster.bootstrap, topic, partitions)
    stop = threading.Event()
    assignments: dict[str, set] = {}

    def confluent(i: int) -> None:
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                      "partition.assignment.strategy": "range"})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                c.poll(0.1)
                assignments[f"c{i}"] = {tp.partition for tp in c.assignment()}
        finally:
            c.close()

    async def aio(i: int) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor

        c = AIOKafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group,
                             session_timeout_ms=6000, heartbeat_interval_ms=300,
                             partition_assignment_strategy=(RangePartitionAssignor,))
        await c.start()
        try:
            while not stop.is_set():
                await c.getmany(timeout_ms=100)
                assignments[f"a{i}"] = {tp.partition for tp in c.assignment()}
        finally:
            await c.stop()

    threads = [threading.Thread(target=confluent, args=(i,), daemon=True) for i in range(3)]
    threads += [threading.Thread(target=lambda i=i: asyncio.run(aio(i)), daemon=True)
                for i in range(3)]
    for t in threads:
        t.start()

    def converged() -> bool:
        if len(assignments) != 6 or not all(assignments.values()):
            return False
        union = [p for parts in assignments.values() for p in parts]
        return sorted(union) == list(range(partitions))

    try:
        wait_for(converged, 60, what="six members of two clients sharing the partitions")
    finally:
        stop.set()
        for t in threads:
            t.join(20)


def test_commits_answered_promptly_while_rebalancing(cluster):
    """Commits from members while the group rebalances are answered at once (accepted in
    PreparingRebalance, REBALANCE_IN_PROGRESS in CompletingRebalance, ILLEGAL_GENERATION
    after it), never held until the rebalance ends: Kafka's GroupCoordinator.doCommitOffsets."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError as KError

    topic, group = _name("commit"), _name("grp")
    create_topic(cluster.bootstrap, topic, 6)
    stop = threading.Event()
    slowest: list[float] = [0.0]
    commits: list[int] = [0]
    failures: list[BaseException] = []

    def member(i: int) -> None:
        c = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group,
                          client_id=f"committer-{i}", enable_auto_commit=False,
                          session_timeout_ms=6000, heartbeat_interval_ms=300,
                          request_timeout_ms=30000)
        try:
            while not stop.is_set():
                c.poll(timeout_ms=50)
                if not c.assignment():
                    continue
                from kafka import TopicPartition as KTP
                from kafka.structs import OffsetAndMetadata as KOM

                offsets = {KTP(topic, tp.partition): KOM(0, "", -1) for tp in c.assignment()}
                started = time.monotonic()
                try:
                    c.commit(offsets)
                    commits[0] += 1
                except KError:
                    pass  # the generation moved on: a prompt, expected answer
                slowest[0] = max(slowest[0], time.monotonic() - started)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
        finally:
            c.close()

    threads = []
    try:
        for i in range(6):  # each new member rebalances the group under the others' commits
            t = threading.Thread(target=member, args=(i,), daemon=True)
            t.start()
            threads.append(t)
            time.sleep(1.0)
        wait_for(lambda: commits[0] >= 50, 60, what="commits")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not failures, failures
    assert slowest[0] < 8, f"a commit took {slowest[0]:.1f} s"


# -- coordinator death --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    overrides = dict(OVERRIDES, **{"offsets.topic.replication.factor": "3",
                                   "offsets.topic.num.partitions": "3",
                                   "offsets.commit.timeout.ms": "5000"})
    yield from serve_cluster(tmp_path_factory, 3, overrides)


def _coordinator(bootstrap: str, group: str) -> int:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(OFFSETS_TOPIC, timeout=10)
    parts = md.topics[OFFSETS_TOPIC].partitions
    return parts[partition_for(group, len(parts))].leader


@pytest.mark.slow
def test_members_rejoin_after_coordinator_sigkill(cluster3):
    """SIGKILL the coordinator of a stable four-member group: the new coordinator loads
    __consumer_offsets, answers, and the surviving clients form a stable group again
    (Kafka's GroupCoordinator.onElection / GroupMetadataManager loading)."""
    topic, group = _name("failover"), _name("grp")
    create_topic(cluster3.bootstrap, topic, 4, replication=3)
    bootstrap = cluster3.bootstrap
    runner = KafkaPythonMembers(bootstrap, topic, group, 4, partitions=4)
    try:
        wait_for(lambda: runner.stable(4), 30, what="a stable group")
        wait_for(lambda: _coordinator(bootstrap, group) > 0, 30, what="a coordinator")
        victim = _coordinator(bootstrap, group)
        generation = runner.consumers[0].group_metadata().generation_id
        cluster3.kill_broker(victim, signal.SIGKILL)
        survivors = ",".join(f"{s.host}:{s.port}" for s in cluster3.brokers if s.id != victim)
        wait_for(lambda: _coordinator(survivors, group) not in (victim, -1), 60,
                 what="a new coordinator")
        wait_for(lambda: runner.stable(4), 60, what="a stable group after the failover")
        assert runner.consumers[0].group_metadata().generation_id >= generation
        assert not runner.errors
    finally:
        runner.close()

"""Consumer groups under simulation (``--groups``): the production group coordinator on every
simulated broker, over the brokers' real ``__consumer_offsets`` partitions, driven by
simulated group members while the faults run.

Each broker incarnation of a data-path run (:mod:`weir.sim.data`) runs Weir's real
:class:`~weir.groups.coordinator.GroupCoordinator` with its production collaborators where
they exist and the simulation's where they must:

* its ``CoordinatorLog`` is the production :class:`~weir.coordinator_runtime.ReplicaManagerLog`
  over that broker's real ``ReplicaManager``: commits and group metadata are appended with
  acks=all to real ``__consumer_offsets`` logs, replicated by the real fetchers;
* it follows leadership as in a broker (a ``ReplicaManager`` leadership listener: Kafka's
  GroupMetadataManager load on becoming leader, unload on LeaderAndIsr/StopReplica that
  takes it away), and loads by replaying the log;
* its clock is the loop's virtual clock, its metadata view the broker's own
  ``MetadataCache`` (its ``BrokerCore``'s, filled by the real UpdateMetadata handler), and
  FindCoordinator's first lookup creates the topic in the simulated ZooKeeper (Kafka's
  auto-creation of ``__consumer_offsets``).

A crash abandons the coordinator's tasks with the process; a restart starts a new one.

:class:`SimMember` is a classic-protocol consumer (FindCoordinator, JoinGroup with KIP-394's
MEMBER_ID_REQUIRED, SyncGroup with a leader-computed assignment, Heartbeat, OffsetCommit,
OffsetFetch, LeaveGroup, and pauses longer than its session timeout), calling the coordinator
API of a broker through the simulated network: requests and answers may be lost, delayed or
reordered, and a member that hears nothing in time gives up as a client's request timeout
does.  What members observe goes to :class:`GroupPlane`'s append-only histories, which the
invariants of :mod:`weir.sim.group_invariants` judge.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.coordinator_runtime import Loading, ReplicaManagerLog
from weir.groups import codec
from weir.groups.codec import OFFSETS_TOPIC, GroupKey, OffsetAndMetadata, OffsetKey
from weir.groups.coordinator import GroupCoordinator, GroupCoordinatorSettings
from weir.groups.state import GroupConfig, JoinRequest
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.records import iter_records
from weir.sim.internal_topics import create_internal_topic
from weir.sim.world import VirtualClock

if TYPE_CHECKING:
    from weir.server.broker_core import BrokerCore
    from weir.sim.data import DataPlane
    from weir.sim.node import SimNode
    from weir.sim.world import World

__all__ = ["CommitAttempt", "DeletionApplied", "FetchObservation", "GroupPlane", "SimMember",
           "SyncObservation", "groups_config"]

OFFSETS_PARTITIONS = 3
GROUPS = 2
MEMBERS_PER_GROUP = 3
SESSION_TIMEOUT_MS = 400
REBALANCE_TIMEOUT_MS = 600
HEARTBEAT_MS = 60
REQUEST_TIMEOUT_MS = 1000  # the client's request.timeout.ms (JoinGroup: + rebalance timeout)
COMMIT_TIMEOUT_MS = 600  # offsets.commit.timeout.ms
LEADER_DURING_DELETE = -2
# The latest a message can arrive (World.net_delay: 8 ms + a 250 ms
# resend; FIFO links never hold one longer than the slowest message sent before it).  A
# commit whose answer never came was written, if ever, within this long of being sent.
MAX_DELIVERY_MS = 300
CLIENT_LINK_BASE = 1000  # members' network addresses (brokers are 1..n, producers 0)


def groups_config(**overrides: Any) -> Any:
    """A data-path configuration with consumer groups."""
    from weir.sim.config import data_config

    return data_config(**{"groups": True, **overrides})


class _SimGroupCoordinator(GroupCoordinator):
    """The production coordinator, keeping the task of each deletion step (Kafka's
    onPartitionsDeleted) for :meth:`GroupPlane.on_update_metadata` to observe."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deletions: dict[frozenset[TopicPartition], asyncio.Task[Any] | None] = {}

    def on_partitions_deleted(self, tps: Iterable[TopicPartition]) -> asyncio.Task[Any] | None:
        gone = list(tps)
        task = super().on_partitions_deleted(gone)
        self.deletions[frozenset(gone)] = task
        return task


class _ObservedLog(ReplicaManagerLog):
    """The production :class:`ReplicaManagerLog`, noting the key of every record it wrote
    (the power-loss exemption of the invariants needs to know what a lost record was) and
    the groups deleted (a group tombstone written with acks=all)."""

    def __init__(self, replica_manager: Any, plane: GroupPlane) -> None:
        super().__init__(replica_manager)
        self._plane = plane

    async def append(self, tp: TopicPartition, batch: bytes,
                     timeout_ms: int) -> tuple[ErrorCode, int]:
        error, base = await super().append(tp, batch, timeout_ms)
        if base >= 0:
            for rec in iter_records(batch):
                self._plane.keys[(tp, base + rec.offset, rec.value or b"")] = rec.key or b""
                if rec.value is None:  # tombstones all read b"": keep every key per offset
                    self._plane.tombstone_keys.setdefault((tp, base + rec.offset), set()).add(
                        rec.key or b"")
                key = codec.decode_key(rec.key) if rec.key and rec.value is None else None
                if error == ErrorCode.none and isinstance(key, GroupKey):
                    self._plane.group_deletions.append((key.group, self._plane.sim.now))
        return error, base


@dataclass
class CommitAttempt:
    """One OffsetCommit of one partition: ``value`` is unique and grows with time;
    ``end`` is when its write, if any, had certainly happened (None: still unknown);
    ``acked_at`` when the member heard it succeed; ``excused`` once the power-loss
    exemption forgave its loss; ``topic_id`` the incarnation of the topic that the
    coordinator's metadata had when the request arrived (None: it had none, or the request
    never arrived), which is what the commit was validated against."""

    member: str
    value: int
    sent_at: int
    end: int | None = None
    acked_at: int | None = None
    excused: bool = False
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True)
class FetchObservation:
    """An OffsetFetch answered by the online leader of the group's offsets partition."""

    group: str
    broker: int
    served_at: int
    offsets: dict[TopicPartition, int | None]


@dataclass(frozen=True)
class DeletionApplied:
    """The deletion of a partition of a topic incarnation reached the group's coordinator:
    the broker that was then the online, loaded coordinator of ``group`` ran the
    UpdateMetadata handler's step for an UpdateMetadata deleting ``tp`` (leader -2;
    :func:`~weir.server.handlers.update_metadata.remove_deleted_offsets`) and, by ``at``,
    had written the group's tombstones (acks=all) or had nothing to remove."""

    group: str
    tp: TopicPartition
    topic_id: uuid.UUID
    broker: int
    at: int


@dataclass(frozen=True)
class SyncObservation:
    """A member told it is in sync: its generation and the assignment's identity."""

    group: str
    member: str
    generation: int
    nonce: str
    at: int
    broker: int


@dataclass
class GroupPlane:
    """The group side of a simulated cluster: coordinators per broker incarnation, members,
    and the histories the invariants read."""

    sim: World
    data: DataPlane
    coordinators: dict[int, tuple[int, GroupCoordinator]] = field(default_factory=dict)
    members: list[SimMember] = field(default_factory=list)
    commits: dict[tuple[str, TopicPartition], list[CommitAttempt]] = field(default_factory=dict)
    fetches: list[FetchObservation] = field(default_factory=list)
    syncs: list[SyncObservation] = field(default_factory=list)
    # (offsets partition, offset, value) -> key of each record a coordinator wrote
    keys: dict[tuple[TopicPartition, int, bytes], bytes] = field(default_factory=dict)
    # (offsets partition, offset) -> keys of the tombstones written there (a truncated
    # offset is written again)
    tombstone_keys: dict[tuple[TopicPartition, int], set[bytes]] = field(default_factory=dict)
    # broker -> the members' requests waiting on it (a crash resets their connections)
    waiting: dict[int, dict[asyncio.Future[Any], None]] = field(default_factory=dict)
    # topic incarnation (topic id) -> when it was marked for deletion
    marked: dict[uuid.UUID, int] = field(default_factory=dict)
    applied: list[DeletionApplied] = field(default_factory=list)
    # (group, when): an Empty group deleted (its generations start again, as in Kafka)
    group_deletions: list[tuple[str, int]] = field(default_factory=list)
    _deleted_names: dict[uuid.UUID, str] = field(default_factory=dict)
    _values: Any = field(default_factory=lambda: itertools.count(1))
    _nonces: Any = field(default_factory=lambda: itertools.count(1))

    @property
    def stats(self) -> Any:
        return self.data.stats

    @property
    def stop_at(self) -> int:
        """Members stop here, before the run's end checks."""
        config = self.sim.config
        return config.fault_ms + config.settle_ms * 2 // 3

    # -- broker processes ----------------------------------------------------------------

    def build_coordinator(self, core: BrokerCore) -> GroupCoordinator:
        """A broker incarnation's group coordinator (``BrokerCore``'s ``group_coordinator``
        factory): the production class over the core's replica manager (through an
        observing log) and metadata cache, on virtual time; the core makes it a leadership
        listener and hands it to the handlers (the UpdateMetadata handler's deleted-offsets
        step runs on it)."""
        settings = GroupCoordinatorSettings(
            broker_id=core.broker_id,
            group=GroupConfig(min_session_timeout_ms=50, initial_rebalance_delay_ms=30),
            offsets_topic_num_partitions=OFFSETS_PARTITIONS,
            offsets_commit_timeout_ms=COMMIT_TIMEOUT_MS)
        return _SimGroupCoordinator(settings, core.metadata,
                                    _ObservedLog(core.replica_manager, self),
                                    clock=VirtualClock(self.sim),
                                    create_offsets_topic=self._create_offsets_topic)

    def start(self, node: SimNode) -> None:
        """A new broker incarnation: its core's group coordinator starts (its clock)."""
        assert node.core is not None
        coordinator = node.core.group_coordinator
        self.coordinators[node.id] = (node.incarnation, coordinator)
        coordinator.start()

    def crash(self, node: SimNode) -> None:
        entry = self.coordinators.pop(node.id, None)
        if entry is not None:
            self.data.bury(entry[1].abandon())
        # The members' connections to it are reset: they hear so a network delay later.
        for answer in self.waiting.pop(node.id, {}):
            self.sim.schedule(self.sim.net_delay(),
                              lambda a=answer: a.done() or a.set_result(None))

    def coordinator(self, node: SimNode) -> GroupCoordinator | None:
        entry = self.coordinators.get(node.id)
        if entry is None or entry[0] != node.incarnation or not node.alive:
            return None
        return entry[1]

    def on_update_metadata(self, node: SimNode, request: Any) -> None:
        """An UpdateMetadata the broker ``node`` has just applied to its metadata: the
        production handler's step for deleted partitions, and what it did for the members'
        groups that ``node`` coordinated online (:class:`DeletionApplied`)."""
        coordinator = self.coordinator(node)
        if coordinator is None:
            return
        deleted = {TopicPartition(t.topic_name, p.partition_index): t.topic_id
                   for t in request.topic_states for p in t.partition_states
                   if p.leader == LEADER_DURING_DELETE}
        if not deleted:
            return
        # The handler's step (remove_deleted_offsets) ran on this coordinator (unless the
        # request was refused, a stale epoch): its task.
        assert isinstance(coordinator, _SimGroupCoordinator)
        key = frozenset(deleted)
        if key not in coordinator.deletions:
            return
        task = coordinator.deletions.pop(key)
        owed = [g for g in sorted({m.group for m in self.members})
                if self._loaded_online(node, coordinator, g)]
        if not owed:
            return

        def applied(errors: Mapping[str, ErrorCode]) -> None:
            for group in owed:
                if errors.get(group, ErrorCode.none) != ErrorCode.none:
                    continue
                if group in errors:
                    self.stats["groups_deleted_offsets_tombstoned"] += 1
                for tp, topic_id in sorted(deleted.items()):
                    self.applied.append(DeletionApplied(group, tp, topic_id, node.id,
                                                        self.sim.now))
                    self.stats["groups_deletions_applied"] += 1
        if task is None:
            applied({})
            return
        task.add_done_callback(
            lambda t: None if t.cancelled() or t.exception() else applied(t.result()))

    def _loaded_online(self, node: SimNode, coordinator: GroupCoordinator, group: str) -> bool:
        online = self.online_coordinator(group)
        part = coordinator.partitions.get(coordinator.partition_for(group))
        return (online is not None and online[0] is node and part is not None
                and part.status is Loading.LOADED)

    def topic_marked_for_deletion(self, topic: str, topic_id: uuid.UUID) -> None:
        if topic_id not in self.marked:
            self.marked[topic_id] = self.sim.now
            self._deleted_names[topic_id] = topic

    def deleted_names(self) -> set[str]:
        """The names of the topics ever marked for deletion."""
        return set(self._deleted_names.values())

    async def _create_offsets_topic(self) -> None:
        """The topic administration's creation of ``__consumer_offsets`` (a ZooKeeper round
        trip; compacted, RF 3, as Kafka's offsets.topic.* defaults)."""
        await create_internal_topic(self.sim, OFFSETS_TOPIC, OFFSETS_PARTITIONS)

    def online_coordinator(self, group: str) -> tuple[SimNode, GroupCoordinator] | None:
        """The broker that is now the online leader of the group's offsets partition (the
        one ZooKeeper names, alive and in that leader epoch), and its coordinator."""
        for node in self.sim.nodes.values():
            coordinator = self.coordinator(node)
            if coordinator is None:
                continue
            tp = TopicPartition(OFFSETS_TOPIC, coordinator.partition_for(group))
            leader = self.data.online_leader(tp)
            if leader is not None and leader is node.replicas:
                return node, coordinator
        return None

    def lost_to_power_failure(self, broker: int, group: str) -> tuple[set[int], int]:
        """What ``broker`` lost of ``group`` to power failure (the data path's exemption,
        :mod:`weir.sim.data`: acks=all relies on replication, not fsync): the offsets of the
        commits it lost, and the newest generation of the group metadata it lost (-1)."""
        commits: set[int] = set()
        generation = -1
        for (tp, offset, value), brokers in self.data.amnesia.items():
            if tp.topic != OFFSETS_TOPIC or broker not in brokers:
                continue
            key = self.keys.get((tp, offset, value))
            decoded = codec.decode_key(key) if key else None
            if isinstance(decoded, OffsetKey) and decoded.group == group and value:
                commits.add(codec.decode_offset_value(value).offset)
            elif isinstance(decoded, GroupKey) and decoded.group == group and value:
                generation = max(generation, codec.decode_group_value(value).generation)
        return commits, generation

    def lost_tombstones(self, group: str) -> set[TopicPartition]:
        """The partitions whose offset tombstones of ``group`` a broker lost to power failure
        (the same exemption, for deletions: once that broker leads without the tombstone,
        its followers truncate it too, so whichever broker answers later may lack it)."""
        out: set[TopicPartition] = set()
        for tp, offset, value in self.data.amnesia:
            if tp.topic != OFFSETS_TOPIC or value:
                continue
            for key in sorted(self.tombstone_keys.get((tp, offset), ())):
                decoded = codec.decode_key(key) if key else None
                if isinstance(decoded, OffsetKey) and decoded.group == group:
                    out.add(decoded.tp)
        return out

    # -- members -------------------------------------------------------------------------

    def start_members(self) -> None:
        link = itertools.count(CLIENT_LINK_BASE)
        for g in range(GROUPS):
            for m in range(MEMBERS_PER_GROUP):
                member = SimMember(self, f"g{g}", f"g{g}-c{m}", next(link))
                self.members.append(member)
                self.sim.spawn(member.run())
        # Once the faults stop and the groups settle, a topic they committed to is deleted
        # while they commit, and created again under its name once the deletion completed.
        config = self.sim.config
        self.sim.schedule(config.fault_ms + config.settle_ms // 4 + self.sim.rng.randint(0, 300),
                          self._delete_committed_topic)

    def _delete_committed_topic(self) -> None:
        sim = self.sim
        zk = sim.zk
        # Not a topic being moved: Kafka holds a deletion until the move ends
        # (KafkaController.onPartitionReassignment marks the topic ineligible), which the
        # controller's deletion does not do yet; the fault phase's deletions still race moves.
        moving = {tp.topic for tp in zk.reassignments} | {
            name for name, t in zk.topics.items() if t.adding or t.removing}
        committed = sorted({tp.topic for (_g, tp), attempts in self.commits.items()
                            if tp.topic in zk.topics and tp.topic not in zk.to_delete
                            and tp.topic not in moving
                            and any(a.acked_at is not None
                                    and a.topic_id == zk.topics[tp.topic].topic_id
                                    for a in attempts)})
        if not committed:
            return
        topic = sim.rng.choice(committed)
        sim.delete_topic(topic)

        def recreate() -> None:
            if sim.now >= self.stop_at:
                return
            if topic in zk.topics:
                sim.schedule(20, recreate)  # the deletion has not completed yet
                return
            sim.faults.append(f"{sim.now}: re-create topic {topic}")
            sim.create_topic(topic)
        sim.schedule(20, recreate)

    def next_value(self) -> int:
        return next(self._values)

    def next_nonce(self) -> int:
        return next(self._nonces)

    async def call(self, member: SimMember, broker: int,
                   serve: Callable[[SimNode, GroupCoordinator], Any], timeout_ms: int) -> Any:
        """``serve(node, coordinator)`` (a value or a coroutine) on broker ``broker``, through
        the simulated network; None if no answer came within ``timeout_ms`` or the broker
        died (its connection was reset) meanwhile."""
        sim = self.sim
        node = sim.nodes[broker]
        answer: asyncio.Future[Any] = sim.loop.create_future()

        def arrive(replicas: Any) -> None:
            coordinator = self.coordinator(node)
            if coordinator is None:
                return  # nobody listens: the connection is refused, the client times out

            async def run() -> None:
                value = serve(node, coordinator)
                if asyncio.iscoroutine(value):
                    value = await value
                self._reply(node.id, member.link, answer, value)
            replicas.spawn(run())
        self.data.send(member.link, node, arrive)
        waiting = self.waiting.setdefault(broker, {})
        waiting[answer] = None
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await answer
        except TimeoutError:
            return None
        finally:
            waiting.pop(answer, None)

    def _reply(self, src: int, dst: int, answer: asyncio.Future[Any], value: Any) -> None:
        """An answer back to a member: lost, reordered or delivered in order, as
        :meth:`DataPlane.send` treats broker messages."""
        sim, config = self.sim, self.sim.config
        if sim.rng.random() < config.data_drop_ratio:
            return

        def deliver() -> None:
            if not answer.done():
                answer.set_result(value)
        if sim.rng.random() < config.data_reorder_ratio:
            sim.schedule(sim.net_delay(), deliver)
        else:
            sim.deliver(src, dst, deliver)


_RETRY_COORDINATOR = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
_REJOIN = frozenset({ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation})
_RESET = frozenset({ErrorCode.unknown_member_id, ErrorCode.fenced_instance_id})


class SimMember:
    """A classic-protocol group consumer; see the module docstring."""

    def __init__(self, plane: GroupPlane, group: str, name: str, link: int) -> None:
        self.plane = plane
        self.group = group
        self.name = name
        self.link = link
        self.coordinator: int | None = None
        self.member_id = ""
        self.generation = -1
        self.assigned: list[TopicPartition] = []

    @property
    def sim(self) -> World:
        return self.plane.sim

    async def _sleep(self, ms: int) -> None:
        await asyncio.sleep(ms / 1000)

    async def run(self) -> None:
        sim = self.sim
        await self._sleep(sim.rng.randint(0, 300))
        while sim.now < self.plane.stop_at:
            if self.coordinator is None:
                await self._find_coordinator()
            elif self.generation < 0:
                await self._join_and_sync()
            else:
                await self._stable_step()

    def _on_error(self, code: ErrorCode | None) -> None:
        """What a consumer does with a failed group request (None: no answer in time)."""
        self.plane.stats[f"groups_error_{'timeout' if code is None else code.name}"] += 1
        if code is None or code in _RETRY_COORDINATOR:
            self.coordinator = None  # look it up again; the generation stays (it moved)
        elif code in _REJOIN:
            self.generation = -1
        elif code in _RESET:
            self.member_id = ""
            self.generation = -1

    async def _find_coordinator(self) -> None:
        sim = self.sim
        live = [n.id for n in sim.nodes.values() if n.alive]
        if not live:
            await self._sleep(100)
            return
        answer = await self.plane.call(
            self, sim.rng.choice(live),
            lambda _node, c: c.find_coordinator(self.group), REQUEST_TIMEOUT_MS)
        if answer is None or answer[0] != ErrorCode.none:
            await self._sleep(50)
            return
        self.coordinator = answer[1]

    async def _join_and_sync(self) -> None:
        assert self.coordinator is not None
        request = JoinRequest(self.member_id, None, self.name, "sim", SESSION_TIMEOUT_MS,
                              REBALANCE_TIMEOUT_MS, "consumer", [("range", b"")], True)
        joined = await self.plane.call(self, self.coordinator,
                                       lambda _node, c: c.join(self.group, request),
                                       REQUEST_TIMEOUT_MS + REBALANCE_TIMEOUT_MS)
        if joined is None or joined.error == ErrorCode.coordinator_load_in_progress:
            self._on_error(None if joined is None else joined.error)
            await self._sleep(30)
            return
        if joined.error == ErrorCode.member_id_required:
            self.member_id = joined.member_id  # KIP-394: join again with it
            return
        if joined.error != ErrorCode.none:
            self._on_error(joined.error)
            await self._sleep(30)
            return
        self.member_id = joined.member_id
        generation = joined.generation_id
        assignments: dict[str, bytes] = {}
        if joined.leader == self.member_id:
            # In the order the coordinator lists them (its members' join order): member ids
            # end in a random UUID (Kafka's format), so sorting them would not replay.
            members = [m[0] for m in joined.members]
            nonce = f"{self.name}/{generation}/{self.plane.next_nonce()}"
            tps = self._subscribed()
            for i, member_id in enumerate(members):
                mine = tps[i::len(members)]
                assignments[member_id] = "|".join(
                    [nonce, *(f"{tp.topic}:{tp.partition}" for tp in mine)]).encode()
        synced = await self.plane.call(
            self, self.coordinator,
            lambda _node, c: c.sync(self.group, self.member_id, None, generation, "consumer",
                                    "range", assignments),
            REQUEST_TIMEOUT_MS + REBALANCE_TIMEOUT_MS)
        if synced is None or synced.error != ErrorCode.none:
            self._on_error(None if synced is None else synced.error)
            return
        nonce, *parts = synced.assignment.decode().split("|") if synced.assignment else [""]
        self.generation = generation
        self.assigned = [TopicPartition(t, int(p)) for t, p in (x.split(":") for x in parts)]
        self.plane.syncs.append(SyncObservation(self.group, self.member_id, generation, nonce,
                                                self.sim.now, self.coordinator))
        self.plane.stats["groups_synced"] += 1
        await self._fetch()  # a consumer reads its committed positions after a rebalance

    def _subscribed(self) -> list[TopicPartition]:
        """The partitions of the topics the group consumes: every live topic but the internal
        ones (a pattern subscription; the leader assigns them)."""
        zk = self.sim.zk
        return sorted(tp for tp in zk.states
                      if tp.topic not in zk.to_delete and not tp.topic.startswith("__"))

    async def _stable_step(self) -> None:
        rng = self.sim.rng
        roll = rng.random()
        if roll < 0.02:
            # A pause longer than the session (a GC pause, a stuck poll loop): the
            # coordinator removes the member; its next request is fenced.
            self.plane.stats["groups_member_pauses"] += 1
            await self._sleep(rng.randint(SESSION_TIMEOUT_MS, 2 * SESSION_TIMEOUT_MS))
        elif roll < 0.04:
            await self._leave()
        elif roll < 0.4:
            await self._commit()
        elif roll < 0.55:
            await self._fetch()
        else:
            await self._heartbeat()
        await self._sleep(HEARTBEAT_MS)

    async def _heartbeat(self) -> None:
        assert self.coordinator is not None
        generation, member_id = self.generation, self.member_id
        code = await self.plane.call(
            self, self.coordinator,
            lambda _node, c: c.heartbeat(self.group, member_id, None, generation),
            REQUEST_TIMEOUT_MS)
        if code != ErrorCode.none:
            self._on_error(code)

    async def _leave(self) -> None:
        assert self.coordinator is not None
        member_id = self.member_id
        self.plane.stats["groups_leaves"] += 1
        await self.plane.call(self, self.coordinator,
                              lambda _node, c: c.leave(self.group, [(member_id, None)]),
                              REQUEST_TIMEOUT_MS)
        self.member_id, self.generation = "", -1
        await self._sleep(self.sim.rng.randint(50, 300))

    async def _commit(self) -> None:
        assert self.coordinator is not None
        if not self.assigned:
            return
        sim = self.sim
        tps = sim.rng.sample(self.assigned, sim.rng.randint(1, len(self.assigned)))
        now = sim.now
        attempts = {tp: CommitAttempt(self.name, self.plane.next_value(), now) for tp in tps}
        for tp, attempt in attempts.items():
            self.plane.commits.setdefault((self.group, tp), []).append(attempt)
        offsets = {tp: OffsetAndMetadata(a.value, commit_timestamp=now)
                   for tp, a in attempts.items()}
        generation, member_id = self.generation, self.member_id
        self.plane.stats["groups_commits"] += 1

        def serve(node: SimNode, c: GroupCoordinator) -> Any:
            # The coordinator validates the partitions against its metadata before its first
            # await: note which incarnation of each topic that was.
            assert node.core is not None
            metadata = node.core.metadata
            for tp, attempt in attempts.items():
                if metadata.partition(tp) is not None:
                    attempt.topic_id = metadata.topic_ids.get(tp.topic)
            return c.commit_offsets(self.group, member_id, None, generation, offsets)
        answer = await self.plane.call(self, self.coordinator, serve, REQUEST_TIMEOUT_MS)
        for tp, attempt in attempts.items():
            if answer is None:
                attempt.end = attempt.sent_at + MAX_DELIVERY_MS
                continue
            attempt.end = sim.now
            if answer[tp] == ErrorCode.none:
                attempt.acked_at = sim.now
                self.plane.stats["groups_commits_acked"] += 1
        errors = [] if answer is None else [e for e in answer.values() if e != ErrorCode.none]
        if answer is None or errors:
            self._on_error(None if answer is None else errors[0])

    async def _fetch(self) -> None:
        assert self.coordinator is not None
        if not self.assigned:
            return
        tps = list(self.assigned)
        plane = self.plane

        def serve(node: SimNode, c: GroupCoordinator) -> Any:
            try:
                found = c.fetch_offsets(self.group, tps)
            except KafkaError as exc:
                return exc.code
            online = plane.online_coordinator(self.group)
            return found, online is not None and online[0] is node, plane.sim.now
        answer = await plane.call(self, self.coordinator, serve, REQUEST_TIMEOUT_MS)
        if answer is None or isinstance(answer, ErrorCode):
            if answer != ErrorCode.coordinator_load_in_progress:
                self._on_error(answer)
            return
        found, online, served_at = answer
        plane.stats["groups_fetches"] += 1
        if online:  # judged as of the moment it was served (commits acknowledged before)
            plane.fetches.append(FetchObservation(
                self.group, self.coordinator, served_at,
                {tp: None if o is None else o.offset for tp, o in found.items()}))

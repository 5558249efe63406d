"""The coordinator shell over a real Log and a stand-in replica manager: writes, loading,
leadership changes, and the request flow end to end (no sockets)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.coordinator_runtime import ReplicaManagerLog
from weir.groups.codec import OFFSETS_TOPIC, OffsetAndMetadata
from weir.groups.coordinator import GroupCoordinator, GroupCoordinatorSettings, Loading
from weir.groups.state import GroupState, JoinRequest
from weir.protocol.errors import ErrorCode
from weir.replication.replica_manager import ProduceResult
from weir.server.metadata_cache import MetadataCache, PartitionMeta
from weir.storage.config import LogConfig
from weir.storage.log import Log
from weir.storage.producer_state import AppendOrigin

OFFSETS_TP = TopicPartition(OFFSETS_TOPIC, 0)
DATA_TP = TopicPartition("t", 0)


class _Config(SimpleNamespace):
    def get(self, key):
        raise KeyError(key)


class FakeReplicaManager:
    def __init__(self, plog: Log) -> None:
        self.log = plog
        self.leadership_listeners = []

    def partition(self, tp):
        return SimpleNamespace(log=self.log)

    async def append(self, acks, timeout_ms, entries, origin=AppendOrigin.CLIENT):
        out = {}
        for tp, batch in entries.items():
            info = self.log.append_as_leader(batch, 0, int(time.time() * 1000), origin)
            self.log.update_high_watermark(self.log.log_end_offset)
            out[tp] = ProduceResult(base_offset=info.first_offset)
        await asyncio.sleep(0)
        return out


def make_broker(tmp_path) -> SimpleNamespace:
    plog = Log.open(tmp_path / f"{OFFSETS_TOPIC}-0", LogConfig(), clean_shutdown=True,
                    now_ms=int(time.time() * 1000))
    meta = MetadataCache()
    part = PartitionMeta(leader=1, leader_epoch=0, isr=(1,), replicas=(1,))
    meta.topics = {OFFSETS_TOPIC: {0: part}, "t": {0: part}}
    config = _Config(broker_id=1, group_min_session_timeout_ms=1000, group_max_session_timeout_ms=60000,
                     group_initial_rebalance_delay_ms=0, group_max_size=100,
                     offsets_topic_num_partitions=1, offsets_retention_check_interval_ms=600000,
                     offsets_commit_timeout_ms=5000, offsets_retention_minutes=10080,
                     offset_metadata_max_bytes=4096)
    return SimpleNamespace(broker_id=1, config=config, metadata=meta,
                           replica_manager=FakeReplicaManager(plog))


def make_coordinator(broker: SimpleNamespace) -> GroupCoordinator:
    """The coordinator over the stand-in broker's parts (as the broker wires it)."""
    return GroupCoordinator(GroupCoordinatorSettings.from_config(broker.config), broker.metadata,
                            ReplicaManagerLog(broker.replica_manager))


async def _loaded(coordinator: GroupCoordinator) -> None:
    for _ in range(100):
        part = coordinator.partitions.get(0)
        if part is not None and part.status == Loading.LOADED:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("partition did not load")


def _join_req(member_id: str = "") -> JoinRequest:
    return JoinRequest(member_id, None, "c", "/h", 10000, 10000, "consumer",
                       [("range", b"sub")], True)


async def _scenario(tmp_path) -> None:
    broker = make_broker(tmp_path)
    coord = make_coordinator(broker)
    assert (await coord.join("g", _join_req())).error == ErrorCode.not_coordinator
    coord.on_leadership(OFFSETS_TP, True, 0)
    assert (await coord.join("g", _join_req())).error == ErrorCode.coordinator_load_in_progress
    await _loaded(coord)
    first = await coord.join("g", _join_req())
    assert first.error == ErrorCode.member_id_required
    joined = await coord.join("g", _join_req(first.member_id))
    assert (joined.error, joined.generation_id, joined.leader) == (ErrorCode.none, 1,
                                                                   first.member_id)
    mid = first.member_id
    synced = await coord.sync("g", mid, None, 1, None, None, {mid: b"assignment"})
    assert synced.assignment == b"assignment"
    results = await coord.commit_offsets("g", mid, None, 1, {
        DATA_TP: OffsetAndMetadata(41, 0, "m", 1),
        TopicPartition("missing", 0): OffsetAndMetadata(1)})
    assert results == {DATA_TP: ErrorCode.none,
                       TopicPartition("missing", 0): ErrorCode.unknown_topic_or_partition}
    assert coord.fetch_offsets("g", [DATA_TP])[DATA_TP].offset == 41
    assert (await coord.commit_offsets("g", mid, None, 7, {DATA_TP: OffsetAndMetadata(1)})
            ) == {DATA_TP: ErrorCode.illegal_generation}
    assert await coord.delete_groups(["g"]) == {"g": ErrorCode.non_empty_group}

    # A second coordinator reading the same log sees the Stable group and its offsets.
    again = make_coordinator(broker)
    again.on_leadership(OFFSETS_TP, True, 1)
    await _loaded(again)
    group = again.group("g")
    assert group.state == GroupState.STABLE and group.generation == 1
    assert group.members[mid].assignment == b"assignment"
    assert again.fetch_offsets("g", None) == {
        DATA_TP: OffsetAndMetadata(41, 0, "m", 1, record_offset=group.offsets[DATA_TP].record_offset)}
    assert again.heartbeat("g", mid, None, 1) == ErrorCode.none

    # Leave, delete: tombstones make the group disappear on the next load too.
    assert again.leave("g", [(mid, None)]) == (ErrorCode.none, [ErrorCode.none])
    for _ in range(50):  # the Empty group's metadata write runs in the background
        await asyncio.sleep(0.01)
        if not again._tasks:
            break
    assert await again.delete_groups(["g", "nope"]) == {
        "g": ErrorCode.none, "nope": ErrorCode.group_id_not_found}
    third = make_coordinator(broker)
    third.on_leadership(OFFSETS_TP, True, 2)
    await _loaded(third)
    assert third.group("g") is None
    third.on_leadership(OFFSETS_TP, False, 3)
    assert third.heartbeat("g", mid, None, 1) == ErrorCode.not_coordinator
    for c in (coord, again, third):
        await c.stop()


def test_coordinator_end_to_end(tmp_path):
    asyncio.run(_scenario(tmp_path))


async def _unload_answers_parked(tmp_path) -> None:
    coord = make_coordinator(make_broker(tmp_path))
    coord.on_leadership(OFFSETS_TP, True, 0)
    await _loaded(coord)
    first = await coord.join("g", _join_req())
    await coord.join("g", _join_req(first.member_id))
    second = await coord.join("g", _join_req())
    parked = asyncio.ensure_future(coord.join("g", _join_req(second.member_id)))
    await asyncio.sleep(0.01)
    assert not parked.done()
    coord.on_leadership(OFFSETS_TP, False, 1)
    assert (await parked).error == ErrorCode.not_coordinator
    await coord.stop()


def test_losing_leadership_answers_parked_joins(tmp_path):
    asyncio.run(_unload_answers_parked(tmp_path))


async def _deleted_partitions(tmp_path) -> None:
    broker = make_broker(tmp_path)
    other = TopicPartition("u", 0)
    broker.metadata.topics["u"] = dict(broker.metadata.topics["t"])
    coord = make_coordinator(broker)
    coord.on_leadership(OFFSETS_TP, True, 0)
    await _loaded(coord)
    # Two groups without members (simple consumers' commits): one commits to both topics.
    assert await coord.commit_offsets("both", "", None, -1, {
        DATA_TP: OffsetAndMetadata(5), other: OffsetAndMetadata(7)}) == {
        DATA_TP: ErrorCode.none, other: ErrorCode.none}
    assert await coord.commit_offsets("only-t", "", None, -1, {DATA_TP: OffsetAndMetadata(3)}
                                      ) == {DATA_TP: ErrorCode.none}
    assert coord.on_partitions_deleted([TopicPartition("never-committed", 0)]) is None
    assert await coord.on_partitions_deleted([DATA_TP]) == {
        "both": ErrorCode.none, "only-t": ErrorCode.none}
    assert coord.fetch_offsets("both", None) == {
        other: OffsetAndMetadata(7, record_offset=coord.group("both").offsets[other].record_offset)}
    # An Empty group left with no offsets is deleted with them (a group tombstone).
    assert coord.group("only-t") is None
    assert await coord.delete_groups(["only-t"]) == {"only-t": ErrorCode.group_id_not_found}
    # The tombstones are in the log: a coordinator loading it sees the same.
    again = make_coordinator(broker)
    again.on_leadership(OFFSETS_TP, True, 1)
    await _loaded(again)
    assert set(again.fetch_offsets("both", None)) == {other}
    assert again.group("only-t") is None
    for c in (coord, again):
        await c.stop()


def test_deleted_partitions_lose_their_offsets(tmp_path):
    """Kafka's GroupCoordinator.onPartitionsDeleted: a deleted topic's committed offsets are
    tombstoned in every group, and an Empty group left with none is deleted."""
    asyncio.run(_deleted_partitions(tmp_path))


class _HeldReplicaManager(FakeReplicaManager):
    """Appends at once, but the next ``hold`` appends wait for ``release`` before they are
    acknowledged (acks=all waiting for the followers)."""

    def __init__(self, plog: Log) -> None:
        super().__init__(plog)
        self.hold = 0
        self.release = asyncio.Event()

    async def append(self, acks, timeout_ms, entries, origin=AppendOrigin.CLIENT):
        held, self.hold = self.hold > 0, max(0, self.hold - 1)
        out = await super().append(acks, timeout_ms, entries, origin)
        if held:
            await self.release.wait()
        return out


async def _deleted_while_committing(tmp_path) -> None:
    broker = make_broker(tmp_path)
    rm = broker.replica_manager = _HeldReplicaManager(broker.replica_manager.log)
    other = TopicPartition("u", 0)
    broker.metadata.topics["u"] = dict(broker.metadata.topics["t"])
    coord = make_coordinator(broker)
    coord.on_leadership(OFFSETS_TP, True, 0)
    await _loaded(coord)
    assert await coord.commit_offsets("g", "", None, -1, {other: OffsetAndMetadata(1)}) == {
        other: ErrorCode.none}
    # The group's first commit of t-0 is in the log, waiting for its acknowledgement, when
    # an UpdateMetadata deletes t.
    rm.hold = 1
    commit = asyncio.ensure_future(coord.commit_offsets("g", "", None, -1,
                                                        {DATA_TP: OffsetAndMetadata(5)}))
    await asyncio.sleep(0.01)
    assert not commit.done()
    del broker.metadata.topics["t"]
    cleanup = coord.on_partitions_deleted([DATA_TP])
    assert cleanup is not None and await cleanup == {"g": ErrorCode.none}
    rm.release.set()  # the commit completes after the tombstone written behind it
    assert await commit == {DATA_TP: ErrorCode.none}
    assert coord.fetch_offsets("g", [DATA_TP, other]) == {
        DATA_TP: None, other: coord.group("g").offsets[other]}
    again = make_coordinator(broker)  # the log says the same
    again.on_leadership(OFFSETS_TP, True, 1)
    await _loaded(again)
    assert set(again.fetch_offsets("g", None)) == {other}
    for c in (coord, again):
        await c.stop()


def test_a_commit_in_flight_when_its_topic_is_deleted_is_removed(tmp_path):
    """A commit validated before the deletion and acknowledged after it: the tombstone
    follows it in the log, so neither the coordinator nor a later load keeps it (Kafka
    drops the group's pendingOffsetCommits of deleted partitions)."""
    asyncio.run(_deleted_while_committing(tmp_path))


async def _all_groups_tombstoned_at_once(tmp_path) -> None:
    broker = make_broker(tmp_path)
    rm = broker.replica_manager = _HeldReplicaManager(broker.replica_manager.log)
    coord = make_coordinator(broker)
    coord.on_leadership(OFFSETS_TP, True, 0)
    await _loaded(coord)
    for group in ("a", "b"):
        assert await coord.commit_offsets(group, "", None, -1, {DATA_TP: OffsetAndMetadata(5)}
                                          ) == {DATA_TP: ErrorCode.none}
    end = rm.log.log_end_offset
    rm.hold = 1  # the first group's tombstones wait for the followers
    cleanup = coord.on_partitions_deleted([DATA_TP])
    await asyncio.sleep(0.01)
    # Both groups' tombstones are in the log already: a commit to a topic re-created under
    # the same name, accepted meanwhile, comes after them and survives.
    assert rm.log.log_end_offset == end + 4  # two offset and two group tombstones
    rm.release.set()
    assert await cleanup == {"a": ErrorCode.none, "b": ErrorCode.none}
    await coord.stop()


def test_deleted_partitions_are_tombstoned_in_every_group_at_once(tmp_path):
    asyncio.run(_all_groups_tombstoned_at_once(tmp_path))


class _TimingOutReplicaManager(FakeReplicaManager):
    """The next append reaches the log but times out waiting for the followers."""

    def __init__(self, plog: Log) -> None:
        super().__init__(plog)
        self.time_out = False

    async def append(self, acks, timeout_ms, entries, origin=AppendOrigin.CLIENT):
        out = await super().append(acks, timeout_ms, entries, origin)
        if self.time_out:
            self.time_out = False
            for result in out.values():
                result.error = ErrorCode.request_timed_out
        return out


async def _deleted_after_a_timed_out_commit(tmp_path) -> None:
    broker = make_broker(tmp_path)
    rm = broker.replica_manager = _TimingOutReplicaManager(broker.replica_manager.log)
    coord = make_coordinator(broker)
    coord.on_leadership(OFFSETS_TP, True, 0)
    await _loaded(coord)
    rm.time_out = True
    assert await coord.commit_offsets("g", "", None, -1, {DATA_TP: OffsetAndMetadata(5)}) == {
        DATA_TP: ErrorCode.request_timed_out}
    assert coord.fetch_offsets("g", [DATA_TP]) == {DATA_TP: None}
    # The record is in the log all the same (it may still be replicated): the deletion
    # tombstones it, or a coordinator loading the log would bring the deleted offset back.
    del broker.metadata.topics["t"]
    cleanup = coord.on_partitions_deleted([DATA_TP])
    assert cleanup is not None and await cleanup == {"g": ErrorCode.none}
    again = make_coordinator(broker)
    again.on_leadership(OFFSETS_TP, True, 1)
    await _loaded(again)
    assert again.group("g") is None or again.fetch_offsets("g", None) == {}
    for c in (coord, again):
        await c.stop()


def test_a_timed_out_commit_of_a_deleted_topic_is_tombstoned(tmp_path):
    asyncio.run(_deleted_after_a_timed_out_commit(tmp_path))

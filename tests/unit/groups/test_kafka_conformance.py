"""Group coordination details checked against Apache Kafka's GroupCoordinator (3.x):
coordinator loading, pending-sync expiry, and how failed appends reach clients."""

from __future__ import annotations

import asyncio

from tests.unit.groups.test_coordinator import (
    OFFSETS_TP,
    _join_req,
    _loaded,
    make_broker,
    make_coordinator,
)
from tests.unit.groups.test_state import CFG, join_new, req
from weir.groups.coordinator import Loading
from weir.groups.state import Group, GroupState
from weir.protocol.errors import ErrorCode
from weir.replication.replica_manager import ProduceResult

# -- the state machine -----------------------------------------------------------------------


def _stable_with_unsynced_follower():
    """Leader a synced and the group went Stable; follower b got its JoinGroup response
    but never sent SyncGroup (it keeps heartbeating)."""
    g = Group("g", CFG, 0)
    a, _ = join_new(g, 0)
    b, _ = join_new(g, 0)
    imm, _, out = g.join(req(a), 0)
    assert imm is None and set(out.joins) == {a, b} and g.generation == 2
    imm, out = g.sync(a, None, 2, None, None, {a: b"A", b: b"B"}, 0)
    assert imm is None and out.store_for_sync == 2
    g.on_stored(2, ErrorCode.none, 0)
    assert g.state == GroupState.STABLE
    return g, a, b


def test_pending_sync_expires_in_stable():
    """Kafka's DelayedSync / GroupCoordinator.onExpirePendingSync: members that never sent
    SyncGroup within the rebalance timeout are removed in CompletingRebalance *and* Stable,
    and the group rebalances."""
    g, a, b = _stable_with_unsynced_follower()
    now = 0
    while now < 30000:  # rebalance timeout of req(): 30 s; b heartbeats, so no session expiry
        now += 1000
        assert g.heartbeat(b, None, 2, now) == ErrorCode.none
        assert g.heartbeat(a, None, 2, now) == ErrorCode.none
        g.tick(now)
    assert b not in g.members
    assert g.state == GroupState.PREPARING_REBALANCE


def test_synced_members_end_the_pending_sync_watch():
    """GroupCoordinator.removePendingSyncMember: once every member synced (b syncs in Stable)
    nothing expires."""
    g, a, b = _stable_with_unsynced_follower()
    result, _ = g.sync(b, None, 2, None, None, {}, 10)
    assert result.assignment == b"B"
    for now in range(1000, 40000, 1000):
        g.heartbeat(a, None, 2, now)
        g.heartbeat(b, None, 2, now)
        g.tick(now)
    assert set(g.members) == {a, b} and g.state == GroupState.STABLE


# -- the coordinator shell ---------------------------------------------------------------------


async def _during_load(tmp_path) -> None:
    coord = make_coordinator(make_broker(tmp_path))
    coord.on_leadership(OFFSETS_TP, True, 0)
    await _loaded(coord)
    first = await coord.join("g", _join_req())
    joined = await coord.join("g", _join_req(first.member_id))
    mid = joined.member_id
    # The coordinator moves (another broker's load in Kafka): the partition loads again.
    coord.partitions[0].status = Loading.LOADING
    assert coord.heartbeat("g", mid, None, joined.generation_id) == ErrorCode.none
    sync = await coord.sync("g", mid, None, joined.generation_id, None, None, {})
    assert sync.error == ErrorCode.rebalance_in_progress
    await coord.stop()


def test_sync_and_heartbeat_while_loading_answer_as_kafka(tmp_path):
    """GroupCoordinator.handleSyncGroup answers REBALANCE_IN_PROGRESS while the coordinator
    loads (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS there: they rejoin), and
    handleHeartbeat answers NONE."""
    asyncio.run(_during_load(tmp_path))


async def _timed_out_store(tmp_path) -> None:
    broker = make_broker(tmp_path)
    coord = make_coordinator(broker)
    coord.on_leadership(OFFSETS_TP, True, 0)
    await _loaded(coord)
    real_append = broker.replica_manager.append

    async def timing_out(acks, timeout_ms, entries, **kwargs):
        await real_append(acks, timeout_ms, entries, **kwargs)
        return {tp: ProduceResult(error=ErrorCode.request_timed_out) for tp in entries}

    first = await coord.join("g", _join_req())
    joined = await coord.join("g", _join_req(first.member_id))
    mid = joined.member_id
    broker.replica_manager.append = timing_out
    sync = await coord.sync("g", mid, None, joined.generation_id, None, None, {mid: b"x"})
    assert sync.error == ErrorCode.rebalance_in_progress
    assert coord.group("g").state == GroupState.PREPARING_REBALANCE
    from tests.unit.groups.test_coordinator import DATA_TP
    from weir.groups.codec import OffsetAndMetadata

    # The member's commit during the rebalance is answered at once with Kafka's code.
    results = await asyncio.wait_for(coord.commit_offsets(
        "g", mid, None, joined.generation_id, {DATA_TP: OffsetAndMetadata(5)}), 2)
    assert results == {DATA_TP: ErrorCode.request_timed_out}
    await coord.stop()


def test_store_timeouts_map_as_kafka(tmp_path):
    """GroupMetadataManager.storeGroup turns an append's REQUEST_TIMED_OUT into
    REBALANCE_IN_PROGRESS for the SyncGroup; storeOffsets (maybeConvertOffsetCommitError)
    passes REQUEST_TIMED_OUT through to the committer."""
    asyncio.run(_timed_out_store(tmp_path))

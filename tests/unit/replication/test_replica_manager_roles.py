"""The replica manager across role changes: acks=all waits, LeaderAndIsr/StopReplica epoch
and membership checks, diverging-epoch fetches, DeleteRecords and the preferred read
replica (over a real storage engine in a temp dir)."""

from __future__ import annotations

import asyncio

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.replication.local_reads import FetchPartition
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import (
    PartitionStateUpdate,
)

from .helpers import TP, make_rm, run


def state(leader=1, epoch=0, replicas=(1, 2, 3), isr=(1, 2, 3)) -> LeaderState:
    return LeaderState(leader=leader, leader_epoch=epoch, isr=list(isr),
                       replicas=list(replicas), partition_epoch=epoch, controller_epoch=1)


def apply(rm, st: LeaderState, tp=TP):
    return rm.apply_leader_and_isr(1, {tp: PartitionStateUpdate(st, None, False)}, False)


# -- acks=all across leader-epoch changes (item: DelayedProduce) -----------------------------

def test_acks_all_survives_an_epoch_bump_that_keeps_this_broker_leader(tmp_path):
    """DelayedProduce / Partition.checkEnoughReplicasReachOffset: a pending acks=all produce
    waits on leadership and the high watermark only; the controller bumping the leader epoch
    (a follower leaving the ISR) while this broker stays leader does not fail it."""
    rm = make_rm(tmp_path, min_isr=2)
    apply(rm, state(epoch=0))

    async def scenario():
        produce = asyncio.create_task(rm.append(-1, 5000, {TP: build_batch([b"a"])}))
        await asyncio.sleep(0)
        await rm.reads.fetch(2, 0, 1, 1 << 20, [FetchPartition(TP, 1, 1 << 20)])  # 2 has it
        assert not produce.done()  # 3 is still in the ISR and has not fetched
        apply(rm, state(epoch=1, isr=(1, 2)))  # 3 leaves the ISR: epoch 1, same leader
        return await asyncio.wait_for(produce, 2)

    res = run(scenario())
    assert (res[TP].error, res[TP].base_offset) == (ErrorCode.none, 0)


def test_acks_all_fails_after_leader_follower_leader_during_the_wait(tmp_path):
    """DelayedProduce: leadership lost and regained during the wait fails the produce, even
    when the final check finds this broker leading again (the records may be truncated)."""
    rm = make_rm(tmp_path, min_isr=2)
    apply(rm, state(epoch=0))

    async def scenario():
        produce = asyncio.create_task(rm.append(-1, 300, {TP: build_batch([b"a"])}))
        await asyncio.sleep(0)
        apply(rm, state(leader=2, epoch=1))
        apply(rm, state(leader=1, epoch=2))
        # every follower catches up in the new epoch: the HW passes the offset
        await rm.reads.fetch(2, 0, 1, 1 << 20, [FetchPartition(TP, 1, 1 << 20)])
        await rm.reads.fetch(3, 0, 1, 1 << 20, [FetchPartition(TP, 1, 1 << 20)])
        return await asyncio.wait_for(produce, 2)

    assert run(scenario())[TP].error == ErrorCode.not_leader_or_follower


# -- LeaderAndIsr / StopReplica checks (ReplicaManager.becomeLeaderOrFollower/stopReplicas) --

def test_leader_and_isr_with_an_equal_leader_epoch_is_ignored(tmp_path):
    """ReplicaManager.becomeLeaderOrFollower (ZooKeeper mode): a partition state whose leader
    epoch equals the current one is answered STALE_CONTROLLER_EPOCH and not applied."""
    rm = make_rm(tmp_path)
    assert apply(rm, state(epoch=3, isr=(1, 2, 3))) == {TP: ErrorCode.none}
    assert apply(rm, state(epoch=3, isr=(1,))) == {TP: ErrorCode.stale_controller_epoch}
    assert rm.partitions[TP].isr == {1, 2, 3}
    assert apply(rm, state(epoch=2)) == {TP: ErrorCode.stale_controller_epoch}
    assert apply(rm, state(epoch=4, isr=(1,))) == {TP: ErrorCode.none}
    assert rm.partitions[TP].isr == {1}


def test_leader_and_isr_not_naming_this_broker_is_unknown_partition(tmp_path):
    """ReplicaManager.becomeLeaderOrFollower: a partition state whose replica list does not
    include this broker is answered UNKNOWN_TOPIC_OR_PARTITION and ignored (no log made)."""
    rm = make_rm(tmp_path)
    other = TopicPartition("t", 1)
    res = apply(rm, state(leader=2, epoch=0, replicas=(2, 3), isr=(2, 3)), tp=other)
    assert res == {other: ErrorCode.unknown_topic_or_partition}
    assert other not in rm.partitions and rm.log_manager.get_log(other) is None


def test_stop_replica_epoch_checks(tmp_path):
    """ReplicaManager.stopReplicas: an older leader epoch is FENCED_LEADER_EPOCH; an equal or
    newer one, or the no-epoch / during-delete sentinels, is applied."""
    rm = make_rm(tmp_path)
    apply(rm, state(epoch=5))
    assert rm.stop_replicas(1, {TP: (4, False)}) == {TP: ErrorCode.fenced_leader_epoch}
    assert rm.partitions[TP].is_leader
    assert rm.stop_replicas(1, {TP: (5, False)}) == {TP: ErrorCode.none}
    assert not rm.partitions[TP].is_leader
    assert rm.stop_replicas(1, {TP: (-2, True)}) == {TP: ErrorCode.none}
    assert TP not in rm.partitions


def test_equal_epoch_leader_and_isr_still_ignored_after_restart_of_the_partition(tmp_path):
    """ReplicaManager.becomeLeaderOrFollower: a re-created partition (deleted, then named
    again) starts with no epoch, so its first state is applied."""
    rm = make_rm(tmp_path)
    apply(rm, state(epoch=2))
    rm.stop_replicas(1, {TP: (-2, True)})
    assert apply(rm, state(epoch=0)) == {TP: ErrorCode.none}


# -- diverging epochs are answered at once (KIP-320) ----------------------------------------

def test_fetch_with_a_diverging_epoch_is_answered_without_waiting(tmp_path):
    """KIP-320 / ReplicaManager.fetchMessages: a follower fetch whose result carries a
    diverging epoch is answered at once, not parked for replica.fetch.wait.max.ms."""
    rm = make_rm(tmp_path)
    apply(rm, state(epoch=0))
    run(rm.append(1, 1000, {TP: build_batch([b"a", b"b"])}))
    apply(rm, state(epoch=2))  # epoch 2 starts at offset 2
    # follower 2 has offsets 0..3 from an epoch 1 this leader never had
    req = FetchPartition(TP, 4, 1 << 20, current_leader_epoch=2, last_fetched_epoch=1)

    async def timed():
        loop = asyncio.get_running_loop()
        start = loop.time()
        out = await rm.reads.fetch(2, 5000, 1, 1 << 20, [req])
        return out, loop.time() - start

    out, elapsed = run(timed())
    assert out[TP].diverging_epoch == (0, 2)
    assert elapsed < 1.0


# -- KIP-392 preferred read replica; DeleteRecords when the leader moves --------------------

def test_preferred_read_replica_must_have_the_fetch_offset(tmp_path):
    """ReplicaManager.findPreferredReadReplica (KIP-392): only ISR followers whose log covers
    the fetch offset (log start <= offset <= log end) are offered to the selector."""
    rm = make_rm(tmp_path)
    apply(rm, state(epoch=0))
    run(rm.append(1, 1000, {TP: build_batch([b"a", b"b", b"c"])}))
    racks = {1: "a", 2: "b", 3: "b"}
    run(rm.reads.fetch(2, 0, 1, 1 << 20, [FetchPartition(TP, 1, 1 << 20, log_start_offset=0)]))
    run(rm.reads.fetch(3, 0, 1, 1 << 20, [FetchPartition(TP, 3, 1 << 20, log_start_offset=2)]))
    assert rm.reads.preferred_read_replica(TP, 1, racks, "b") == 2  # 3 starts at 2
    assert rm.reads.preferred_read_replica(TP, 3, racks, "b") == 3  # 2 ends at 1
    assert rm.reads.preferred_read_replica(TP, 0, {1: "a", 2: "b", 3: "c"}, "c") == -1
    assert rm.reads.preferred_read_replica(TP, 1, racks, "a") == -1  # the leader's rack


def test_delete_records_answers_not_leader_when_leadership_moves(tmp_path):
    """DelayedDeleteRecords.tryComplete: a partition no longer led here completes with
    NOT_LEADER_OR_FOLLOWER (and no low watermark), not REQUEST_TIMED_OUT."""
    rm = make_rm(tmp_path)
    apply(rm, state(epoch=0, replicas=(1, 2), isr=(1, 2)))
    run(rm.append(1, 1000, {TP: build_batch([b"a", b"b", b"c"])}))
    run(rm.reads.fetch(2, 0, 1, 1 << 20, [FetchPartition(TP, 3, 1 << 20, log_start_offset=0)]))

    async def scenario():
        pending = asyncio.create_task(rm.delete_records({TP: 2}, 5000, lambda: {1, 2}))
        await asyncio.sleep(0)
        assert not pending.done()  # follower 2 has not moved its log start yet
        apply(rm, state(leader=2, epoch=1, replicas=(1, 2), isr=(1, 2)))
        return await asyncio.wait_for(pending, 2)

    assert run(scenario())[TP] == (ErrorCode.not_leader_or_follower, -1)

"""Kafka's DelayedProduce as one sans-I/O object over real partitions and logs:
try_complete decides each partition once (NONE, NOT_LEADER_OR_FOLLOWER,
NOT_ENOUGH_REPLICAS_AFTER_APPEND), on_expire times the rest out; the partition notifier
tells the produce purgatory, the fetch purgatory and the leadership listeners."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.replication.delayed_produce import DelayedProduce
from weir.replication.notifier import PartitionNotifier
from weir.replication.partition import LeaderState, Partition
from weir.replication.purgatory import Purgatory
from weir.replication.replica_manager import ProduceResult
from weir.storage.log import Log, LogConfig

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
NOW = 1_000_000


def _state(isr=(1, 2), epoch=0, leader=1) -> LeaderState:
    return LeaderState(leader=leader, leader_epoch=epoch, isr=list(isr), replicas=[1, 2],
                       partition_epoch=epoch, controller_epoch=1)


def _leader(tmp_path: Path, tp: TopicPartition, min_isr: list[int] | None = None
            ) -> Partition:
    p = Partition(tp, 1)
    if min_isr is not None:  # the topic's min.insync.replicas, as the replica manager sets it
        p.min_insync_replicas = lambda: min_isr[0]
    p.log = Log.open(tmp_path / str(tp), LogConfig.from_dict({}), clean_shutdown=False,
                     now_ms=0)
    p.make_leader(_state(), NOW)
    return p


def _appended(partitions: dict[TopicPartition, Partition]) -> DelayedProduce:
    """One record appended to each partition (acks=all), and the request's operation."""
    results, required = {}, {}
    for tp, p in partitions.items():
        info = p.log.append_as_leader(build_batch([b"v"]), p.leader_epoch, NOW)
        results[tp] = ProduceResult(ErrorCode.none, info.first_offset)
        required[tp] = info.last_offset + 1
    return DelayedProduce(required, results, partitions)


def test_completes_once_every_partition_is_replicated(tmp_path):
    partitions = {A: _leader(tmp_path, A), B: _leader(tmp_path, B)}
    op = _appended(partitions)
    assert sorted(op.keys) == [A, B]
    assert not op.try_complete()
    partitions[A].update_follower_fetch(2, 1, NOW)  # the follower's fetch moves A's HW
    assert not op.try_complete() and op.keys == [B]
    assert op.results[A].error == ErrorCode.none and op.results[A].base_offset == 0
    partitions[B].update_follower_fetch(2, 1, NOW)
    assert op.try_complete() and op.is_completed
    assert [op.results[tp].error for tp in (A, B)] == [ErrorCode.none] * 2


def test_a_lost_leadership_fails_the_partition_even_if_regained(tmp_path):
    """Leader -> follower -> leader may have truncated the records: NOT_LEADER_OR_FOLLOWER;
    a decision once made stays (Kafka's acksPending is cleared once)."""
    partitions = {A: _leader(tmp_path, A), B: _leader(tmp_path, B)}
    op = _appended(partitions)
    partitions[A].make_follower(_state(epoch=1, leader=2))
    partitions[A].make_leader(_state(epoch=2), NOW)
    partitions[A].update_follower_fetch(2, 1, NOW)
    assert not op.try_complete()
    assert op.results[A].error == ErrorCode.not_leader_or_follower
    partitions[B].update_follower_fetch(2, 1, NOW)
    assert op.try_complete()
    assert op.results[A].error == ErrorCode.not_leader_or_follower
    assert op.results[B].error == ErrorCode.none


def test_an_epoch_bump_that_keeps_this_broker_leader_does_not_fail_it(tmp_path):
    partitions = {A: _leader(tmp_path, A)}
    op = _appended(partitions)
    partitions[A].make_leader(_state(epoch=1), NOW)
    partitions[A].update_follower_fetch(2, 1, NOW)
    assert op.try_complete() and op.results[A].error == ErrorCode.none


def test_a_removed_partition_is_not_the_one_appended_to(tmp_path):
    partitions = {A: _leader(tmp_path, A)}
    op = _appended(partitions)
    del partitions[A]  # StopReplica with delete
    assert op.try_complete() and op.results[A].error == ErrorCode.not_leader_or_follower


def test_the_isr_shrunk_below_min_insync_replicas_after_the_append(tmp_path):
    min_isr = [1]
    partitions = {A: _leader(tmp_path, A, min_isr)}
    op = _appended(partitions)
    assert not op.try_complete()
    p = partitions[A]
    # The follower is out of the ISR and, past replica.lag.time.max.ms, no longer waited
    # for: the HW moves on alone; then the topic's min.insync.replicas is raised to 2
    # (a dynamic topic config) before the operation is checked.
    assert p.apply_isr_change(0, [1], 1)
    assert p.maybe_increment_high_watermark(NOW + 60_000)
    min_isr[0] = 2
    assert op.try_complete()
    assert op.results[A].error == ErrorCode.not_enough_replicas_after_append


def test_on_expire_times_out_the_partitions_still_waiting(tmp_path):
    partitions = {A: _leader(tmp_path, A), B: _leader(tmp_path, B)}
    op = _appended(partitions)
    partitions[A].update_follower_fetch(2, 1, NOW)
    op.on_expire()
    assert op.is_completed
    assert op.results[A].error == ErrorCode.none
    assert op.results[B].error == ErrorCode.request_timed_out


def test_the_purgatory_completes_a_watched_operation_when_notified(tmp_path):
    partitions = {A: _leader(tmp_path, A)}

    async def scenario() -> tuple[DelayedProduce, DelayedProduce]:
        purgatory = Purgatory()
        notifier = PartitionNotifier(purgatory, Purgatory())
        op = _appended(partitions)
        assert not op.try_complete()
        watched = asyncio.create_task(purgatory.watch(op, 5))
        await asyncio.sleep(0)
        assert len(purgatory) == 1
        partitions[A].update_follower_fetch(2, 1, NOW)
        notifier.high_watermark_changed(A)
        await asyncio.wait_for(watched, 2)
        expiring = _appended(partitions)
        await purgatory.watch(expiring, 0.01)  # nobody fetches: the timeout is the answer
        assert len(purgatory) == 0
        return op, expiring

    op, expiring = asyncio.run(scenario())
    assert op.results[A].error == ErrorCode.none
    assert expiring.results[A].error == ErrorCode.request_timed_out


class _Recorder:
    def __init__(self) -> None:
        self.notified: list[TopicPartition] = []

    def notify(self, key: TopicPartition) -> None:
        self.notified.append(key)


def test_the_notifier_wakes_what_each_change_concerns(caplog):
    produce, fetch = _Recorder(), _Recorder()
    notifier = PartitionNotifier(produce, fetch)  # type: ignore[arg-type]
    heard: list[tuple[TopicPartition, bool, int]] = []

    def failing(tp: TopicPartition, is_leader: bool, epoch: int) -> None:
        raise RuntimeError("listener bug")

    notifier.leadership_listeners += [failing, lambda *change: heard.append(change)]
    notifier.records_appended(A)
    assert (produce.notified, fetch.notified) == ([], [A])
    notifier.isr_changed(A, high_watermark_moved=False)
    assert (produce.notified, fetch.notified) == ([A], [A])
    notifier.isr_changed(B, high_watermark_moved=True)
    notifier.high_watermark_changed(B)
    assert (produce.notified[1:], fetch.notified[1:]) == ([B, B], [B, B])
    with caplog.at_level(logging.ERROR):
        notifier.leadership_changed(A, False, 3)
    assert heard == [(A, False, 3)] and "leadership listener failed" in caplog.text
    notifier.leadership_changed(B, False, 4, tell_listeners=False)
    assert heard == [(A, False, 3)]
    assert produce.notified[-2:] == [A, B] and fetch.notified[-2:] == [A, B]

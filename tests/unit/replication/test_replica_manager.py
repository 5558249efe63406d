"""The replica manager over a real storage engine in a temp dir: produce/fetch semantics,
acks, high-watermark rules, fencing, LeaderAndIsr/StopReplica handling."""

from __future__ import annotations

import asyncio

import pytest

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.fetch_response import FileRegion
from weir.records.builder import build_batch
from weir.replication.local_reads import FetchPartition
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import (
    PartitionStateUpdate,
)

from .helpers import TP, lead, make_rm, run


def test_produce_then_consume_below_high_watermark(tmp_path):
    rm = make_rm(tmp_path)
    assert lead(rm) == {TP: ErrorCode.none}
    res = run(rm.append(1, 1000, {TP: build_batch([b"a", b"b", b"c"])}))
    assert (res[TP].error, res[TP].base_offset) == (ErrorCode.none, 0)
    out = run(rm.reads.fetch(-1, 0, 1, 1 << 20, [FetchPartition(TP, 0, 1 << 20)]))
    assert out[TP].error == ErrorCode.none and out[TP].high_watermark == 3
    region = out[TP].records  # a slice of the segment file, sent with sendfile
    assert isinstance(region, FileRegion) and region.size == out[TP].size > 0
    with open(region.path, "rb") as f:
        f.seek(region.position)
        assert b"a" in f.read(region.size)


def test_fetch_beyond_log_end_is_out_of_range_and_at_end_is_empty(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm)
    run(rm.append(1, 1000, {TP: build_batch([b"a"])}))
    out = run(rm.reads.fetch(-1, 0, 1, 1 << 20, [FetchPartition(TP, 1, 1 << 20),
                                           FetchPartition(TopicPartition("t", 9), 0, 100)]))
    assert out[TP].error == ErrorCode.none and out[TP].records == b""
    assert out[TopicPartition("t", 9)].error == ErrorCode.unknown_topic_or_partition
    out = run(rm.reads.fetch(-1, 0, 1, 1 << 20, [FetchPartition(TP, 5, 1 << 20)]))
    assert out[TP].error == ErrorCode.offset_out_of_range


def test_long_poll_fetch_wakes_on_append(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm)

    async def scenario():
        fetch = asyncio.create_task(rm.reads.fetch(-1, 5000, 1, 1 << 20, [FetchPartition(TP, 0, 1 << 20)]))
        await asyncio.sleep(0)  # let the fetch park in the purgatory
        assert not fetch.done()
        await rm.append(1, 1000, {TP: build_batch([b"x"])})
        return await asyncio.wait_for(fetch, 2)

    out = run(scenario())
    assert out[TP].size > 0


def test_acks_all_waits_for_followers_and_times_out(tmp_path):
    rm = make_rm(tmp_path, min_isr=2)
    lead(rm, replicas=(1, 2), isr=(1, 2))
    res = run(rm.append(-1, 50, {TP: build_batch([b"a"])}))
    assert res[TP].error == ErrorCode.request_timed_out  # follower 2 never fetched

    async def scenario():
        produce = asyncio.create_task(rm.append(-1, 5000, {TP: build_batch([b"b"])}))
        await asyncio.sleep(0)
        assert not produce.done()
        # follower 2 fetches up to the end: the high watermark passes the batch
        await rm.reads.fetch(2, 0, 1, 1 << 20, [FetchPartition(TP, 2, 1 << 20)])
        return await asyncio.wait_for(produce, 2)

    res = run(scenario())
    assert (res[TP].error, res[TP].base_offset) == (ErrorCode.none, 1)


def test_acks_all_refused_when_isr_below_min(tmp_path):
    rm = make_rm(tmp_path, min_isr=2)
    lead(rm, replicas=(1, 2), isr=(1,))
    res = run(rm.append(-1, 1000, {TP: build_batch([b"a"])}))
    assert res[TP].error == ErrorCode.not_enough_replicas


def test_invalid_batches_get_kafka_errors(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm)
    batch = bytearray(build_batch([b"a"]))
    batch[-1] ^= 0xFF  # breaks the CRC
    res = run(rm.append(1, 1000, {TP: bytes(batch)}))
    assert res[TP].error == ErrorCode.corrupt_message


def test_idempotent_duplicate_gets_original_offset_and_gap_is_refused(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm)
    first = build_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    assert run(rm.append(1, 1000, {TP: first}))[TP].base_offset == 0
    assert run(rm.append(1, 1000, {TP: first}))[TP].base_offset == 0  # retry: same offset
    gap = build_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=5)
    assert run(rm.append(1, 1000, {TP: gap}))[TP].error == ErrorCode.out_of_order_sequence_number
    assert rm.partitions[TP].log.log_end_offset == 2


def test_stale_epochs_are_fenced(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm, epoch=5)
    assert lead(rm, epoch=4) == {TP: ErrorCode.stale_controller_epoch}
    run(rm.append(1, 1000, {TP: build_batch([b"a"])}))
    out = run(rm.reads.fetch(-1, 0, 1, 100, [FetchPartition(TP, 0, 100, current_leader_epoch=4)]))
    assert out[TP].error == ErrorCode.fenced_leader_epoch
    out = run(rm.reads.fetch(-1, 0, 1, 100, [FetchPartition(TP, 0, 100, current_leader_epoch=6)]))
    assert out[TP].error == ErrorCode.unknown_leader_epoch
    with pytest.raises(KafkaError, match="controller epoch"):
        rm.check_controller_epoch(0)


def test_become_follower_stops_serving_produce(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm, replicas=(1, 2), isr=(1, 2))
    lead(rm, replicas=(1, 2), isr=(1, 2), leader=2, epoch=1)
    res = run(rm.append(1, 1000, {TP: build_batch([b"a"])}))
    assert res[TP].error == ErrorCode.not_leader_or_follower


def test_list_offsets(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm)
    run(rm.append(1, 1000, {TP: build_batch([b"a", b"b"], timestamp_ms=1000)}))
    run(rm.append(1, 1000, {TP: build_batch([b"c"], timestamp_ms=5000)}))
    assert rm.list_offset(TP, -2, -1, -1)[0] == 0
    assert rm.list_offset(TP, -1, -1, -1)[0] == 3
    assert rm.list_offset(TP, 4000, -1, -1)[0] == 2
    assert rm.list_offset(TP, 9000, -1, -1)[0] == -1
    assert rm.list_offset(TP, -3, -1, -1)[:2] == (2, 5000)


def test_stop_replica_with_delete_removes_the_log(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm)
    directory = rm.partitions[TP].log.dir
    assert directory.exists()
    assert rm.stop_replicas(1, {TP: (0, True)}) == {TP: ErrorCode.none}
    assert TP not in rm.partitions and not directory.exists()


def test_first_full_leader_and_isr_removes_stray_partitions(tmp_path):
    rm = make_rm(tmp_path)
    stray = TopicPartition("gone", 0)
    lead(rm, tp=stray)
    state = LeaderState(1, 0, [1], [1], 0, 1)
    rm.apply_leader_and_isr(1, {TP: PartitionStateUpdate(state, None, False)}, full=True)
    assert rm.log_manager.get_log(stray) is None and rm.log_manager.get_log(TP) is not None


def test_delete_records_waits_for_the_low_watermark(tmp_path):
    rm = make_rm(tmp_path)
    lead(rm, replicas=(1, 2), isr=(1, 2))
    run(rm.append(1, 1000, {TP: build_batch([b"a", b"b", b"c"])}))
    run(rm.reads.fetch(2, 0, 1, 1 << 20, [FetchPartition(TP, 3, 1 << 20, log_start_offset=0)]))
    assert rm.partitions[TP].log.high_watermark == 3
    # follower 2 has not moved its log start yet: times out with the low watermark 0
    res = run(rm.delete_records({TP: 2}, 50, lambda: {1, 2}))
    assert res[TP] == (ErrorCode.request_timed_out, 0)
    assert rm.partitions[TP].log.log_start_offset == 2

    async def scenario():
        pending = asyncio.create_task(rm.delete_records({TP: -1}, 5000, lambda: {1, 2}))
        await asyncio.sleep(0)
        assert not pending.done()
        await rm.reads.fetch(2, 0, 1, 1 << 20, [FetchPartition(TP, 3, 1 << 20, log_start_offset=3)])
        return await asyncio.wait_for(pending, 2)

    assert run(scenario())[TP] == (ErrorCode.none, 3)
    # beyond the high watermark
    assert run(rm.delete_records({TP: 9}, 50, lambda: {1, 2}))[TP][0] == (
        ErrorCode.offset_out_of_range)


def test_acks_all_decided_at_the_append(tmp_path):
    """Kafka's DelayedProduce decided without waiting: one replica, the HW passes the
    append at once (NONE, no coroutine); the ISR below min.insync.replicas before the
    append refuses it (NOT_ENOUGH_REPLICAS); several partitions at once each get theirs."""
    rm = make_rm(tmp_path)
    other = TopicPartition("t", 1)
    lead(rm)
    lead(rm, tp=other)
    results, wait = rm.append_now(-1, 1000, {TP: build_batch([b"a"]),
                                             other: build_batch([b"b", b"c"])})
    assert wait is None
    assert {tp: (r.error, r.base_offset) for tp, r in results.items()} == {
        TP: (ErrorCode.none, 0), other: (ErrorCode.none, 0)}
    strict = make_rm(tmp_path / "strict", min_isr=2)
    lead(strict, replicas=(1, 2), isr=(1,))
    results, wait = strict.append_now(-1, 1000, {TP: build_batch([b"a"])})
    assert wait is None and results[TP].error == ErrorCode.not_enough_replicas
    results, wait = strict.append_now(1, 1000, {TP: build_batch([b"a"])})  # acks=1: no wait
    assert wait is None and results[TP].error == ErrorCode.none

"""A LeaderAndIsr for many partitions: new logs created on a worker thread before it is
applied, and the new leader epochs' checkpoints written in one batch on the storage thread."""

from __future__ import annotations

import asyncio
import uuid

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.replication.leader_endpoint import BrokerEndPoint
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from weir.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    read_epoch_checkpoint,
    read_partition_metadata,
)
from weir.storage.config import LogConfig
from weir.storage.log_manager import LogManager

TPS = [TopicPartition("t", p) for p in range(20)]
LIVE = {2: BrokerEndPoint(2, "127.0.0.1", 1)}
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def _updates(leader: int, epoch: int, replicas=(1, 2, 3)):
    return {tp: PartitionStateUpdate(
        LeaderState(leader=leader, leader_epoch=epoch, isr=list(replicas),
                    replicas=list(replicas), partition_epoch=epoch, controller_epoch=1),
        None, True) for tp in TPS}


def _manager(dirs):
    lm = LogManager(dirs, LogConfig.from_dict({}))
    lm.startup(now_ms=0)
    return lm, ReplicaManager(1, lm, lambda _t: LogConfig.from_dict({}), lambda _t: 2)


def test_new_logs_are_created_before_the_request_is_applied(tmp_path):
    async def body():
        lm, rm = _manager([tmp_path])
        updates = _updates(2, 0)
        for u in updates.values():
            u.topic_id = None
        await rm.create_new_logs(1, updates)
        assert all(lm.get_log(tp) is not None for tp in TPS)
        assert not rm.partitions  # nothing applied yet
        results = rm.apply_leader_and_isr(1, updates, True, LIVE)
        assert set(results.values()) == {0}
        assert all(rm.partitions[tp].log is lm.get_log(tp) for tp in TPS)
        await rm.close()
        lm.shutdown()
    asyncio.run(body())


def test_refused_replicas_get_no_log(tmp_path):
    async def body():
        lm, rm = _manager([tmp_path])
        await rm.create_new_logs(1, _updates(2, 0, replicas=(2, 3, 4)))
        assert not lm.all_logs()
        await rm.close()
        lm.shutdown()
    asyncio.run(body())


def test_jbod_placement_stays_inline(tmp_path):
    async def body():
        lm, rm = _manager([tmp_path / "a", tmp_path / "b"])
        updates = _updates(2, 0)
        await rm.create_new_logs(1, updates)
        assert not lm.all_logs()  # left to get_or_create_log (least-loaded dir)
        rm.apply_leader_and_isr(1, updates, True, LIVE)
        dirs = {lm.log_dir_of(tp) for tp in TPS}
        assert dirs == {tmp_path / "a", tmp_path / "b"}
        await rm.close()
        lm.shutdown()
    asyncio.run(body())


def test_leader_epoch_checkpoints_written_in_one_batch_off_the_loop(tmp_path):
    async def body():
        lm, rm = _manager([tmp_path])
        rm.apply_leader_and_isr(1, _updates(2, 0), True, LIVE)
        rm.apply_leader_and_isr(1, _updates(1, 1), False, LIVE)
        caches = [rm.partitions[tp].log.epoch_cache for tp in TPS]
        assert all(c.entries == [(1, 0)] for c in caches)
        assert lm.deferred.drain(timeout_s=30)
        for tp in TPS:
            path = lm.get_log(tp).dir / LEADER_EPOCH_CHECKPOINT
            assert read_epoch_checkpoint(path) == [(1, 0)]
        await rm.close()
        lm.shutdown()
    asyncio.run(body())


def test_partition_metadata_of_new_logs_is_written(tmp_path):
    async def body():
        lm, rm = _manager([tmp_path])
        updates = _updates(2, 0)
        tid = uuid.UUID(bytes=b"\x00" * 15 + b"\x01")
        for u in updates.values():
            u.topic_id = tid
        await rm.create_new_logs(1, updates)
        assert lm.deferred.drain(timeout_s=30)
        assert read_partition_metadata(lm.get_log(TPS[0]).dir) == TOPIC_ID
        await rm.close()
        lm.shutdown()
    asyncio.run(body())


def test_isr_change_retries_waiting_fetches_only_when_the_high_watermark_moves(tmp_path):
    """Kafka's maybeShrinkIsr: delayed fetches are retried only if the HW moved (each
    retry re-reads every partition of a follower's fetch)."""
    from weir.protocol.errors import ErrorCode
    from weir.records.builder import build_batch
    from weir.replication.alter_partition import IsrResult

    async def body():
        lm, rm = _manager([tmp_path])
        rm.topic_min_isr = lambda _t: 1
        rm.broker_alive = lambda b: b == 1  # followers gone: they hold nothing back
        rm.apply_leader_and_isr(1, _updates(1, 1), True, LIVE)
        fetch_notified, produce_notified = [], []
        rm.fetch_purgatory.notify = fetch_notified.append
        rm.produce_purgatory.notify = produce_notified.append
        tp = TPS[0]
        rm.on_isr_result(IsrResult(tp, ErrorCode.none, 1, (1, 2), 2))  # empty log: HW stays
        assert fetch_notified == [] and produce_notified == [tp]
        p = rm.partitions[tp]
        p.log.append_as_leader(build_batch([b"v"]), 1, 0)  # LEO 1, HW 0 (waits for 2 and 3)
        rm.on_isr_result(IsrResult(tp, ErrorCode.none, 1, (1,), 3))  # only the leader left
        assert p.log.high_watermark == 1 and fetch_notified == [tp]
        await rm.close()
        lm.shutdown()
    asyncio.run(body())


def _count_log_opens(monkeypatch):
    """Counts Log.open calls (each opens a segment's descriptor)."""
    from weir.storage import log_manager as lm_module
    opened: list[str] = []
    real = lm_module.Log.open

    def counting(path, *args, **kwargs):
        opened.append(str(path))
        return real(path, *args, **kwargs)
    monkeypatch.setattr(lm_module.Log, "open", staticmethod(counting))
    return opened


def test_a_resent_leader_and_isr_waits_for_the_creation_in_flight(tmp_path, monkeypatch):
    """The controller resends a LeaderAndIsr that timed out while the first copy is still
    creating its logs: each log is opened once (not twice: a 10,000-partition topic would
    hold twice its descriptors), and both copies then find every log."""
    opened = _count_log_opens(monkeypatch)

    async def body():
        lm, rm = _manager([tmp_path])
        updates = _updates(2, 0)
        first = asyncio.ensure_future(rm.create_new_logs(1, updates))
        await asyncio.sleep(0)  # the first copy's creation is under way
        await rm.create_new_logs(1, updates)
        assert all(lm.get_log(tp) is not None for tp in TPS)
        await first
        assert sorted(opened) == sorted(str(tmp_path / str(tp)) for tp in TPS)
        assert not rm._creating
        await rm.close()
        lm.shutdown()
    asyncio.run(body())


def test_a_cancelled_request_s_logs_are_still_adopted(tmp_path, monkeypatch):
    """The first copy's handler is cancelled with its connection: the logs it began to
    create are adopted anyway, and the resent copy opens none again."""
    opened = _count_log_opens(monkeypatch)

    async def body():
        lm, rm = _manager([tmp_path])
        updates = _updates(2, 0)
        first = asyncio.ensure_future(rm.create_new_logs(1, updates))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        assert first.cancelled()
        await rm.create_new_logs(1, updates)
        assert all(lm.get_log(tp) is not None for tp in TPS)
        assert len(opened) == len(TPS)
        results = rm.apply_leader_and_isr(1, updates, True, LIVE)
        assert set(results.values()) == {0}
        await rm.close()
        lm.shutdown()
    asyncio.run(body())


def test_sliced_apply_lets_other_requests_run_between_slices(tmp_path):
    """apply_leader_and_isr_sliced: 20 partitions in slices of 6 (4 slices); a request
    arriving on another connection once the apply has begun (a task scheduled by the first
    role change, standing for a client's Metadata) runs after the first slice, while the
    request is still being applied; the outcome equals the one-go apply's."""
    async def body():
        lm, rm = _manager([tmp_path])
        seen: list[int] = []
        others: list[asyncio.Future] = []

        async def metadata_request():
            seen.append(len(rm.partitions))

        def arrives(_tp, _is_leader, _epoch):
            if not others:
                others.append(asyncio.ensure_future(metadata_request()))
        rm.leadership_listeners.append(arrives)
        try:
            results, busy_ms, slices = await rm.apply_leader_and_isr_sliced(
                1, _updates(2, 0), True, LIVE, slice_size=6)
            await others[0]
            assert slices == 4 and busy_ms >= 0
            assert seen == [6]  # it ran between the first and the second slice
            assert set(results) == set(TPS) and set(results.values()) == {0}
            assert all(not rm.partitions[tp].is_leader and rm.partitions[tp].leader == 2
                       for tp in TPS)
        finally:
            await rm.close()
            lm.shutdown()
    asyncio.run(body())


def test_sliced_apply_is_one_at_a_time_and_survives_cancellation(tmp_path):
    """Two sliced LeaderAndIsrs never interleave (Kafka's replicaStateChangeLock), and a
    handler cancelled midway (its connection closed) still leaves the whole request
    applied."""
    async def body():
        lm, rm = _manager([tmp_path])
        order: list[int] = []
        begun = asyncio.Event()

        def changed(_tp, _leader, epoch):
            order.append(epoch)
            begun.set()
        rm.leadership_listeners.append(changed)
        try:
            first = asyncio.ensure_future(rm.apply_leader_and_isr_sliced(
                1, _updates(2, 0), True, LIVE, slice_size=3))
            second = asyncio.ensure_future(rm.apply_leader_and_isr_sliced(
                1, _updates(1, 1), False, LIVE, slice_size=3))
            await begun.wait()
            first.cancel()  # between its slices now
            results, _, _ = await second
            assert first.cancelled()
            assert order == [0] * len(TPS) + [1] * len(TPS)  # whole, then the next
            assert set(results.values()) == {0}  # epoch 1 over a fully applied epoch 0
            assert all(rm.partitions[tp].is_leader and rm.partitions[tp].leader_epoch == 1
                       for tp in TPS)
            assert rm.received_full_leader_and_isr
        finally:
            await rm.close()
            lm.shutdown()
    asyncio.run(body())


def test_sliced_apply_refuses_a_stale_controller_epoch(tmp_path):
    async def body():
        lm, rm = _manager([tmp_path])
        try:
            await rm.apply_leader_and_isr_sliced(2, _updates(2, 0), True, LIVE)
            try:
                await rm.apply_leader_and_isr_sliced(1, _updates(1, 1), False, LIVE)
            except KafkaError as exc:
                assert exc.code == ErrorCode.stale_controller_epoch
            else:
                raise AssertionError("a stale controller epoch was applied")
            assert all(rm.partitions[tp].leader_epoch == 0 for tp in TPS)
        finally:
            await rm.close()
            lm.shutdown()
    asyncio.run(body())

"""Moving a replica between log dirs of one broker while it is served (KIP-113), and a
partial log dir failure on the replica manager's side (KIP-112)."""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.replication.helpers import lead
from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.replication import log_dir_mover
from weir.replication.log_dir_failure import take_dir_offline
from weir.replication.log_dir_mover import LogDirMover, alter_replica_log_dirs
from weir.replication.replica_manager import ReplicaManager
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def rm(dirs):
    lm = LogManager(dirs, LogConfig.from_dict({}))
    lm.startup(0)
    manager = ReplicaManager(1, lm, lambda _t: LogConfig.from_dict({}), lambda _t: 1)
    yield manager
    for lg in [*lm.all_logs().values(), *lm.future_logs().values()]:
        lg.close()


def batch(i: int) -> bytes:
    return build_batch([f"r{i}".encode() * 50], timestamp_ms=1)


def offsets_and_values(lg) -> list[bytes]:
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        read = lg.read(offset, 1 << 20, max_offset=None)
        out.append(read.read_bytes())
        offset = read.last_offset + 1
    return out


async def wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.005)


def test_a_replica_moves_while_it_keeps_taking_appends(rm, dirs, monkeypatch):
    monkeypatch.setattr(log_dir_mover, "CHUNK_BYTES", 4096)  # many steps
    monkeypatch.setattr(log_dir_mover, "ON_LOOP_BYTES", 1024)

    async def scenario():
        lead(rm, tp=TP)
        assert rm.log_manager.log_dir_of(TP) == dirs[0]
        for i in range(300):
            (await rm.append(1, 1000, {TP: batch(i)}))[TP]
        mover = LogDirMover(rm, rm.log_manager)
        moved = []
        mover.moved_listeners.append(lambda tp, a, b: moved.append((tp, a, b)))
        result = alter_replica_log_dirs(rm, mover, {TP: str(dirs[1])})
        assert result == {TP: ErrorCode.none}
        assert rm.log_manager.future_dir_of(TP) == dirs[1]
        i = 300
        while not moved:  # appends go on during the copy
            assert (await rm.append(1, 1000, {TP: batch(i)}))[TP].error == ErrorCode.none
            i += 1
            await asyncio.sleep(0.0005)
            assert i < 20_000
        assert moved == [(TP, dirs[0], dirs[1])]
        p = rm.partitions[TP]
        assert p.log is rm.log_manager.get_log(TP) and p.log.dir == dirs[1] / "t-0"
        assert (await rm.append(1, 1000, {TP: batch(i)}))[TP].base_offset == i
        assert p.log.log_end_offset == i + 1
        data = b"".join(offsets_and_values(p.log))
        positions = [data.find(f"r{k}".encode() * 50) for k in range(i + 1)]
        assert -1 not in positions and positions == sorted(positions)  # every record, in order
        await wait_for(lambda: not any(d.name.endswith("-delete") for d in dirs[0].iterdir()))
        await mover.close()
        return i

    total = asyncio.run(scenario())
    assert total > 300


def test_future_log_follows_a_truncation_of_the_current_log(rm, dirs):
    lm = rm.log_manager

    async def scenario():
        lead(rm, tp=TP)
        current = lm.get_log(TP)
        for i in range(5):
            current.append_as_leader(batch(i), 0, 1)
        future = lm.create_future_log(TP, dirs[1])
        log_dir_mover._reconcile(current, future)
        while future.log_end_offset < current.log_end_offset:
            read = current.read(future.log_end_offset, 1 << 20, max_offset=None)
            future.append_as_follower(read.read_bytes())
        # The current log loses its tail and gets different records in a new epoch.
        current.truncate_to(3)
        current.append_as_leader(batch(100), 1, 1)
        log_dir_mover._reconcile(current, future)
        assert future.log_end_offset == 3
        expected = b"".join(offsets_and_values(current))
        mover = LogDirMover(rm, lm)
        mover.start(TP)
        await wait_for(lambda: lm.log_dir_of(TP) == dirs[1])
        assert b"".join(offsets_and_values(lm.get_log(TP))) == expected
        assert lm.get_log(TP).epoch_cache.entries == [(0, 0), (1, 3)]
        await mover.close()
        # A leader elected at epoch 7 that wrote nothing yet: the moved log knows epoch 7.
        lead(rm, tp=TP, epoch=7)
        moved = lm.get_log(TP)
        assert moved.epoch_cache.latest_epoch == 7
        lm.create_future_log(TP, dirs[0])
        mover = LogDirMover(rm, lm)
        mover.start(TP)
        await wait_for(lambda: lm.log_dir_of(TP) == dirs[0])
        assert lm.get_log(TP).epoch_cache.entries == [(0, 0), (1, 3), (7, 4)]
        await mover.close()

    asyncio.run(scenario())


def test_alter_replica_log_dirs_answers_as_kafka(rm, dirs, tmp_path):
    lm = rm.log_manager

    async def scenario():
        mover = LogDirMover(rm, lm)
        lead(rm, tp=TP)
        errors = alter_replica_log_dirs(rm, mover, {
            TP: str(tmp_path / "elsewhere"),  # not a log dir of this broker
            TP1: str(dirs[1]),  # not hosted yet: remembered
        })
        assert errors == {TP: ErrorCode.log_dir_not_found, TP1: ErrorCode.replica_not_available}
        assert lm.preferred_log_dir(TP1) == dirs[1]
        lead(rm, tp=TP1)
        assert lm.log_dir_of(TP1) == dirs[1]
        # Already in the named dir: nothing to do.
        assert alter_replica_log_dirs(rm, mover, {TP: str(dirs[0])}) == {TP: ErrorCode.none}
        assert lm.future_log(TP) is None
        # A second request naming another dir abandons the move in progress.
        assert alter_replica_log_dirs(rm, mover, {TP: str(dirs[1])}) == {TP: ErrorCode.none}
        assert lm.future_dir_of(TP) == dirs[1] and TP in mover.moving()
        assert alter_replica_log_dirs(rm, mover, {TP: str(dirs[0])}) == {TP: ErrorCode.none}
        assert lm.future_log(TP) is None and lm.log_dir_of(TP) == dirs[0]
        assert not [d for d in dirs[1].iterdir() if d.name.endswith("-future")]
        # An offline destination.
        lm.mark_dir_failed(dirs[1], "gone")
        assert alter_replica_log_dirs(rm, mover, {TP: str(dirs[1])}) == {
            TP: ErrorCode.kafka_storage_error}
        await mover.close()

    asyncio.run(scenario())


def test_a_failed_dir_takes_only_its_replicas_offline(rm, dirs):
    lm = rm.log_manager

    async def scenario():
        lead(rm, tp=TP)
        lead(rm, tp=TP1)
        assert (lm.log_dir_of(TP), lm.log_dir_of(TP1)) == (dirs[0], dirs[1])
        lm.mark_dir_failed(dirs[0], "I/O error")
        assert take_dir_offline(rm, None, dirs[0]) == [TP]
        produced = await rm.append(1, 1000, {TP: batch(0), TP1: batch(1)})
        assert produced[TP].error == ErrorCode.kafka_storage_error
        assert produced[TP1].error == ErrorCode.none
        # LeaderAndIsr for the offline replica answers KAFKA_STORAGE_ERROR (even at the
        # same epoch), so the controller learns it is offline.
        assert lead(rm, tp=TP, epoch=0) == {TP: ErrorCode.kafka_storage_error}
        assert lead(rm, tp=TP, epoch=5) == {TP: ErrorCode.kafka_storage_error}
        # A replica that is not new is not created while a dir is offline.
        from weir.replication.partition import LeaderState
        from weir.replication.replica_manager import PartitionStateUpdate

        tp2 = TopicPartition("u", 0)
        state = LeaderState(leader=1, leader_epoch=0, isr=[1], replicas=[1],
                            partition_epoch=0, controller_epoch=1)
        assert rm.apply_leader_and_isr(1, {tp2: PartitionStateUpdate(state, None, False)},
                                       False) == {tp2: ErrorCode.kafka_storage_error}
        assert rm.apply_leader_and_isr(1, {tp2: PartitionStateUpdate(state, None, True)},
                                       False) == {tp2: ErrorCode.none}
        with pytest.raises(KafkaError):
            rm.partition(TP)

    asyncio.run(scenario())


def test_copy_quota_paces_bytes_per_second():
    now = [0.0]
    quota = log_dir_mover.CopyQuota(1000, clock=lambda: now[0])
    assert quota.limited and quota.chunk(1 << 20) == 100
    assert quota.record(100) == pytest.approx(0.1)
    now[0] = 0.1
    assert quota.record(100) == pytest.approx(0.1)
    now[0] = 5.0  # idle: no credit carried over
    assert quota.record(500) == pytest.approx(0.5)
    unlimited = log_dir_mover.CopyQuota()
    assert not unlimited.limited and unlimited.chunk(123) == 123 and unlimited.record(10**9) == 0


def test_a_compacted_log_with_offset_gaps_moves_and_cleaning_pauses(rm, dirs):
    lm = rm.log_manager
    paused = []

    class Cleaner:  # the log cleaner manager's pause hooks (Kafka's abortAndPauseCleaning)
        def abort_and_pause(self, tp):
            paused.append(("pause", tp))

        def resume(self, tp):
            paused.append(("resume", tp))

        def forget(self, tp, log_dir):
            pass

    lm.cleaner = Cleaner()

    async def scenario():
        lead(rm, tp=TP)
        current = lm.get_log(TP)
        for base in (0, 10, 11, 40):  # what compaction leaves: gaps between batches
            current.append_as_follower(build_batch([b"k%d" % base], base_offset=base,
                                                   partition_leader_epoch=0))
        assert current.log_end_offset == 41
        expected = b"".join(offsets_and_values(current))
        mover = LogDirMover(rm, lm)
        assert alter_replica_log_dirs(rm, mover, {TP: str(dirs[1])}) == {TP: ErrorCode.none}
        await wait_for(lambda: lm.log_dir_of(TP) == dirs[1])
        assert b"".join(offsets_and_values(lm.get_log(TP))) == expected
        await wait_for(lambda: not mover.moving())
        await mover.close()

    asyncio.run(scenario())
    assert paused[0] == ("pause", TP) and paused[-1] == ("resume", TP)
    assert paused.count(("pause", TP)) == paused.count(("resume", TP))

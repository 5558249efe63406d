"""An I/O error in one log dir, through the storage file seam (weir.storage.file_io): the
dir goes offline and Kafka's handleLogDirFailure runs (JBOD, KIP-112)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.unit.replication.helpers import lead
from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.replication.log_dir_failure import handle_log_dir_failure
from weir.replication.replica_manager import ReplicaManager
from weir.storage import file_io
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager

TP, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class _FailingDir(file_io.OsFileIo):
    """The OS, except that every operation on files under ``broken`` raises EIO."""

    def __init__(self) -> None:
        self.broken: Path | None = None
        self.failures = 0

    def _check(self, path: Path) -> None:
        if self.broken is not None and self.broken in path.parents:
            self.failures += 1
            raise OSError(errno.EIO, "injected", str(path))

    def pwrite(self, path: Path, fd: int, data: bytes | bytearray, position: int) -> int:
        self._check(path)
        return os.pwrite(fd, data, position)

    def pread(self, path: Path, fd: int, size: int, position: int) -> bytes:
        self._check(path)
        return os.pread(fd, size, position)

    def fsync(self, path: Path, fd: int) -> None:
        self._check(path)
        os.fsync(fd)


@pytest.fixture
def disk():
    faulty = _FailingDir()
    previous = file_io.install(faulty)
    yield faulty
    assert file_io.install(previous) is faulty


@pytest.fixture
def setup(tmp_path, disk):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = LogManager(dirs, LogConfig.from_dict({}))
    lm.startup(0)
    rm = ReplicaManager(1, lm, lambda _t: LogConfig.from_dict({}), lambda _t: 1)
    events: list[str] = []
    lm.dir_failure_listeners.append(lambda d, reason: handle_log_dir_failure(
        rm, None, d, reason, notify_controller=lambda: events.append(f"notify {d.name}"),
        halt=lambda: events.append("halt")))
    yield rm, dirs, events
    disk.broken = None
    for lg in lm.all_logs().values():
        lg.close()


def _batch() -> bytes:
    return build_batch([b"v" * 20], timestamp_ms=1)


def test_a_failed_write_takes_the_leader_dir_offline_and_tells_the_controller(setup, disk):
    rm, dirs, events = setup

    async def scenario() -> None:
        lead(rm, tp=TP)
        lead(rm, tp=TP1)
        assert rm.log_manager.log_dir_of(TP) == dirs[0]
        disk.broken = dirs[0]
        first = await rm.append(1, 1000, {TP: _batch(), TP1: _batch()})
        assert first[TP].error == ErrorCode.kafka_storage_error
        assert first[TP1].error == ErrorCode.none
        assert disk.failures == 1
        # The next request for it finds the dir offline: the replica stops leading and
        # the controller is told, once.
        second = await rm.append(1, 1000, {TP: _batch()})
        assert second[TP].error == ErrorCode.kafka_storage_error
        assert rm.log_manager.offline_dirs.keys() == {dirs[0]}
        assert not rm.partitions[TP].is_leader and rm.partitions[TP1].is_leader
        assert events == ["notify d1"]

    import asyncio
    asyncio.run(scenario())


def test_a_follower_whose_write_failed_takes_its_dir_offline(setup, disk):
    """A follower's append that failed: its next fetch round finds the dir offline rather
    than retrying the broken log forever (Kafka reports every I/O error to the
    LogDirFailureChannel at once)."""
    rm, dirs, events = setup
    lead(rm, tp=TP, leader=2, replicas=(2, 1), isr=(2, 1))
    log = rm.follower_log(TP)
    assert log is not None and rm.log_manager.log_dir_of(TP) == dirs[0]
    disk.broken = dirs[0]
    with pytest.raises(Exception) as info:
        log.append_as_follower(build_batch([b"x"], timestamp_ms=1), 0)
    assert getattr(info.value, "code", None) == ErrorCode.kafka_storage_error
    assert rm.log_manager.offline_dirs == {}  # not yet: nothing looked
    assert rm.follower_log(TP) is None
    assert rm.log_manager.offline_dirs.keys() == {dirs[0]}
    assert events == ["notify d1"]


def test_a_broker_with_no_dir_left_halts(setup, disk):
    rm, dirs, events = setup
    rm.log_manager.mark_dir_failed(dirs[0], "gone")
    rm.log_manager.mark_dir_failed(dirs[1], "gone too")
    assert events == ["notify d1", "halt"]


def test_a_follower_fetch_of_a_log_whose_io_failed_is_a_storage_error(setup, disk):
    """The follower read path looks at the log dirs only when one is offline or the log's
    own I/O failed; the second alone (its dir not yet marked) still answers
    KAFKA_STORAGE_ERROR and takes the dir offline, as a consumer's read does."""
    from weir.replication.local_reads import FetchPartition

    rm, _dirs, events = setup

    async def scenario() -> None:
        lead(rm, replicas=(1, 2), isr=(1, 2), tp=TP)
        lead(rm, replicas=(1, 2), isr=(1, 2), tp=TP1)
        requests = [FetchPartition(TP, 0, 1 << 20), FetchPartition(TP1, 0, 1 << 20)]
        ok = await rm.reads.fetch(2, 0, 1, 1 << 20, requests)
        assert {tp: r.error for tp, r in ok.items()} == {TP: ErrorCode.none,
                                                         TP1: ErrorCode.none}
        failed_dir = rm.log_manager.log_dir_of(TP)
        rm.partitions[TP].log.offline_reason = "simulated I/O error"
        out = await rm.reads.fetch(2, 0, 1, 1 << 20, requests)
        assert out[TP].error == ErrorCode.kafka_storage_error
        assert rm.log_manager.offline_dirs.keys() == {failed_dir}
        assert events == [f"notify {failed_dir.name}"]
        # The other partition: a storage error too if it shares the failed dir, else read
        # as before.
        shares = rm.log_manager.log_dir_of(TP1) == rm.log_manager.log_dir_of(TP)
        assert out[TP1].error == (ErrorCode.kafka_storage_error if shares else ErrorCode.none)

    import asyncio
    asyncio.run(scenario())

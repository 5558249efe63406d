"""LogManager: placement, checkpoints, clean shutdown, startup recovery, offline dirs."""

from __future__ import annotations

import os

import pytest

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.storage.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager

TP0, TP1, TP2 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("a-b", 2)


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "d1", tmp_path / "d2"]


@pytest.fixture
def manager(dirs):
    managers = []

    def make():
        m = LogManager(dirs, LogConfig())
        managers.append(m)
        return m

    yield make
    for m in managers:
        for lg in m.all_logs().values():
            lg.close()


def produce(lg, n=2):
    return lg.append_as_leader(build_batch([b"x" * 20] * n, timestamp_ms=1), 0, 1)


def test_create_spreads_over_dirs_and_writes_metadata(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    logs = [m.get_or_create_log(tp, LogConfig(), topic_id="tid-1") for tp in (TP0, TP1, TP2)]
    assert [lg.dir.parent for lg in logs] == [dirs[0], dirs[1], dirs[0]]
    assert logs[2].dir.name == "a-b-2"
    assert m.deferred.drain(timeout_s=10)  # written on the storage thread
    assert (logs[0].dir / "partition.metadata").read_text() == "version: 0\ntopic_id: tid-1\n"
    assert m.get_or_create_log(TP0) is logs[0]
    assert m.get_log(TopicPartition("nope", 0)) is None
    assert set(m.all_logs()) == {TP0, TP1, TP2}


def test_shutdown_and_startup_round_trip(manager, dirs):
    m = manager()
    m.startup(now_ms=0)
    lg = m.get_or_create_log(TP0, LogConfig())
    for _ in range(3):
        produce(lg)
    lg.update_high_watermark(4)
    m.shutdown()
    d = lg.dir.parent
    assert (d / ".kafka_cleanshutdown").exists()
    assert read_offset_checkpoint(d / "recovery-point-offset-checkpoint") == {TP0: 6}
    assert read_offset_checkpoint(d / "log-start-offset-checkpoint") == {TP0: 0}
    assert read_offset_checkpoint(d / "replication-offset-checkpoint") == {TP0: 4}

    m2 = manager()
    m2.startup(now_ms=10)
    assert not (d / ".kafka_cleanshutdown").exists()
    lg2 = m2.get_log(TP0)
    assert (lg2.log_end_offset, lg2.high_watermark, lg2.recovery_point) == (6, 4, 6)
    assert read_offset_checkpoint(d / "replication-offset-checkpoint") == {TP0: 4}


def test_unclean_startup_recovers_torn_tail(manager):
    m = manager()
    m.startup(now_ms=0)
    lg = m.get_or_create_log(TP0, LogConfig())
    produce(lg)
    produce(lg)
    m.checkpoint_recovery_points()
    seg_path = lg.active_segment.log_path
    lg.close()  # crash: no clean-shutdown marker
    os.truncate(seg_path, seg_path.stat().st_size - 3)
    m2 = manager()
    m2.startup(now_ms=0)
    assert m2.get_log(TP0).log_end_offset == 2


def test_a_shutdown_without_startup_leaves_the_dirs_as_they_were(manager, dirs):
    """A broker whose start failed before its logs were loaded (a foreign meta.properties,
    ZooKeeper unreachable) stops its log manager: the dirs keep their checkpoints and get no
    clean-shutdown marker, so the next start still recovers the crashed logs."""
    m = manager()
    m.startup(now_ms=0)
    lg = m.get_or_create_log(TP0, LogConfig())
    produce(lg)
    produce(lg)
    lg.update_high_watermark(4)
    m.checkpoint_recovery_points()
    write_offset_checkpoint(lg.dir.parent / "replication-offset-checkpoint", {TP0: 4})
    seg_path = lg.active_segment.log_path
    lg.close()  # crash: no clean-shutdown marker
    d = lg.dir.parent
    before = {f: (d / f).read_bytes() for f in ("recovery-point-offset-checkpoint",
                                                "replication-offset-checkpoint")}
    os.truncate(seg_path, seg_path.stat().st_size - 3)  # a torn tail

    failed_start = manager()
    failed_start.shutdown()  # startup never ran
    assert not (d / ".kafka_cleanshutdown").exists()
    assert {f: (d / f).read_bytes() for f in before} == before

    m2 = manager()
    m2.startup(now_ms=0)
    assert m2.get_log(TP0).log_end_offset == 2  # recovered: the torn batch is cut off
    assert m2.get_log(TP0).high_watermark == 2  # the checkpoint's 4, capped at the log end


def test_config_update_delete_and_retention(manager):
    m = manager()
    m.startup(now_ms=0)
    lg = m.get_or_create_log(TP0, LogConfig.from_dict({"segment.bytes": 150}))
    other = m.get_or_create_log(TP1, LogConfig.from_dict({"segment.bytes": 150}))
    for _ in range(4):
        produce(lg, 1)
        produce(other, 1)
    lg.update_high_watermark(4)
    m.update_config("orders", LogConfig.from_dict({"segment.bytes": 150, "retention.ms": 10}))
    assert lg.config.retention_ms == 10
    assert m.run_retention(now_ms=1000) == 3  # orders-0: 3 closed segments below HW 4
    assert lg.log_start_offset == 3 and other.log_start_offset == 0
    path = lg.dir
    assert m.delete_log(TP0) and not path.exists() and m.get_log(TP0) is None
    assert not m.delete_log(TP0)


def test_flush_due(manager):
    m = manager()
    m.startup(now_ms=0)
    lg = m.get_or_create_log(TP0, LogConfig.from_dict({"flush.ms": 100}))
    produce(lg)
    m.flush_due(now_ms=50)
    assert lg.recovery_point == 0
    m.flush_due(now_ms=200)
    assert lg.recovery_point == 2


def test_broken_log_dir_is_offline_others_work(tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("not a directory")
    good = tmp_path / "good"
    m = LogManager([bad, good], LogConfig())
    m.startup(now_ms=0)
    assert bad in m.offline_dirs and m.online_dirs == [good]
    lg = m.get_or_create_log(TP0, LogConfig())
    assert lg.dir.parent == good
    produce(lg)
    m.shutdown()
    assert (good / ".kafka_cleanshutdown").exists()


def test_io_error_takes_dir_offline(manager, dirs, monkeypatch):
    m = manager()
    m.startup(now_ms=0)
    lg0 = m.get_or_create_log(TP0, LogConfig())
    lg1 = m.get_or_create_log(TP1, LogConfig())

    def broken(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(lg0.active_segment, "append", broken)
    with pytest.raises(KafkaError) as err:
        produce(lg0)
    assert err.value.code == ErrorCode.kafka_storage_error
    with pytest.raises(KafkaError) as err:
        m.get_log(TP0)
    assert err.value.code == ErrorCode.kafka_storage_error
    assert dirs[0] in m.offline_dirs
    assert produce(lg1).first_offset == 0
    assert set(m.all_logs()) == {TP1}
    m.shutdown()  # does not touch the offline dir
    assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    assert (dirs[1] / ".kafka_cleanshutdown").exists()


def test_dir_failure_listeners_hear_each_failed_dir_once(manager, dirs, monkeypatch):
    """Kafka's LogDirFailureChannel: the broker is told which dir failed (and halts when none
    is left, ReplicaManager.handleLogDirFailure)."""
    m = manager()
    m.startup(now_ms=0)
    heard: list[tuple] = []
    m.dir_failure_listeners.append(lambda d, reason: heard.append((d, reason)))
    lg0 = m.get_or_create_log(TP0, LogConfig())

    def broken(*args, **kwargs):
        raise OSError(27, "File too large")

    monkeypatch.setattr(lg0.active_segment, "append", broken)
    with pytest.raises(KafkaError):
        produce(lg0)
    for _ in range(2):
        with pytest.raises(KafkaError):
            m.get_log(TP0)
    assert [d for d, _ in heard] == [dirs[0]]
    assert "File too large" in heard[0][1]
    assert m.online_dirs == [dirs[1]]


def test_shutdown_checkpoints_each_dir_with_its_current_and_future_logs(manager, dirs):
    """The three checkpoints written at shutdown (one grouping of the logs for all three)
    hold, per dir, its current logs and the future logs moving into it."""
    m = manager()
    m.startup(now_ms=0)
    lg0, lg1 = m.get_or_create_log(TP0, LogConfig()), m.get_or_create_log(TP1, LogConfig())
    assert (lg0.dir.parent, lg1.dir.parent) == (dirs[0], dirs[1])
    produce(lg0, 3)
    lg0.update_high_watermark(2)
    produce(lg1)
    future = m.create_future_log(TP0, dirs[1], topic_id="tid")
    m.shutdown()
    expected = {
        dirs[0]: {"recovery-point-offset-checkpoint": {TP0: 3},
                  "log-start-offset-checkpoint": {TP0: 0},
                  "replication-offset-checkpoint": {TP0: 2}},
        dirs[1]: {"recovery-point-offset-checkpoint": {TP1: 2, TP0: future.recovery_point},
                  "log-start-offset-checkpoint": {TP1: 0, TP0: 0},
                  "replication-offset-checkpoint": {TP1: 0, TP0: future.high_watermark}},
    }
    for log_dir, files in expected.items():
        for name, offsets in files.items():
            assert read_offset_checkpoint(log_dir / name) == offsets, (log_dir, name)
        assert (log_dir / ".kafka_cleanshutdown").exists()

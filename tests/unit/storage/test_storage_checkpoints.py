"""Checkpoint files: Kafka's format, round trips, atomic replacement."""

from __future__ import annotations

import os
import threading

import pytest

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.storage import checkpoints as cp
from weir.storage.epoch_cache import LeaderEpochCache


def test_offset_checkpoint_round_trip_and_format(tmp_path):
    path = tmp_path / cp.RECOVERY_POINT_CHECKPOINT
    offsets = {TopicPartition("orders", 1): 977, TopicPartition("my-topic", 0): 1200}
    cp.write_offset_checkpoint(path, offsets)
    assert path.read_text() == "0\n2\nmy-topic 0 1200\norders 1 977\n"
    assert cp.read_offset_checkpoint(path) == offsets


def test_missing_checkpoint_is_empty(tmp_path):
    assert cp.read_offset_checkpoint(tmp_path / "nope") == {}
    assert cp.read_epoch_checkpoint(tmp_path / "nope") == []


@pytest.mark.parametrize(
    "text", ["", "0\n", "1\n0\n", "0\n2\nt 0 5\n", "0\n1\nt x 5\n", "0\n1\nt 0\n"]
)
def test_malformed_checkpoint_is_storage_error(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(KafkaError) as err:
        cp.read_offset_checkpoint(path)
    assert err.value.code == ErrorCode.kafka_storage_error


def test_epoch_checkpoint_round_trip(tmp_path):
    path = tmp_path / cp.LEADER_EPOCH_CHECKPOINT
    cp.write_epoch_checkpoint(path, [(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert cp.read_epoch_checkpoint(path) == [(0, 0), (3, 120)]


def test_atomic_write_uses_temp_file_and_rename(tmp_path, monkeypatch):
    path = tmp_path / cp.LOG_START_OFFSET_CHECKPOINT
    cp.write_offset_checkpoint(path, {TopicPartition("t", 0): 1})
    calls = []
    real_replace, real_fsync = os.replace, os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("fsync") or real_fsync(fd))

    def fake_replace(src, dst):
        calls.append("replace")
        assert str(src).endswith(".tmp") and dst == path
        assert cp.read_offset_checkpoint(path) == {TopicPartition("t", 0): 1}  # old intact
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", fake_replace)
    cp.write_offset_checkpoint(path, {TopicPartition("t", 0): 2})
    assert calls == ["fsync", "replace", "fsync"]  # file fsync, rename, directory fsync
    assert cp.read_offset_checkpoint(path) == {TopicPartition("t", 0): 2}
    assert not list(tmp_path.glob("*.tmp"))


def test_crash_before_rename_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / cp.REPLICATION_OFFSET_CHECKPOINT
    cp.write_offset_checkpoint(path, {TopicPartition("t", 0): 1})

    def crash(src, dst):
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        cp.write_offset_checkpoint(path, {TopicPartition("t", 0): 2})
    assert cp.read_offset_checkpoint(path) == {TopicPartition("t", 0): 1}


def test_partition_metadata(tmp_path):
    assert cp.read_partition_metadata(tmp_path) is None
    cp.write_partition_metadata(tmp_path, "AAAAAAAAAAAAAAAAAAAAAQ")
    assert (tmp_path / "partition.metadata").read_text() == (
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"
    )
    assert cp.read_partition_metadata(tmp_path) == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_epoch_cache_persists_on_change(tmp_path):
    path = tmp_path / cp.LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(path)
    cache.assign(0, 0)
    cache.assign(2, 10)
    assert LeaderEpochCache.load(path).entries == [(0, 0), (2, 10)]
    cache.truncate_from_end(10)
    assert cp.read_epoch_checkpoint(path) == [(0, 0)]


def test_two_threads_writing_one_offset_checkpoint_never_tear_it(tmp_path):
    """The scheduler's I/O thread and the event loop may write the same checkpoint: each
    write lands whole, and neither rename loses its temp file to the other."""
    path = tmp_path / "recovery-point-offset-checkpoint"
    contents = {name: {TopicPartition(name, p): p * 10 for p in range(50)} for name in "ab"}
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            for _ in range(150):
                cp.write_offset_checkpoint(path, contents[name])
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(name,)) for name in contents]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert cp.read_offset_checkpoint(path) in contents.values()

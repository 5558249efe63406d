"""Batched checkpoint writes (weir.storage.deferred_writes.write_batch): every file is
still replaced atomically, yet a batch costs a constant number of syncs."""

from __future__ import annotations

import ctypes
import errno
import os

import pytest

from weir.storage import checkpoints, deferred_writes
from weir.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    read_epoch_checkpoint,
    read_partition_metadata,
)
from weir.storage.deferred_writes import DeferredWriter, PartitionMetadataWrite, write_batch
from weir.storage.epoch_cache import LeaderEpochCache

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


class Crash(Exception):
    """The process dies here (not an OSError: nothing handles it)."""


def make_caches(root, n, *, durable_epoch=1):
    """``n`` partition dirs whose checkpoint holds [(durable_epoch, 0)] and whose cache
    has a deferred change on top: [(durable_epoch, 0), (durable_epoch + 1, i + 1)]."""
    caches = []
    for i in range(n):
        d = root / f"t-{i}"
        d.mkdir()
        cache = LeaderEpochCache(d / LEADER_EPOCH_CHECKPOINT)
        cache.assign(durable_epoch, 0)
        cache.assign(durable_epoch + 1, i + 1, defer=True)
        caches.append(cache)
    return caches


def old(i):
    return [(1, 0)]


def new(i):
    return [(1, 0), (2, i + 1)]


def count_syncs(monkeypatch):
    calls = {"fsync": 0, "sync": 0}
    real_fsync, real_sync = os.fsync, deferred_writes.sync_filesystems

    def fsync(fd):
        calls["fsync"] += 1
        real_fsync(fd)

    def sync(dirs):
        calls["sync"] += 1
        real_sync(dirs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(deferred_writes, "sync_filesystems", sync)
    return calls


def test_a_batch_writes_every_file(tmp_path):
    caches = make_caches(tmp_path, 30)
    meta = PartitionMetadataWrite(tmp_path / "t-3", TOPIC_ID)
    assert write_batch([*caches, meta]) == 0
    for i, cache in enumerate(caches):
        assert not cache.dirty
        assert read_epoch_checkpoint(tmp_path / f"t-{i}" / LEADER_EPOCH_CHECKPOINT) == new(i)
    assert read_partition_metadata(tmp_path / "t-3") == TOPIC_ID
    assert not list(tmp_path.glob("*/*.tmp"))
    assert write_batch(caches) == 0  # nothing dirty: nothing written, no error


@pytest.mark.parametrize("n", [2, 40, 400])
def test_a_batch_costs_a_constant_number_of_syncs(tmp_path, monkeypatch, n):
    caches = make_caches(tmp_path, n)
    calls = count_syncs(monkeypatch)
    assert write_batch(caches) == 0
    assert calls == {"fsync": 0, "sync": 2}
    assert all(not c.dirty for c in caches)


def test_drain_writes_its_jobs_as_one_batch(tmp_path, monkeypatch):
    caches = make_caches(tmp_path, 100)
    writer = DeferredWriter()
    writer._closed = True  # no thread: drain() writes on this thread
    writer.submit(caches)
    calls = count_syncs(monkeypatch)
    assert writer.drain(timeout_s=30)
    assert calls == {"fsync": 0, "sync": 2}
    assert writer.failures == 0 and all(not c.dirty for c in caches)


def test_the_worker_writes_batches(tmp_path):
    caches = make_caches(tmp_path, 200)
    writer = DeferredWriter()
    writer.submit(caches)
    assert writer.drain(timeout_s=30)
    writer.close()
    for i, cache in enumerate(caches):
        assert not cache.dirty
        assert read_epoch_checkpoint(tmp_path / f"t-{i}" / LEADER_EPOCH_CHECKPOINT) == new(i)


@pytest.mark.parametrize("renames_before_crash", [0, 1, 7, 19])
def test_a_crash_during_the_renames_leaves_old_or_new_files(tmp_path, monkeypatch,
                                                            renames_before_crash):
    caches = make_caches(tmp_path, 20)
    real_replace = os.replace
    done = []

    def replace(src, dst):
        if len(done) == renames_before_crash:
            raise Crash
        real_replace(src, dst)
        done.append(dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(Crash):
        write_batch(caches)
    monkeypatch.setattr(os, "replace", real_replace)
    contents = [read_epoch_checkpoint(tmp_path / f"t-{i}" / LEADER_EPOCH_CHECKPOINT)
                for i in range(20)]
    for i, entries in enumerate(contents):
        assert entries in (old(i), new(i))
    assert sum(entries == new(i) for i, entries in enumerate(contents)) == renames_before_crash
    # nothing was marked durable, and a later flush writes the file
    assert all(c.dirty for c in caches)
    caches[-1].flush()
    assert read_epoch_checkpoint(tmp_path / "t-19" / LEADER_EPOCH_CHECKPOINT) == new(19)


def test_a_crash_before_the_first_sync_leaves_every_old_file(tmp_path, monkeypatch):
    caches = make_caches(tmp_path, 10)

    def sync(dirs):
        raise Crash

    monkeypatch.setattr(deferred_writes, "sync_filesystems", sync)
    with pytest.raises(Crash):
        write_batch(caches)
    for i in range(10):
        assert read_epoch_checkpoint(tmp_path / f"t-{i}" / LEADER_EPOCH_CHECKPOINT) == old(i)
    assert all(c.dirty for c in caches)


def test_a_failed_job_does_not_lose_the_others(tmp_path, monkeypatch):
    caches = make_caches(tmp_path, 10)
    (tmp_path / "b-0").mkdir()
    (tmp_path / "b-0" / (LEADER_EPOCH_CHECKPOINT + ".tmp")).mkdir()  # its temp file fails
    broken = LeaderEpochCache(tmp_path / "b-0" / LEADER_EPOCH_CHECKPOINT)
    broken.assign(1, 0, defer=True)
    real_replace = os.replace
    refused = tmp_path / "t-4" / LEADER_EPOCH_CHECKPOINT

    def replace(src, dst):
        if os.fspath(dst) == os.fspath(refused):
            raise PermissionError(13, "refused", os.fspath(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    writer = DeferredWriter()
    writer._closed = True
    writer.submit([caches[0], broken, *caches[1:]])
    assert writer.drain(timeout_s=30)
    assert writer.failures == 2
    assert broken.dirty and caches[4].dirty
    assert read_epoch_checkpoint(refused) == old(4)
    assert not refused.with_name(refused.name + ".tmp").exists()
    for i, cache in enumerate(caches):
        if i != 4:
            assert not cache.dirty
            assert read_epoch_checkpoint(tmp_path / f"t-{i}" / LEADER_EPOCH_CHECKPOINT) == new(i)


def test_a_partition_dir_deleted_during_the_batch_is_not_a_failure(tmp_path, monkeypatch):
    caches = make_caches(tmp_path, 3)
    gone = tmp_path / "t-1"
    real_sync = deferred_writes.sync_filesystems

    def sync(dirs):  # the log is deleted between the temp files and the renames
        if gone.exists():
            for f in gone.iterdir():
                f.unlink()
            gone.rmdir()
        real_sync(dirs)

    monkeypatch.setattr(deferred_writes, "sync_filesystems", sync)
    assert write_batch(caches) == 0
    assert not gone.exists() and caches[1].dirty
    assert not caches[0].dirty and not caches[2].dirty


def test_a_change_made_during_a_batch_is_written_by_the_next_flush(tmp_path, monkeypatch):
    """A job's write reflects the state it prepared; a newer change keeps it dirty."""
    cache, other = make_caches(tmp_path, 2)
    real_sync = deferred_writes.sync_filesystems
    changed = []

    def sync(dirs):
        if not changed:
            changed.append(cache.assign(3, 50, defer=True))
        real_sync(dirs)

    monkeypatch.setattr(deferred_writes, "sync_filesystems", sync)
    assert write_batch([cache, other]) == 0
    assert changed == [True] and cache.dirty
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    assert read_epoch_checkpoint(path) == new(0)
    cache.flush()
    assert read_epoch_checkpoint(path) == [*new(0), (3, 50)] and not cache.dirty


def test_a_flush_between_prepare_and_rename_is_not_overwritten(tmp_path, monkeypatch):
    """An inline flush of newer entries while the batch syncs: the batch's older temp
    file is not renamed over it, and the cache is clean (the file holds its entries)."""
    cache, other = make_caches(tmp_path, 2)
    real_sync = deferred_writes.sync_filesystems
    flushed = []

    def sync(dirs):
        if not flushed:
            cache.assign(3, 50, defer=True)
            cache.flush()  # the event loop's own write (e.g. Log.flush)
            flushed.append(True)
        real_sync(dirs)

    monkeypatch.setattr(deferred_writes, "sync_filesystems", sync)
    assert write_batch([cache, other]) == 0
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    assert read_epoch_checkpoint(path) == [*new(0), (3, 50)]
    assert not cache.dirty and not other.dirty
    assert read_epoch_checkpoint(tmp_path / "t-1" / LEADER_EPOCH_CHECKPOINT) == new(1)


def test_a_batch_syncs_the_filesystems_of_its_files_not_the_machine(tmp_path, monkeypatch):
    """syncfs(2) once per filesystem holding the batch's files; sync() is never called."""
    caches = make_caches(tmp_path, 5)
    synced = []
    real_syncfs = checkpoints._SYNCFS
    if real_syncfs is None:
        pytest.skip("no syncfs in this C library")

    def syncfs(fd):
        synced.append(os.fstat(fd).st_dev)
        return real_syncfs(fd)

    def no_sync():
        raise AssertionError("sync() flushes every filesystem of the machine")

    monkeypatch.setattr(checkpoints, "_SYNCFS", syncfs)
    monkeypatch.setattr(os, "sync", no_sync)
    assert write_batch(caches) == 0
    assert synced == [os.stat(tmp_path).st_dev] * 2  # temp files, then the renames
    assert all(not c.dirty for c in caches)


def test_sync_filesystems_reports_a_failed_syncfs_and_skips_vanished_dirs(tmp_path,
                                                                          monkeypatch):
    def failing(fd):
        ctypes.set_errno(errno.EIO)
        return -1

    monkeypatch.setattr(checkpoints, "_SYNCFS", failing)
    checkpoints.sync_filesystems([tmp_path / "gone"])  # nothing there: nothing to sync
    with pytest.raises(OSError) as exc:
        checkpoints.sync_filesystems([tmp_path])
    assert exc.value.errno == errno.EIO and "syncfs" in str(exc.value)


def test_without_syncfs_sync_is_the_fallback(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(checkpoints, "_SYNCFS", None)
    monkeypatch.setattr(os, "sync", lambda: calls.append(1))
    checkpoints.sync_filesystems([tmp_path])
    assert calls == [1]


@pytest.mark.parametrize("failing_call", [1, 2])
def test_a_failed_sync_fails_the_batch_and_keeps_every_job_dirty(tmp_path, monkeypatch,
                                                                 failing_call):
    """syncfs reporting EIO (temp files or renames): nothing is marked durable, no temp file
    is left, the worker thread survives and a later batch writes the files."""
    caches = make_caches(tmp_path, 4)
    real_sync = deferred_writes.sync_filesystems
    calls = []

    def sync(dirs):
        calls.append(1)
        if len(calls) == failing_call:
            raise OSError(errno.EIO, "syncfs: Input/output error")
        real_sync(dirs)

    monkeypatch.setattr(deferred_writes, "sync_filesystems", sync)
    writer = DeferredWriter()
    writer.submit(caches)
    assert writer.drain(timeout_s=30)
    assert writer.failures == 4
    assert all(c.dirty for c in caches)
    assert not list(tmp_path.glob("*/*.tmp"))
    for i in range(4):
        assert read_epoch_checkpoint(tmp_path / f"t-{i}" / LEADER_EPOCH_CHECKPOINT) in (
            old(i), new(i))
    writer.submit(caches)  # the thread is alive: the next batch writes them
    assert writer.drain(timeout_s=30)
    writer.close()
    assert all(not c.dirty for c in caches)
    for i in range(4):
        assert read_epoch_checkpoint(tmp_path / f"t-{i}" / LEADER_EPOCH_CHECKPOINT) == new(i)


def test_a_large_batch_logs_its_steps(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(deferred_writes, "LOGGED_BATCH", 3)
    (tmp_path / "large").mkdir()
    (tmp_path / "small").mkdir()
    caches = make_caches(tmp_path / "large", 3)
    with caplog.at_level("INFO", logger=deferred_writes.__name__):
        assert write_batch(caches) == 0
    lines = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("deferred writes: 3 files in ") and "temp files" in m
               and "renames" in m for m in lines), lines
    for i in range(3):
        path = tmp_path / "large" / f"t-{i}" / LEADER_EPOCH_CHECKPOINT
        assert read_epoch_checkpoint(path) == new(i)
    caplog.clear()
    with caplog.at_level("INFO", logger=deferred_writes.__name__):
        assert write_batch(make_caches(tmp_path / "small", 2)) == 0
    assert not caplog.records  # a batch below the threshold says nothing

"""Deferred leader-epoch checkpoints and the storage thread (weir.storage.deferred_writes):
the file is written later, yet never missing an epoch that a crash could need."""

from __future__ import annotations

import threading

from weir.records.builder import build_batch
from weir.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    read_epoch_checkpoint,
    read_partition_metadata,
)
from weir.storage.deferred_writes import DeferredWriter, PartitionMetadataWrite
from weir.storage.epoch_cache import LeaderEpochCache


def produce(log, n=1, *, epoch=0):
    return log.append_as_leader(build_batch([b"v" * 40] * n, timestamp_ms=0), epoch, 0)


def test_deferred_assign_writes_nothing_until_flush(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(path)
    assert cache.assign(3, 10, defer=True)
    assert cache.dirty and not path.exists()
    cache.flush()
    assert not cache.dirty and read_epoch_checkpoint(path) == [(3, 10)]
    # an immediate assign still writes at once
    cache.assign(4, 12)
    assert read_epoch_checkpoint(path) == [(3, 10), (4, 12)] and not cache.dirty


def test_flush_skips_a_file_that_already_holds_the_entries(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(path)
    cache.assign(1, 0)
    assert path.exists()
    path.unlink()  # not rewritten: the cache knows the file holds its entries
    cache.flush()
    assert not path.exists()
    cache.assign(2, 5, defer=True)
    cache.flush()
    assert read_epoch_checkpoint(path) == [(1, 0), (2, 5)]


def test_flush_of_a_deleted_partition_dir_is_skipped_on_the_storage_thread(tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    cache = LeaderEpochCache(part / LEADER_EPOCH_CHECKPOINT)
    cache.assign(1, 0, defer=True)
    part.rmdir()
    cache.flush(if_dir_exists=True)  # no error, nothing recreated
    assert not part.exists() and cache.dirty


def test_writer_writes_every_job_once_and_drains(tmp_path):
    writer = DeferredWriter()
    caches = []
    for i in range(50):
        d = tmp_path / f"t-{i}"
        d.mkdir()
        cache = LeaderEpochCache(d / LEADER_EPOCH_CHECKPOINT)
        cache.assign(7, i, defer=True)
        caches.append(cache)
    meta_dir = tmp_path / "t-0"
    writer.submit([*caches, *caches, PartitionMetadataWrite(meta_dir, "AAAAAAAAAAAAAAAAAAAAAQ")])
    assert writer.drain(timeout_s=30)
    assert writer.pending == 0 and writer.failures == 0
    for i, cache in enumerate(caches):
        assert not cache.dirty
        assert read_epoch_checkpoint(tmp_path / f"t-{i}" / LEADER_EPOCH_CHECKPOINT) == [(7, i)]
    assert read_partition_metadata(meta_dir) == "AAAAAAAAAAAAAAAAAAAAAQ"
    writer.close()


def test_writer_runs_off_the_calling_thread(tmp_path):
    seen = []

    class Job:
        def flush(self, *, if_dir_exists=False):
            seen.append(threading.current_thread().name)

    writer = DeferredWriter(name="storage-test")
    writer.submit([Job()])
    deadline = threading.Event()
    for _ in range(200):
        if seen:
            break
        deadline.wait(0.01)
    assert seen == ["storage-test"]
    writer.close()


def test_a_failed_write_is_counted_and_left_dirty(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    cache = LeaderEpochCache(blocker / "sub" / LEADER_EPOCH_CHECKPOINT)
    cache.assign(1, 0, defer=True)
    writer = DeferredWriter()
    writer.submit([cache])
    assert writer.drain(timeout_s=30)
    writer.close()
    assert cache.dirty


def test_log_flush_writes_a_deferred_epoch_before_moving_the_recovery_point(open_log, log_dir):
    log = open_log()
    produce(log, 2, epoch=0)
    log.epoch_cache.assign(5, log.log_end_offset, defer=True)
    produce(log, 2, epoch=5)
    assert read_epoch_checkpoint(log_dir / LEADER_EPOCH_CHECKPOINT) == [(0, 0)]
    log.flush()
    assert log.recovery_point == 4
    assert read_epoch_checkpoint(log_dir / LEADER_EPOCH_CHECKPOINT) == [(0, 0), (5, 2)]


def test_crash_recovery_finds_an_epoch_the_checkpoint_lacks(open_log, log_dir):
    """The process dies after a deferred assign and appends at the new epoch, before the
    storage thread wrote the file: recovery reads the epoch back from the batches."""
    log = open_log()
    produce(log, 2, epoch=0)
    log.flush()  # recovery point 2, checkpoint [(0, 0)]
    log.epoch_cache.assign(5, 2, defer=True)
    produce(log, 3, epoch=5)
    assert read_epoch_checkpoint(log_dir / LEADER_EPOCH_CHECKPOINT) == [(0, 0)]
    for seg in log.segments:  # "crash": descriptors go away, nothing else is written
        seg.release()
    reopened = open_log(clean=False, recovery_point=2)
    assert reopened.epoch_cache.entries == [(0, 0), (5, 2)]
    assert read_epoch_checkpoint(log_dir / LEADER_EPOCH_CHECKPOINT) == [(0, 0), (5, 2)]
    assert reopened.epoch_cache.end_offset_for(0, reopened.log_end_offset) == (0, 2)


def test_clean_close_writes_a_deferred_epoch(open_log, log_dir):
    log = open_log()
    log.epoch_cache.assign(3, 0, defer=True)
    log.close()
    assert read_epoch_checkpoint(log_dir / LEADER_EPOCH_CHECKPOINT) == [(3, 0)]


def test_close_snapshots_only_past_the_last_snapshot(open_log, log_dir):
    """Kafka's takeSnapshot rule: an idle empty replica writes no producer snapshot at a
    clean shutdown, and a snapshot already at the log end is not written again."""
    log = open_log()
    log.close()
    assert not list(log_dir.glob("*.snapshot"))
    log = open_log()
    produce(log, 2)
    log.close()
    [snap] = log_dir.glob("*.snapshot")
    assert snap.name == f"{2:020d}.snapshot"
    inode = snap.stat().st_ino
    log = open_log()
    log.close()
    assert snap.stat().st_ino == inode  # not replaced


def test_load_truncations_are_written_by_the_storage_thread(tmp_path):
    """Kafka's LogLoader truncates the epoch cache with an async flush: an empty log's
    entry at its end is dropped in memory at once and in the file by the storage thread."""
    from weir.common import TopicPartition
    from weir.storage.config import LogConfig
    from weir.storage.log_manager import LogManager

    tp = TopicPartition("t", 0)
    lm = LogManager([tmp_path], LogConfig.from_dict({}))
    lm.startup(now_ms=0)
    lm.get_or_create_log(tp).epoch_cache.assign(0, 0)  # epoch 0 at offset 0, log empty
    lm.shutdown()
    path = tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT
    assert read_epoch_checkpoint(path) == [(0, 0)]
    lm = LogManager([tmp_path], LogConfig.from_dict({}))
    lm.startup(now_ms=0)
    assert lm.get_log(tp).epoch_cache.entries == []
    assert lm.deferred.drain(timeout_s=30)
    assert read_epoch_checkpoint(path) == []
    lm.shutdown()

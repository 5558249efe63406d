"""What a log load costs per partition (Kafka's LogLoader after a clean shutdown or a crash):
one listing of the partition directory, no index file read for an empty segment, no index
file written when an empty segment is recovered — and the results stay those of a full load.
No timing: the file operations are counted."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

from weir.common import TopicPartition
from weir.records.builder import build_batch
from weir.storage import log_loader
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager

SEGMENT = "00000000000000000000"


def _produce(log, ts=0, **kw):
    return log.append_as_leader(build_batch([b"v" * 40] * 2, timestamp_ms=ts, **kw), 0, 0)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_load_lists_the_partition_directory_once(open_log, log_dir, monkeypatch):
    log = open_log(segment_bytes=300)
    for i in range(6):  # several segments and a producer snapshot at each roll
        _produce(log, ts=i, producer_id=7, producer_epoch=0, base_sequence=2 * i)
    assert len(log.segments) > 2
    end = log.log_end_offset
    log.close()
    (log_dir / f"{SEGMENT}.log.tmp").write_bytes(b"x")  # a leftover is still removed
    (log_dir / "00000000000000099999.index").write_bytes(b"")  # an orphaned index too
    listed: list[str] = []
    real = os.listdir

    def counting(path="."):
        listed.append(str(path))
        return real(path)

    monkeypatch.setattr(log_loader.os, "listdir", counting)
    reopened = open_log(segment_bytes=300)
    assert listed == [str(log_dir)]
    assert reopened.log_end_offset == end
    assert 7 in reopened.producer_state.producers  # from the newest snapshot
    assert not (log_dir / f"{SEGMENT}.log.tmp").exists()
    assert not (log_dir / "00000000000000099999.index").exists()


def test_an_empty_segment_ignores_stale_index_files_and_rewrites_them(open_log, log_dir,
                                                                      caplog):
    open_log().close()
    # entries a crashed older segment left behind: never read while the .log is empty
    (log_dir / f"{SEGMENT}.index").write_bytes(struct.pack(">II", 7, 4096))
    (log_dir / f"{SEGMENT}.timeindex").write_bytes(struct.pack(">qI", 5, 7))
    log = open_log(index_interval_bytes=1)
    assert not _warnings(caplog)
    for ts in range(4):
        _produce(log, ts=ts)
    log.close()  # the first flush rewrites each index file whole
    index = list(struct.iter_unpack(">II", (log_dir / f"{SEGMENT}.index").read_bytes()))
    assert index and (7, 4096) not in index and all(pos < 4096 for _rel, pos in index)
    caplog.clear()
    again = open_log(index_interval_bytes=1)
    assert not _warnings(caplog)  # the rewritten indexes validate
    assert again.log_end_offset == 8
    assert again.offset_for_timestamp(2) == (4, 2)
    assert again.read(6, 1 << 20, max_offset=None).first_offset == 6


def test_recovering_empty_replicas_writes_no_index_file(tmp_path, caplog):
    lm = LogManager([tmp_path], LogConfig())
    lm.startup(0)
    tps = [TopicPartition("t", p) for p in range(20)]
    for tp in tps:
        lm.get_or_create_log(tp, LogConfig())
    busy = lm.get_log(tps[0])
    _produce(busy)
    lm.deferred.drain()
    # a SIGKILL: no clean-shutdown marker, nothing closed
    for lg in lm.all_logs().values():
        for seg in lg.segments:
            seg.release()
    idle_dir = tmp_path / "t-5"
    before = {p.name: p.stat().st_mtime_ns for p in idle_dir.iterdir()}
    os.utime(idle_dir / f"{SEGMENT}.index", ns=(1, 1))
    os.utime(idle_dir / f"{SEGMENT}.timeindex", ns=(1, 1))
    again = LogManager([tmp_path], LogConfig())
    again.startup(0)
    assert (idle_dir / f"{SEGMENT}.index").stat().st_mtime_ns == 1  # not rewritten
    assert (idle_dir / f"{SEGMENT}.timeindex").stat().st_mtime_ns == 1
    assert set(before) <= {p.name for p in idle_dir.iterdir()}
    assert again.get_log(tps[0]).log_end_offset == 2  # the written one was recovered
    assert all(again.get_log(tp).log_end_offset == 0 for tp in tps[1:])
    assert not [w for w in _warnings(caplog) if "index" in w]
    again.shutdown()
    third = LogManager([tmp_path], LogConfig())
    third.startup(0)
    assert third.get_log(tps[0]).read(0, 1 << 20, max_offset=None).size > 0
    third.shutdown()


def test_startup_skips_files_in_the_log_dir(tmp_path: Path):
    """Only directories named like partitions are logs (the checkpoints lie beside them)."""
    lm = LogManager([tmp_path], LogConfig())
    lm.startup(0)
    lm.get_or_create_log(TopicPartition("a", 0), LogConfig())
    lm.shutdown()
    (tmp_path / "b-1").write_text("a file, not a log")
    again = LogManager([tmp_path], LogConfig())
    again.startup(0)
    assert set(again.all_logs()) == {TopicPartition("a", 0)}
    again.shutdown()


def test_the_loads_epoch_truncation_is_not_written_at_close_if_nothing_changed(open_log,
                                                                                 log_dir):
    log = open_log()
    log.epoch_cache.assign(3, 0)  # a leader of epoch 3 that wrote nothing
    log.close()
    checkpoint = log_dir / "leader-epoch-checkpoint"
    os.utime(checkpoint, ns=(1, 1))
    log = open_log()
    assert log.epoch_cache.entries == []  # the load's truncation (Kafka's LogLoader)
    assert log.epoch_checkpoint_redone_by_load
    log.close()
    assert checkpoint.stat().st_mtime_ns == 1  # not rewritten: the next load redoes it
    again = open_log()
    assert again.epoch_cache.entries == []
    _produce(again)  # the log moved on: the truncation must now be durable
    assert not again.epoch_checkpoint_redone_by_load
    again.close()
    assert checkpoint.stat().st_mtime_ns != 1
    assert open_log().epoch_cache.entries == [(0, 0)]


def test_a_deferred_write_can_be_discarded_before_it_runs():
    from weir.storage.deferred_writes import DeferredWriter

    class Job:
        def __init__(self):
            self.writes = 0

        def flush(self, *, if_dir_exists=False):
            self.writes += 1

    writer = DeferredWriter()
    writer._closed = True  # no thread: everything stays queued until drain()
    kept, dropped = Job(), Job()
    writer.submit([kept, dropped])
    writer.discard([dropped])
    writer.drain()
    assert (kept.writes, dropped.writes) == (1, 0)

"""Crash recovery: torn and corrupt tails, index rebuild, clean shutdown, reopen state."""

from __future__ import annotations

import os

from weir.records.builder import build_batch

SEGMENT = "00000000000000000000"


def produce(log, n=1, *, epoch=0, size=40, ts=0, **kw):
    return log.append_as_leader(build_batch([b"v" * size] * n, timestamp_ms=ts, **kw), epoch, 0)


def fill(log, batches=10, **kw):
    ends = []
    for i in range(batches):
        produce(log, 2, ts=i, **kw)
        ends.append(log.active_segment.size)
    return ends


def test_torn_tail_is_truncated_and_indexes_rebuilt(open_log, log_dir):
    log = open_log(index_interval_bytes=100)
    ends = fill(log)
    entries = log.active_segment.index.entries()
    log.close()
    os.truncate(log_dir / f"{SEGMENT}.log", ends[-1] - 7)  # cut the last batch mid-way
    log = open_log(clean=False, index_interval_bytes=100)
    assert log.log_end_offset == 18
    assert (log_dir / f"{SEGMENT}.log").stat().st_size == ends[-2]
    rebuilt = log.active_segment.index.entries()
    assert rebuilt == [e for e in entries if e[0] < 18]
    assert (log_dir / f"{SEGMENT}.index").stat().st_size == 8 * len(rebuilt)
    assert produce(log).first_offset == 18
    assert log.read(17, 10**6, max_offset=None).last_offset == 18


def test_corrupt_tail_is_truncated(open_log, log_dir):
    log = open_log()
    ends = fill(log, epoch=1)
    produce(log, 1, epoch=2)  # offset 20, a new epoch
    log.close()
    path = log_dir / f"{SEGMENT}.log"
    data = bytearray(path.read_bytes())
    data[ends[8] + 70] ^= 0xFF  # inside batch 9 (offsets 18-19): CRC mismatch
    path.write_bytes(bytes(data))
    log = open_log(clean=False)
    assert log.log_end_offset == 18
    assert path.stat().st_size == ends[8]
    assert log.epoch_cache.entries == [(1, 0)]  # epoch 2 started beyond the new LEO
    assert log.recovery_point == 18


def test_clean_shutdown_skips_recovery(open_log, log_dir):
    log = open_log()
    ends = fill(log)
    log.close()
    path = log_dir / f"{SEGMENT}.log"
    data = bytearray(path.read_bytes())
    data[ends[8] + 70] ^= 0xFF  # body byte, header intact: only a CRC check notices
    path.write_bytes(bytes(data))
    log = open_log(clean=True)
    assert log.log_end_offset == 20
    log.close()
    log = open_log(clean=False)
    assert log.log_end_offset == 18


def test_segments_below_recovery_point_are_trusted(open_log, log_dir):
    log = open_log(segment_bytes=400)
    fill(log, batches=12)
    assert len(log.segments) >= 3
    second = log.segments[1].base_offset
    log.close()
    first = log_dir / f"{SEGMENT}.log"
    data = bytearray(first.read_bytes())
    data[-5] ^= 0xFF
    first.write_bytes(bytes(data))
    log = open_log(clean=False, recovery_point=second, segment_bytes=400)
    assert log.log_end_offset == 24  # corruption below the recovery point is not checked
    log.close()
    log = open_log(clean=False, recovery_point=0, segment_bytes=400)
    # the first segment lost its last batch; later segments became unreachable
    assert len(log.segments) == 1 and log.log_end_offset == second - 2
    assert sorted(p.name for p in log_dir.glob("*.log")) == [f"{SEGMENT}.log"]


def test_missing_or_corrupt_index_is_rebuilt(open_log, log_dir):
    log = open_log(index_interval_bytes=100)
    fill(log)
    entries = log.active_segment.index.entries()
    time_entries = log.active_segment.time_index.entries()
    log.close()
    (log_dir / f"{SEGMENT}.index").unlink()
    (log_dir / f"{SEGMENT}.timeindex").write_bytes(b"\x01\x02\x03")
    log = open_log(clean=True, index_interval_bytes=100)
    assert log.active_segment.index.entries() == entries
    assert log.active_segment.time_index.entries()[: len(time_entries) - 1] == time_entries[:-1]
    assert log.log_end_offset == 20
    assert log.offset_for_timestamp(5) == (10, 5)


def test_reopen_after_roll_continues(open_log, log_dir):
    log = open_log(segment_bytes=300)
    fill(log, batches=6)
    bases = [s.base_offset for s in log.segments]
    log.close()
    log = open_log(segment_bytes=300)
    assert [s.base_offset for s in log.segments] == bases
    assert log.log_end_offset == 12 and log.segments[-1].max_timestamp == 5
    assert produce(log).first_offset == 12


def test_producer_state_rebuilt_on_reopen(open_log):
    log = open_log()
    for seq in range(3):
        produce(log, 2, producer_id=5, producer_epoch=1, base_sequence=seq * 2)
    log.close()
    log = open_log(clean=False)
    dup = produce(log, 2, producer_id=5, producer_epoch=1, base_sequence=4)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (4, 5)
    assert produce(log, 1, producer_id=5, producer_epoch=1, base_sequence=6).first_offset == 6


def test_leftover_temp_files_removed(open_log, log_dir):
    log = open_log()
    produce(log)
    log.close()
    (log_dir / "leader-epoch-checkpoint.tmp").write_text("junk")
    (log_dir / "00000000000000000099.index").write_bytes(b"")
    open_log()
    assert not (log_dir / "leader-epoch-checkpoint.tmp").exists()
    assert not (log_dir / "00000000000000000099.index").exists()

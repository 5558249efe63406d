"""Sparse offset/time indexes and the segment that maintains them."""

from __future__ import annotations

import pytest

from weir.records.batch import validate_produce
from weir.records.builder import build_batch
from weir.storage.index import IndexCorruptError, OffsetIndex, TimeIndex
from weir.storage.segment import LogSegment


def test_offset_index_lookup_truncate_and_reload(tmp_path):
    idx = OffsetIndex(tmp_path / "x.index", 100, 1024)
    idx.reset()
    assert idx.lookup(150) is None
    for off, pos in [(110, 4000), (120, 8000), (130, 12000)]:
        idx.append(off, pos)
    assert idx.lookup(109) is None
    assert idx.lookup(110) == (110, 4000)
    assert idx.lookup(125) == (120, 8000)
    assert idx.lookup(10**9) == (130, 12000)
    with pytest.raises(ValueError):
        idx.append(125, 1)
    idx.truncate_to(120)
    assert idx.entries() == [(110, 4000)]
    idx.close()
    assert (tmp_path / "x.index").read_bytes() == (10).to_bytes(4, "big") + (4000).to_bytes(
        4, "big"
    )
    again = OffsetIndex(tmp_path / "x.index", 100, 1024)
    again.load()
    assert again.entries() == [(110, 4000)]


def test_index_full_and_corrupt(tmp_path):
    idx = OffsetIndex(tmp_path / "y.index", 0, 16)
    idx.reset()
    idx.append(1, 10)
    assert not idx.is_full
    idx.append(2, 20)
    assert idx.is_full
    idx.close()
    (tmp_path / "y.index").write_bytes(b"\x00" * 5)
    with pytest.raises(IndexCorruptError):
        OffsetIndex(tmp_path / "y.index", 0, 16).load()
    with pytest.raises(IndexCorruptError):
        OffsetIndex(tmp_path / "missing.index", 0, 16).load()


def test_time_index_only_grows(tmp_path):
    ti = TimeIndex(tmp_path / "x.timeindex", 0, 1200)
    ti.reset()
    ti.maybe_append(100, 0)
    ti.maybe_append(90, 5)  # not newer: skipped
    ti.maybe_append(200, 7)
    assert ti.entries() == [(100, 0), (200, 7)]
    assert ti.lookup(150) == (100, 0)
    assert ti.lookup(99) is None
    ti.truncate_to(7)
    assert ti.entries() == [(100, 0)]
    assert ti.max_timestamp() == 100


def _segment(tmp_path, interval=0):
    return LogSegment.create(
        tmp_path, 0, index_interval_bytes=interval, max_index_bytes=1 << 20, now_ms=0
    )


def _append(seg, offset, values, ts):
    buf = bytearray(build_batch(values, base_offset=offset, timestamp_ms=ts))
    seg.append(buf, validate_produce(bytes(buf), 1 << 20))
    return len(buf)


def test_segment_index_lookups_and_timestamps(tmp_path):
    seg = _segment(tmp_path)
    positions, offset = [], 0
    for i in range(10):
        positions.append(seg.size)
        _append(seg, offset, [b"x"] * 3, ts=1000 + 10 * i)
        offset += 3
    assert seg.next_offset == 30 and seg.max_timestamp == 1090
    assert len(seg.index) == 9  # every batch but the first (interval 0)
    assert seg.index.lookup(16) == (15, positions[5])
    h = seg.find_batch(16)
    assert (h.base_offset, h.position) == (15, positions[5])
    assert seg.find_batch(30) is None
    assert seg.find_by_timestamp(1045).base_offset == 15
    assert seg.find_by_timestamp(1050).base_offset == 15
    assert seg.find_by_timestamp(0).base_offset == 0
    assert seg.find_by_timestamp(5000) is None
    span = seg.span_from(seg.find_batch(3), max_offset=12, max_bytes=10**6, min_one_batch=True)
    assert (span.first_offset, span.last_offset) == (3, 11)
    seg.close()


def test_segment_reopen_uses_indexes_and_tail_scan(tmp_path):
    seg = _segment(tmp_path, interval=200)
    for i in range(20):
        _append(seg, i, [b"y" * 50], ts=i)
    entries = seg.index.entries()
    seg.close()
    again, truncated = LogSegment.open(
        tmp_path, 0, index_interval_bytes=200, max_index_bytes=1 << 20, now_ms=0, recover=False
    )
    assert truncated == 0 and again.next_offset == 20 and again.max_timestamp == 19
    assert again.index.entries() == entries
    again.close()


def test_segment_truncate_to(tmp_path):
    seg = _segment(tmp_path)
    sizes = [_append(seg, i * 2, [b"a", b"b"], ts=i) for i in range(5)]
    removed = seg.truncate_to(5)  # inside batch [4, 5]: the whole batch goes
    assert removed == sum(sizes[2:])
    assert seg.next_offset == 4 and seg.size == sum(sizes[:2])
    assert seg.index.lookup(100)[0] < 4
    assert seg.max_timestamp == 1
    _append(seg, 4, [b"c"], ts=50)
    assert seg.next_offset == 5
    seg.close()


def test_segment_roll_conditions(tmp_path):
    seg = _segment(tmp_path)
    args = {"last_offset": 0, "segment_bytes": 1000, "segment_ms": 100}
    assert not seg.should_roll(incoming_bytes=5000, now_ms=10**6, **args)  # empty never rolls
    size = _append(seg, 0, [b"x"], ts=0)
    assert not seg.should_roll(incoming_bytes=1000 - size, now_ms=100, **args)
    assert seg.should_roll(incoming_bytes=1001 - size, now_ms=100, **args)
    assert seg.should_roll(incoming_bytes=1, now_ms=101, **args)
    assert not seg.should_roll(incoming_bytes=1, now_ms=None, **args)
    assert seg.should_roll(
        incoming_bytes=1, now_ms=0, last_offset=2**31, segment_bytes=10**6, segment_ms=100
    )
    seg.close()


def test_index_entries_are_written_at_flush_and_hold_no_descriptor(tmp_path):
    """Entries stay in memory until the segment is flushed; no file is held open meanwhile."""
    path = tmp_path / "z.index"
    idx = OffsetIndex(path, 0, 1024)
    idx.reset()
    idx.append(10, 100)
    idx.append(20, 200)
    assert path.read_bytes() == b"" and idx.lookup(25) == (20, 200)
    assert not _open_descriptors(tmp_path)
    idx.flush()
    assert len(path.read_bytes()) == 16
    idx.append(30, 300)
    idx.truncate_to(20)  # below what is on disk: the file is cut too
    assert idx.entries() == [(10, 100)] and len(path.read_bytes()) == 8
    idx.append(40, 400)
    idx.release()  # forgets what was never written
    assert idx.entries() == [(10, 100)]
    idx.append(50, 500)
    idx.close()
    again = OffsetIndex(path, 0, 1024)
    again.load()
    assert again.entries() == [(10, 100), (50, 500)]


def test_log_holds_one_descriptor_per_segment(open_log, log_dir):
    """Kafka since 1.1 (KAFKA-6175): the indexes keep no descriptor open, only the logs."""
    log = open_log(segment_bytes=2_000, index_interval_bytes=100)
    for i in range(60):
        log.append_as_leader(build_batch([b"v%d" % i + b"x" * 100], timestamp_ms=i), 0, i)
    segments = len(list(log_dir.glob("*.log")))
    assert segments > 3
    assert _open_descriptors(log_dir) == {p.name for p in log_dir.glob("*.log")}


def _open_descriptors(directory) -> set[str]:
    """Names of the files under ``directory`` that this process holds open."""
    import os

    names = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory) + "/"):
            names.add(os.path.basename(target))
    return names

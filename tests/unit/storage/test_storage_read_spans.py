"""Reads find their bounds through the offset index; they must return exactly the batches a
plain header-by-header walk would."""

from __future__ import annotations

import random

from weir.records.batch import iter_headers
from weir.records.builder import build_batch
from weir.storage import file_io
from weir.storage.file_io import OsFileIo
from weir.storage.segment import RECENT_BATCHES


def reference(log, offset: int, max_bytes: int, max_offset: int | None) -> list[tuple[int, int]]:
    """(base offset, last offset) of the batches a naive walk returns."""
    data = b"".join(p.read_bytes() for p in sorted(log.dir.glob("*.log")))
    headers = [h for h in iter_headers(data) if h.last_offset >= offset]
    seg_bases = [s.base_offset for s in log.segments]
    out, size = [], 0
    first_segment = max(b for b in seg_bases if b <= headers[0].base_offset)
    for h in headers:
        if max(b for b in seg_bases if b <= h.base_offset) != first_segment:
            break  # a read stays within one segment
        if max_offset is not None and h.last_offset >= max_offset:
            break
        if size + h.size > max_bytes and size:
            break
        size += h.size
        out.append((h.base_offset, h.last_offset))
    return out


def test_reads_match_a_plain_walk(open_log):
    log = open_log(index_interval_bytes=300, segment_bytes=20000)
    rng = random.Random(7)
    for i in range(300):
        count = rng.randint(1, 6)
        log.append_as_leader(build_batch([b"v" * rng.randint(1, 90)] * count), 0, now_ms=i)
    leo = log.log_end_offset
    for _ in range(400):
        offset = rng.randrange(0, leo)
        max_bytes = rng.choice([1, 50, 300, 1000, 5000, 1 << 20])
        max_offset = rng.choice([None, rng.randrange(offset, leo + 1)])
        result = log.read(offset, max_bytes, max_offset=max_offset)
        expected = reference(log, offset, max_bytes, max_offset)
        if not expected:
            assert result.size == 0
            continue
        got = [(h.base_offset, h.last_offset) for h in iter_headers(result.read_bytes())]
        assert got == expected, (offset, max_bytes, max_offset)
        assert result.last_offset == expected[-1][1]


def test_offset_for_timestamp_finds_the_record_inside_a_batch(open_log):
    log = open_log()
    log.append_as_leader(build_batch([b"r"] * 200, timestamps=list(range(1000, 1200))), 0, 0)
    log.append_as_leader(build_batch([b"s"] * 10, timestamps=[5000] * 10), 0, 0)
    assert log.offset_for_timestamp(1100) == (100, 1100)
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1200) == (200, 5000)
    assert log.offset_for_timestamp(6000) is None


class _CountingIo(OsFileIo):
    def __init__(self) -> None:
        self.preads = 0

    def pread(self, path, fd: int, size: int, position: int) -> bytes:
        self.preads += 1
        return super().pread(path, fd, size, position)


def test_the_latest_batches_are_found_without_reading_the_file(open_log):
    """A follower fetching at the previous log end, and a consumer reading up to the high
    watermark at the tail, find their batches among the segment's latest headers, with no
    read of the file; older batches are read from it; after a truncation (which forgets the
    latest headers) and new appends, reads still match a plain walk."""
    log = open_log(index_interval_bytes=300, segment_bytes=1 << 20)
    rng = random.Random(11)
    for i in range(100):
        log.append_as_leader(build_batch([b"v" * rng.randint(1, 90)] * rng.randint(1, 4)), 0,
                             now_ms=i)
    counting = _CountingIo()
    previous = file_io.install(counting)
    try:
        leo = log.log_end_offset
        tail = [h.base_offset for h in iter_headers(log.active_segment.log_path.read_bytes())]
        for offset in tail[-RECENT_BATCHES:]:
            for max_offset in (None, leo, max(offset, leo - 1)):
                result = log.read(offset, 1 << 20, max_offset=max_offset)
                got = [(h.base_offset, h.last_offset) for h in
                       iter_headers(result.read_bytes())] if result.size else []
                assert got == reference(log, offset, 1 << 20, max_offset)
            assert log.read(offset, 120, max_offset=None).size > 0  # bounded by bytes
        assert counting.preads == 0  # (ReadResult.read_bytes reads past the seam)
        log.read(tail[-RECENT_BATCHES - 1], 1 << 20, max_offset=None)
        assert counting.preads > 0  # older batches: found in the file
    finally:
        file_io.install(previous)
    cut = tail[-5]
    log.truncate_to(cut)
    for i in range(5):
        log.append_as_leader(build_batch([b"w" * (i + 1)] * 2), 0, now_ms=200 + i)
    for offset in range(tail[-40], log.log_end_offset):
        result = log.read(offset, 1 << 20, max_offset=None)
        got = [(h.base_offset, h.last_offset) for h in iter_headers(result.read_bytes())]
        assert got == reference(log, offset, 1 << 20, None), offset

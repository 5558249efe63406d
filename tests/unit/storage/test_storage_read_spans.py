"""Reads find their bounds through the offset index; they must return exactly the batches a
plain header-by-header walk would."""

from __future__ import annotations

import random

from weir.records.batch import iter_headers
from weir.records.builder import build_batch


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

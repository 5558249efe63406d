"""Helpers shared by the compaction tests: write keyed batches, view a log, the latest
value of each key."""

from __future__ import annotations

from weir.records.batch import iter_headers
from weir.records.builder import build_batch
from weir.records.records import iter_records
from weir.storage.log import Log


def write_keyed(log: Log, pairs, now=0, **kw) -> None:
    """Append one batch per (key, value), roll, and move the HW to the end."""
    for key, value in pairs:
        log.append_as_leader(build_batch([value], keys=[key], timestamp_ms=now, **kw), 0, now)
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def view(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of ``log`` as (offset, key, value)."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 20, max_offset=None)
        if read.size == 0:
            break
        data = read.read_bytes()
        out += [(r.offset, r.key, r.value) for r in iter_records(data)]
        offset = list(iter_headers(data))[-1].next_offset
    return out


def latest(pairs):
    """(index, key, value) of the last write of each key, in write order."""
    last = {}
    for i, (k, v) in enumerate(pairs):
        last[k] = (i, v)
    return sorted((i, k, v) for k, (i, v) in last.items())

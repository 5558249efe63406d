"""ListOffsets by timestamp over a log's segments (Kafka's ``UnifiedLog.fetchOffsetByTimestamp``
and its ``MAX_TIMESTAMP`` lookup): the time index finds the batch, its records are decoded
to find the record.  Reads only; the log's lock is its caller's."""

from __future__ import annotations

from collections.abc import Sequence

from weir.records.records import iter_records
from weir.storage.segment import LogSegment

__all__ = ["max_timestamp_and_offset", "offset_for_timestamp"]

LOG_APPEND_TIME = 1
"""A batch's timestamp type: LogAppendTime stamps every record with the batch's time."""


def offset_for_timestamp(segments: Sequence[LogSegment], log_start: int, timestamp: int
                         ) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or past ``log_start`` with a timestamp ≥
    ``timestamp``, or None."""
    for seg in segments:
        if seg.max_timestamp < timestamp:
            continue
        header = seg.find_by_timestamp(timestamp)
        if header is None or header.last_offset < log_start:
            continue
        if header.timestamp_type == LOG_APPEND_TIME:  # one time for the whole batch
            return max(header.base_offset, log_start), header.max_timestamp
        batch = seg.read_bytes(header.position, header.size)
        for record in iter_records(batch):
            if record.offset >= log_start and record.timestamp >= timestamp:
                return record.offset, record.timestamp
    return None


def max_timestamp_and_offset(segments: Sequence[LogSegment], log_start: int
                             ) -> tuple[int, int] | None:
    """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3): in its
    batch, the first record with it (Kafka 3.8+'s ``RecordBatch.offsetOfMaxTimestamp``)."""
    best = max((s for s in segments if s.max_timestamp >= 0), default=None,
               key=lambda s: s.max_timestamp)  # the first of equals, as Kafka's maxBy
    if best is None:
        return None
    stamp = best.max_timestamp
    header = best.find_by_timestamp(stamp)
    if header is not None and header.timestamp_type != LOG_APPEND_TIME:
        for record in iter_records(best.read_bytes(header.position, header.size)):
            if record.timestamp == stamp:
                return max(record.offset, log_start), stamp
    return max(best.offset_of_max_timestamp, log_start), stamp

"""Which old segments retention deletes (Kafka's ``UnifiedLog.deleteOldSegments`` with its
three predicates: ``retention.ms`` breached, ``retention.bytes`` breached, below the log
start offset).  Pure: the log deletes what this counts."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from weir.storage.config import LogConfig
from weir.storage.segment import LogSegment

__all__ = ["segments_past_retention"]


def segments_past_retention(segments: Sequence[LogSegment], config: LogConfig, now_ms: int, *,
                            high_watermark: int, log_start: int) -> int:
    """How many segments from the oldest on retention deletes: never the active segment,
    never a segment reaching past the high watermark, and the first segment kept ends the
    run (Kafka deletes a prefix)."""
    excess = (sum(seg.size for seg in segments) - config.retention_bytes
              if config.retention_bytes >= 0 and config.delete else -1)
    count = 0
    for seg, nxt in itertools.pairwise(segments):
        if nxt.base_offset > high_watermark:
            break
        stamp = seg.max_timestamp if seg.max_timestamp >= 0 else seg.created_ms
        by_time = (config.delete and config.retention_ms >= 0
                   and now_ms - stamp > config.retention_ms)
        by_size = excess >= 0 and seg.size <= excess
        by_start = nxt.base_offset <= log_start
        if not (by_time or by_size or by_start):
            break
        excess -= seg.size
        count += 1
    return count

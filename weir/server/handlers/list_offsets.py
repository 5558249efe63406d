"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3) or first offset at a time.

v8 adds earliest-local (-4, KIP-405) and v9 latest-tiered (-5, KIP-1005). Without tiered
storage the local log is the whole log, so -4 is the log start offset and -5 is "none"
(offset -1), as Kafka's ``UnifiedLog.fetchOffsetByTimestamp`` when remote storage is off.

v0 (``MaxNumOffsets`` in, ``OldStyleOffsets`` out) answers with segment boundaries, as
Kafka's ``UnifiedLog.legacyFetchOffsetsBefore``: the base offset of every segment and the log
end offset, each with a time (the segment file's modification time, now for the log end);
-1 starts from the newest, -2 from the oldest, a time from the newest not after it, and up
to ``max_num_offsets`` of them go back in descending order. A consumer never sees offsets
above the high watermark (the high watermark stands in for them).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.list_offsets.v9.request import ListOffsetsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 2
MIN_VERSION = 0
MAX_VERSION = 9
EARLIEST_TIMESTAMP = -2
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


async def handle(ctx: RequestContext, request: ListOffsetsRequest) -> Response:
    rm = ctx.replica_manager
    topics = []
    for topic in request.topics:
        parts = []
        # Kafka's handleListOffsetRequest: DESCRIBE on the topic.
        allowed = authz.authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for part in topic.partitions:
            tp = TopicPartition(topic.name, int(part.partition_index))
            entry: dict[str, Any] = {"partition_index": tp.partition, "timestamp": -1,
                                     "offset": -1, "leader_epoch": -1}
            if not allowed:
                entry["error_code"] = ErrorCode.topic_authorization_failed
                parts.append(entry)
                continue
            if ctx.version == 0:
                entry.update(await _legacy_entry(ctx, tp, part, int(request.replica_id)))
                parts.append(entry)
                continue
            timestamp = int(part.timestamp)
            try:
                offset, ts, epoch = rm.list_offset(
                    tp, EARLIEST_TIMESTAMP if timestamp in (
                        EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP) else timestamp,
                    int(getattr(part, "current_leader_epoch", -1)), int(request.replica_id),
                    int(getattr(request, "isolation_level", 0)),
                )
                if timestamp == LATEST_TIERED_TIMESTAMP:
                    offset, ts, epoch = -1, -1, -1  # nothing is tiered
                entry.update(error_code=ErrorCode.none, offset=offset, timestamp=ts,
                             leader_epoch=epoch)
            except KafkaError as exc:
                entry["error_code"] = ctx.partition_error(tp, exc.code)
            parts.append(entry)
        topics.append({"name": topic.name, "partitions": parts})
    return ctx.respond(topics=topics)


async def _legacy_entry(ctx, tp: TopicPartition, part, replica_id: int) -> dict[str, Any]:
    timestamp = int(part.timestamp)
    if timestamp < EARLIEST_TIMESTAMP:
        # Kafka: v0 knows only the latest (-1) and earliest (-2) special timestamps.
        return {"error_code": ErrorCode.unsupported_version}
    try:
        _p, plog = ctx.replica_manager.leader_log(tp)
    except KafkaError as exc:
        return {"error_code": ctx.partition_error(tp, exc.code)}
    start, end, high_watermark = plog.log_start_offset, plog.log_end_offset, plog.high_watermark
    segments = [(max(s.base_offset, start), s.log_path) for s in plog.segments]
    last_has_data = plog.segments[-1].size > 0
    if timestamp >= 0:
        times = await asyncio.to_thread(_mtimes, [path for _, path in segments])
    else:
        times = [0] * len(segments)  # not looked at for -1 and -2
    entries = [(offset, t) for (offset, _), t in zip(segments, times, strict=True)]
    if last_has_data:
        entries.append((end, int(time.time() * 1000)))
    offsets = legacy_offsets(entries, timestamp, int(part.max_num_offsets))
    if replica_id == -1 and any(o > high_watermark for o in offsets):
        offsets = [high_watermark] + [o for o in offsets if o <= high_watermark]
    return {"error_code": ErrorCode.none, "old_style_offsets": offsets}


def _mtimes(paths) -> list[int]:
    out = []
    for path in paths:
        try:
            out.append(int(os.stat(path).st_mtime * 1000))
        except OSError:
            out.append(0)  # deleted by retention meanwhile
    return out


def legacy_offsets(entries: list[tuple[int, int]], timestamp: int, max_num: int) -> list[int]:
    """Kafka's ``legacyFetchOffsetsBefore`` over (offset, time) entries, oldest first."""
    if timestamp == -1:
        start = len(entries) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        start = 0
    else:
        start = len(entries) - 1
        while start >= 0 and entries[start][1] > timestamp:
            start -= 1
    count = max(0, min(max_num, start + 1))
    return sorted((entries[start - j][0] for j in range(count)), reverse=True)

"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3) or first offset at a time."""

from __future__ import annotations

from typing import Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 7


async def handle(ctx, request) -> Any:
    rm = ctx.broker.replica_manager
    topics = []
    for topic in request.topics:
        parts = []
        for part in topic.partitions:
            tp = TopicPartition(topic.name, int(part.partition_index))
            entry: dict[str, Any] = {"partition_index": tp.partition, "timestamp": -1,
                                     "offset": -1, "leader_epoch": -1}
            try:
                offset, ts, epoch = rm.list_offset(
                    tp, int(part.timestamp), int(getattr(part, "current_leader_epoch", -1)),
                    int(request.replica_id),
                )
                entry.update(error_code=ErrorCode.none, offset=offset, timestamp=ts,
                             leader_epoch=epoch)
            except KafkaError as exc:
                entry["error_code"] = ctx.partition_error(tp, exc.code)
            parts.append(entry)
        topics.append({"name": topic.name, "partitions": parts})
    return ctx.respond(topics=topics)

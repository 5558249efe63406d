"""OffsetDelete (47): delete a group's offsets for partitions it does not subscribe to."""

from __future__ import annotations

from typing import Any

from weir.common import TopicPartition

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx, request) -> Any:
    tps = [TopicPartition(t.name, int(p.partition_index))
           for t in request.topics for p in t.partitions]
    error, results = await ctx.broker.group_coordinator.delete_offsets(request.group_id, tps)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, code in results.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition,
                                                  "error_code": code})
    return ctx.respond(error_code=error, topics=[{"name": n, "partitions": parts}
                                                 for n, parts in by_topic.items()])

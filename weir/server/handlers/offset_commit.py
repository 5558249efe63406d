"""OffsetCommit (8): write committed offsets to ``__consumer_offsets`` (acks=all)."""

from __future__ import annotations

import time
from typing import Any

from weir.common import TopicPartition
from weir.groups.codec import OffsetAndMetadata

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 8


async def handle(ctx, request) -> Any:
    now = int(time.time() * 1000)
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in request.topics:
        for p in topic.partitions:
            offsets[TopicPartition(topic.name, int(p.partition_index))] = OffsetAndMetadata(
                offset=int(p.committed_offset),
                leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                metadata=p.committed_metadata or "",
                commit_timestamp=now,
            )
    results = await ctx.broker.group_coordinator.commit_offsets(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        int(request.generation_id_or_member_epoch), offsets)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, error in results.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition,
                                                  "error_code": error})
    return ctx.respond(topics=[{"name": name, "partitions": parts}
                               for name, parts in by_topic.items()])

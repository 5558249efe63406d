"""OffsetFetch (9): committed offsets of one group (v1–v7) or several (v8)."""

from __future__ import annotations

from typing import Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 8


def _fetch(ctx, group_id: str, topics: Any) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """(group error, topics) for one group; ``topics`` None asks for every offset."""
    wanted = None
    if topics is not None:
        wanted = [TopicPartition(t.name, int(p)) for t in topics for p in t.partition_indexes]
    try:
        found = ctx.broker.group_coordinator.fetch_offsets(group_id, wanted)
        error = ErrorCode.none
    except KafkaError as exc:
        found, error = dict.fromkeys(wanted or ()), exc.code
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, o in found.items():
        by_topic.setdefault(tp.topic, []).append({
            "partition_index": tp.partition,
            "committed_offset": o.offset if o else -1,
            "committed_leader_epoch": o.leader_epoch if o else -1,
            "metadata": o.metadata if o else "",
            # Before v2 there is no group-level error: each partition carries it.
            "error_code": error if ctx.version < 2 else ErrorCode.none,
        })
    return error, [{"name": n, "partitions": parts} for n, parts in by_topic.items()]


async def handle(ctx, request) -> Any:
    if ctx.version >= 8:
        groups = []
        for g in request.groups:
            error, topics = _fetch(ctx, g.group_id, g.topics)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return ctx.respond(groups=groups)
    error, topics = _fetch(ctx, request.group_id, request.topics)
    return ctx.respond(topics=topics, error_code=error)

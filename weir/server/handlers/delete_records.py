"""DeleteRecords (21): move log start offsets; answers once every live replica followed
(the low watermark, seed 002)."""

from __future__ import annotations

from typing import Any

from weir.common import TopicPartition

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx, request) -> Any:
    broker = ctx.broker
    offsets = {TopicPartition(t.name, int(p.partition_index)): int(p.offset)
               for t in request.topics for p in t.partitions}
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    results = await broker.replica_manager.delete_records(
        offsets, timeout_ms, lambda: set(broker.metadata.brokers))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, (code, low) in results.items():
        code = ctx.partition_error(tp, code)
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "low_watermark": low, "error_code": code})
    return ctx.respond(topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()])

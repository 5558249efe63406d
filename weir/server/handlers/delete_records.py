"""DeleteRecords (21): move log start offsets; answers once every live replica followed
(the low watermark, Kafka's DelayedDeleteRecords)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.delete_records.v2.request import DeleteRecordsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> Response:
    # Kafka's handleDeleteRecordsRequest: DELETE on each topic.
    allowed, denied = authz.filter_authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC,
                                              request.topics, lambda t: t.name)
    offsets = {TopicPartition(t.name, int(p.partition_index)): int(p.offset)
               for t in allowed for p in t.partitions}
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    results = await ctx.replica_manager.delete_records(
        offsets, timeout_ms, lambda: set(ctx.metadata.brokers)) if offsets else {}
    refused = {TopicPartition(t.name, int(p.partition_index)) for t in denied
               for p in t.partitions}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    answered: set[TopicPartition] = set()
    for t in request.topics:  # in request order
        for p in t.partitions:
            tp = TopicPartition(t.name, int(p.partition_index))
            if tp in answered:
                continue  # a partition named twice is answered once
            answered.add(tp)
            if tp in refused:
                code, low = ErrorCode.topic_authorization_failed, -1
            elif tp in results:
                code, low = results[tp]
                code = ctx.partition_error(tp, code)
            else:
                continue
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "low_watermark": low, "error_code": code})
    return ctx.respond(topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()])

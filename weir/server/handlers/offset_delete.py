"""OffsetDelete (47): delete a group's offsets for partitions it does not subscribe to."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.offset_delete.v0.request import OffsetDeleteRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> Response:
    if not authz.authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed, topics=[])
    # Kafka's handleOffsetDeleteRequest: DELETE on the group, READ on each topic.
    allowed, denied = authz.filter_authorized(ctx, AclOperation.READ, ResourceType.TOPIC,
                                              request.topics, lambda t: t.name)
    tps = [TopicPartition(t.name, int(p.partition_index))
           for t in allowed for p in t.partitions]
    error, results = await ctx.group_coordinator.delete_offsets(request.group_id, tps)
    results = dict(results)
    for t in denied:
        for p in t.partitions:
            results[TopicPartition(t.name, int(p.partition_index))] = (
                ErrorCode.topic_authorization_failed)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for t in request.topics:  # in request order
        for p in t.partitions:
            tp = TopicPartition(t.name, int(p.partition_index))
            if tp in results:
                by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition,
                                                          "error_code": results.pop(tp)})
    return ctx.respond(error_code=error, topics=[{"name": n, "partitions": parts}
                                                 for n, parts in by_topic.items()])

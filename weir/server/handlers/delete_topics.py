"""DeleteTopics (20): queue topics in /admin/delete_topics; wait until the controller has
removed them from every broker's metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import admin, authz

if TYPE_CHECKING:
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 20
MIN_VERSION = 0
MAX_VERSION = 6


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> Response:
    broker = ctx.services  # admin calls take the broker's services
    cache = broker.metadata
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    if hasattr(request, "topic_names"):
        wanted = [(name, None) for name in request.topic_names]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    results = []
    pending: set[str] = set()
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            name = cache.topic_by_id(topic_id)
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id or cache.topic_ids.get(name),
                                 "error_code": ErrorCode.none, "error_message": None}
        if name is not None and not authz.authorize(ctx, AclOperation.DELETE,
                                                    ResourceType.TOPIC, name):
            # Kafka's handleDeleteTopicsRequest: DELETE on the topic, asked before its
            # existence so that an unauthorized principal learns nothing.
            entry.update(error_code=ErrorCode.topic_authorization_failed,
                         name=name if topic_id is None else None)
        elif name is None or name not in cache.topics:
            entry["error_code"] = (ErrorCode.unknown_topic_id if name is None
                                   else ErrorCode.unknown_topic_or_partition)
        else:
            try:
                await admin.delete_topic(broker, name)
                pending.add(name)
            except KafkaError as exc:  # TOPIC_DELETION_DISABLED, or gone from ZooKeeper
                entry["error_code"] = exc.code
        results.append(entry)
    if pending:
        ok = await admin.wait_until(lambda: not any(t in cache.topics for t in pending),
                                    timeout_ms)
        if not ok:
            for entry in results:
                if entry["name"] in cache.topics and entry["name"] in pending:
                    entry["error_code"] = ErrorCode.request_timed_out
    return ctx.respond(responses=results)

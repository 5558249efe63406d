"""CreatePartitions (37): grow a topic's partition count; the controller brings the new
partitions online."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import admin, authz

if TYPE_CHECKING:
    from kio.schema.create_partitions.v3.request import CreatePartitionsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> Response:
    broker = ctx.services  # admin calls take the broker's services
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    results = []
    grown: dict[str, int] = {}
    for topic in request.topics:
        entry: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none,
                                 "error_message": None}
        try:
            if not authz.authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                # Kafka's handleCreatePartitionsRequest: ALTER on the topic.
                raise KafkaError(ErrorCode.topic_authorization_failed,
                                 "The topic authorization is failed.")
            await _grow(ctx, topic, bool(request.validate_only))
            if not request.validate_only:
                grown[topic.name] = int(topic.count)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    if grown:
        ok = await admin.wait_until(
            lambda: all(broker.metadata.partitions_ready(t, n) for t, n in grown.items()),
            timeout_ms)
        if not ok:
            for entry in results:
                if entry["name"] in grown:
                    entry["error_code"] = ErrorCode.request_timed_out
    return ctx.respond(results=results)


async def _grow(ctx, topic, validate_only: bool) -> None:
    assignments = (None if topic.assignments is None
                   else [list(a.broker_ids) for a in topic.assignments])
    await admin.create_partitions(ctx.services, topic.name, int(topic.count), assignments,
                                  validate_only)

"""ListPartitionReassignments (46, v0; KIP-455): the partition moves in progress.

Answered by the active controller only (NOT_CONTROLLER elsewhere).  ``topics`` null lists
every move; partitions that are not moving are left out, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: ListPartitionReassignmentsRequest) -> Response:
    controller = ctx.controller
    wanted: list[TopicPartition] | None = None
    if request.topics is not None:
        wanted = [TopicPartition(t.name, int(p)) for t in request.topics
                  for p in t.partition_indexes]
    if not authz.authorize_cluster(ctx, AclOperation.DESCRIBE):  # Kafka: DESCRIBE on cluster
        return ctx.respond(error_code=ErrorCode.cluster_authorization_failed,
                           error_message="Cluster authorization failed.", topics=[])
    if controller is None or not controller.is_active:
        return ctx.respond(error_code=ErrorCode.not_controller,
                           error_message="this broker is not the controller", topics=[])
    try:
        moving = await controller.list_reassignments(wanted)
    except KafkaError as exc:
        return ctx.respond(error_code=exc.code, error_message=exc.message, topics=[])
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, assignment in sorted(moving.items()):
        by_topic.setdefault(tp.topic, []).append({
            "partition_index": tp.partition,
            "replicas": list(assignment.replicas),
            "adding_replicas": list(assignment.adding),
            "removing_replicas": list(assignment.removing),
        })
    return ctx.respond(error_code=ErrorCode.none, error_message=None,
                       topics=[{"name": t, "partitions": p} for t, p in by_topic.items()])

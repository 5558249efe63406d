"""AlterPartitionReassignments (45, v0; KIP-455): start, re-target or cancel partition moves.

As in ZooKeeper-mode Kafka only the active controller answers; other brokers reply
NOT_CONTROLLER.  A partition's ``replicas`` of null cancels its move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.alter_partition_reassignments.v0.request import (
        AlterPartitionReassignmentsRequest,
    )

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 0


def _responses(request: Any, outcome: dict[TopicPartition, tuple[ErrorCode, str | None]],
               error: tuple[ErrorCode, str] | None) -> list[dict[str, Any]]:
    out = []
    for topic in request.topics:
        parts = []
        for part in topic.partitions:
            tp = TopicPartition(topic.name, int(part.partition_index))
            code, message = error or outcome.get(
                tp, (ErrorCode.unknown_server_error, "no answer for this partition"))
            parts.append({"partition_index": tp.partition, "error_code": code,
                          "error_message": message})
        out.append({"name": topic.name, "partitions": parts})
    return out


async def handle(ctx: RequestContext, request: AlterPartitionReassignmentsRequest) -> Response:
    controller = ctx.controller
    targets: dict[TopicPartition, tuple[int, ...] | None] = {}
    for topic in request.topics:
        for part in topic.partitions:
            replicas = part.replicas
            targets[TopicPartition(topic.name, int(part.partition_index))] = (
                None if replicas is None else tuple(int(r) for r in replicas))
    error: tuple[ErrorCode, str] | None = None
    outcome: dict = {}
    if not authz.authorize_cluster(ctx, AclOperation.ALTER):  # Kafka: ALTER on the cluster
        error = (ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    elif controller is None or not controller.is_active:
        error = (ErrorCode.not_controller, "this broker is not the controller")
    else:
        try:
            outcome = await controller.alter_reassignments(targets)
        except KafkaError as exc:
            error = (exc.code, exc.message)
    top_code, top_message = (error[0], error[1]) if error and error[0] in (
        ErrorCode.not_controller, ErrorCode.cluster_authorization_failed) else (ErrorCode.none, None)
    return ctx.respond(error_code=top_code, error_message=top_message,
                       responses=_responses(request, outcome, error))

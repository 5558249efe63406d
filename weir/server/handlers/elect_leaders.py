"""ElectLeaders (43, v0-2): preferred or unclean leader elections, on the active controller.

As in ZooKeeper-mode Kafka only the controller answers; other brokers reply NOT_CONTROLLER
(clients send this request to the controller they learn from Metadata).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.controller.rpc import elect_leaders_partitions
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.elect_leaders.v2.request import ElectLeadersRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2


def _results(outcome: dict, error: ErrorCode | None = None,
             requested: Any = None) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    if error is not None:
        for tp in sorted(requested or ()):
            by_topic.setdefault(tp.topic, []).append(
                {"partition_id": tp.partition, "error_code": error, "error_message": None})
    for tp, (code, message) in sorted(outcome.items()):
        by_topic.setdefault(tp.topic, []).append(
            {"partition_id": tp.partition, "error_code": code, "error_message": message})
    return [{"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()]


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> Response:
    partitions = elect_leaders_partitions(request)
    election_type = int(getattr(request, "election_type", 0))
    controller = ctx.controller
    error: ErrorCode | None = None
    outcome: dict = {}
    if not authz.authorize_cluster(ctx, AclOperation.ALTER):
        error = ErrorCode.cluster_authorization_failed  # Kafka: ALTER on the cluster
    elif election_type not in (0, 1):
        error = ErrorCode.invalid_request
    elif controller is None or not controller.is_active:
        error = ErrorCode.not_controller
    else:
        try:
            outcome = await controller.elect_leaders(election_type, partitions)
        except KafkaError as exc:
            error = exc.code
    if error is not None:
        return ctx.respond(error_code=error,
                           replica_election_results=_results({}, error, partitions))
    return ctx.respond(error_code=ErrorCode.none, replica_election_results=_results(outcome))

"""StopReplica (5, v4): stop serving partitions, and delete them when asked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.server.handlers._controller_requests import cluster_action_refused, stale_broker_epoch

if TYPE_CHECKING:
    from weir.protocol.interbroker.stop_replica.v4.request import StopReplicaRequest
    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 5
MIN_VERSION = 4
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: StopReplicaRequest) -> Response:
    error = cluster_action_refused(ctx) or await stale_broker_epoch(ctx, request)
    if error is not None:
        return ctx.respond(error_code=error, partition_errors=[])
    wanted = {
        TopicPartition(t.topic_name, int(p.partition_index)):
            (int(p.leader_epoch), bool(p.delete_partition))
        for t in request.topic_states for p in t.partition_states
    }
    try:
        results = ctx.replica_manager.stop_replicas(int(request.controller_epoch), wanted)
    except KafkaError as exc:
        return ctx.respond(error_code=exc.code, partition_errors=[])
    return ctx.respond(error_code=ErrorCode.none, partition_errors=[
        {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": code}
        for tp, code in results.items()
    ])

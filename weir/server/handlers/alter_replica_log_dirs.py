"""AlterReplicaLogDirs (34, v0-v2): move replicas between this broker's log dirs (KIP-113);
the work is in :mod:`weir.replication.log_dir_mover`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.replication.log_dir_mover import alter_replica_log_dirs
from weir.security.acls import AclOperation
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 34
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> Response:
    destinations: dict[TopicPartition, str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                destinations[TopicPartition(t.name, int(p))] = d.path
    if not authz.authorize_cluster(ctx, AclOperation.ALTER):
        # Kafka's handleAlterReplicaLogDirsRequest: ALTER on the cluster.
        results = dict.fromkeys(destinations, ErrorCode.cluster_authorization_failed)
    else:
        await ctx.topic_configs.load({tp.topic for tp in destinations})
        results = alter_replica_log_dirs(ctx.replica_manager, ctx.log_dir_mover,
                                         destinations)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, code in results.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": code})
    return ctx.respond(results=[{"topic_name": t, "partitions": ps}
                                for t, ps in by_topic.items()])

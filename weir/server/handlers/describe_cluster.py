"""DescribeCluster (60, KIP-700): cluster id, controller and live brokers, as the admin
client's describeCluster asks for them (the same view as Metadata gives)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz
from weir.server.handlers.metadata import _NO_OPERATIONS, _from_zookeeper

if TYPE_CHECKING:
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1

BROKERS_ENDPOINT = 1


async def handle(ctx: RequestContext, request: DescribeClusterRequest) -> Response:
    endpoint_type = int(getattr(request, "endpoint_type", BROKERS_ENDPOINT))
    if endpoint_type != BROKERS_ENDPOINT:  # a ZooKeeper-mode broker has no KRaft controllers
        return ctx.respond(error_code=ErrorCode.unsupported_endpoint_type,
                           error_message=f"endpoint type {endpoint_type} is not supported; "
                                         "a ZooKeeper-based cluster lists brokers only",
                           endpoint_type=endpoint_type, cluster_id=ctx.cluster_id,
                           controller_id=-1, brokers=[],
                           cluster_authorized_operations=_NO_OPERATIONS)
    cache = ctx.metadata
    brokers = [{"broker_id": b.id, "host": b.host, "port": b.port, "rack": b.rack}
               for b in cache.brokers_on(ctx.listener)]
    controller_id = cache.controller_id
    if not brokers or controller_id < 0:  # no UpdateMetadata yet: ask ZooKeeper
        registered, controller_id = await _from_zookeeper(ctx, ctx.listener)
        brokers = brokers or [{"broker_id": b["node_id"], "host": b["host"],
                               "port": b["port"], "rack": b["rack"]} for b in registered]
    cluster_ops = _NO_OPERATIONS
    if getattr(request, "include_cluster_authorized_operations", False):  # KIP-430
        cluster_ops = (authz.authorized_operations(ctx, ResourceType.CLUSTER, "kafka-cluster")
                       if authz.authorize_cluster(ctx, AclOperation.DESCRIBE) else 0)
    return ctx.respond(error_code=ErrorCode.none, error_message=None,
                       endpoint_type=endpoint_type, cluster_id=ctx.cluster_id,
                       controller_id=controller_id, brokers=brokers,
                       cluster_authorized_operations=cluster_ops)

"""UpdateMetadata (6, v8): the controller refreshes this broker's metadata cache."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.server.handlers._controller_requests import cluster_action_refused, stale_broker_epoch
from weir.server.metadata_cache import LEADER_DURING_DELETE, BrokerMeta, PartitionMeta

if TYPE_CHECKING:
    from weir.protocol.interbroker.update_metadata.v8.request import UpdateMetadataRequest
    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 6
MIN_VERSION = 8
MAX_VERSION = 8


def parse_request(request, inter_broker: str
                  ) -> tuple[list[BrokerMeta], list[tuple[str, Any, int, PartitionMeta]]]:
    """The request's live brokers (at their inter-broker listener's endpoint) and its
    partition states (topic, topic id, partition, state)."""
    brokers = []
    for b in request.live_brokers:
        endpoints = tuple((e.listener, e.host, int(e.port)) for e in b.endpoints)
        ep = next((e for e in endpoints if e[0] == inter_broker),
                  endpoints[0] if endpoints else None)
        if ep is not None:
            brokers.append(BrokerMeta(int(b.id), ep[1], ep[2], b.rack, endpoints))
    # The decoder gives ints and tuples of ints already (kio's int32 types are int at run
    # time): no per-element conversion (10,000 partitions: ~3x less CPU).  tuple() of a
    # tuple is the same object; a list (a request built in-process) is copied.
    partitions = []
    append = partitions.append
    for t in request.topic_states:
        name, topic_id = t.topic_name, t.topic_id
        for p in t.partition_states:
            append((name, topic_id, p.partition_index, PartitionMeta(
                p.leader, p.leader_epoch, tuple(p.isr), tuple(p.replicas),
                tuple(p.offline_replicas), p.zk_version)))
    return brokers, partitions


async def handle(ctx: RequestContext, request: UpdateMetadataRequest) -> Response:
    error = cluster_action_refused(ctx) or await stale_broker_epoch(ctx, request)
    if error is not None:
        return ctx.respond(error_code=error)
    if int(request.controller_epoch) < ctx.metadata.controller_epoch:
        return ctx.respond(error_code=ErrorCode.stale_controller_epoch)
    brokers, partitions = parse_request(request, ctx.config.inter_broker_listener_name)
    deleted = ctx.metadata.update(int(request.controller_id),
                                     int(request.controller_epoch), brokers, partitions)
    for topic in deleted:
        ctx.topic_configs.set_overrides(topic, None)
    remove_deleted_offsets(request, ctx.group_coordinator)
    return ctx.respond(error_code=ErrorCode.none)


def remove_deleted_offsets(request, group_coordinator) -> asyncio.Task | None:
    """KafkaApis.handleUpdateMetadataRequest: the partitions this request deletes (leader -2,
    whether or not this broker knew them) lose their committed offsets in every group
    (GroupCoordinator.onPartitionsDeleted); the coordinator's task writing the tombstones,
    None when there was nothing to remove.  The simulated broker (weir.sim.node) calls it
    too."""
    gone = [TopicPartition(t.topic_name, p.partition_index)
            for t in request.topic_states for p in t.partition_states
            if p.leader == LEADER_DURING_DELETE]
    return group_coordinator.on_partitions_deleted(gone) if gone else None

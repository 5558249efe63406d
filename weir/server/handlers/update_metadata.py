"""UpdateMetadata (6, v8): the controller refreshes this broker's metadata cache."""

from __future__ import annotations

from typing import Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.server.handlers._controller_requests import cluster_action_refused, stale_broker_epoch
from weir.server.metadata_cache import LEADER_DURING_DELETE, BrokerMeta, PartitionMeta

API_KEY = 6
MIN_VERSION = 8
MAX_VERSION = 8


async def handle(ctx, request) -> Any:
    error = cluster_action_refused(ctx) or await stale_broker_epoch(ctx, request)
    if error is not None:
        return ctx.respond(error_code=error)
    if int(request.controller_epoch) < ctx.metadata.controller_epoch:
        return ctx.respond(error_code=ErrorCode.stale_controller_epoch)
    brokers = []
    inter_broker = ctx.config.inter_broker_listener_name
    for b in request.live_brokers:
        endpoints = tuple((e.listener, e.host, int(e.port)) for e in b.endpoints)
        ep = next((e for e in endpoints if e[0] == inter_broker),
                  endpoints[0] if endpoints else None)
        if ep is not None:
            brokers.append(BrokerMeta(int(b.id), ep[1], ep[2], b.rack, endpoints))
    partitions = []
    for t in request.topic_states:
        for p in t.partition_states:
            partitions.append((t.topic_name, t.topic_id, int(p.partition_index), PartitionMeta(
                leader=int(p.leader), leader_epoch=int(p.leader_epoch),
                isr=tuple(int(x) for x in p.isr), replicas=tuple(int(x) for x in p.replicas),
                offline_replicas=tuple(int(x) for x in p.offline_replicas),
                partition_epoch=int(p.zk_version),
            )))
    deleted = ctx.metadata.update(int(request.controller_id),
                                     int(request.controller_epoch), brokers, partitions)
    for topic in deleted:
        ctx.topic_configs.set_overrides(topic, None)
    # KafkaApis.handleUpdateMetadataRequest: the partitions this request deletes (leader -2,
    # whether or not this broker knew them) lose their committed offsets in every group.
    gone = [TopicPartition(topic, index) for topic, _, index, meta in partitions
            if meta.leader == LEADER_DURING_DELETE]
    if gone:
        ctx.group_coordinator.on_partitions_deleted(gone)
    return ctx.respond(error_code=ErrorCode.none)

"""LeaderAndIsr (4, v7): the controller makes this broker leader or follower of partitions."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.replication.leader_endpoint import BrokerEndPoint
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate
from weir.server import gc_tuning
from weir.server.handlers._controller_requests import cluster_action_refused, stale_broker_epoch

if TYPE_CHECKING:
    from weir.protocol.interbroker.leader_and_isr.v7.request import LeaderAndIsrRequest
    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 4
MIN_VERSION = 7
MAX_VERSION = 7

FULL = 1

log = logging.getLogger(__name__)


def parse_partition_states(request) -> tuple[dict[TopicPartition, PartitionStateUpdate],
                                              dict[str, Any]]:
    """The request's partition states by partition, and its topics' ids."""
    updates: dict[TopicPartition, PartitionStateUpdate] = {}
    topic_ids: dict[str, Any] = {}
    # The decoder gives ints and tuples of ints already (kio's int32 types are int at run
    # time): no per-element conversion.
    for topic in request.topic_states:
        name, topic_id = topic.topic_name, topic.topic_id
        topic_ids[name] = topic_id
        for ps in topic.partition_states:
            updates[TopicPartition(name, ps.partition_index)] = PartitionStateUpdate(
                LeaderState(ps.leader, ps.leader_epoch, list(ps.isr), list(ps.replicas),
                            ps.partition_epoch, ps.controller_epoch),
                topic_id, bool(ps.is_new))
    return updates, topic_ids


async def handle(ctx: RequestContext, request: LeaderAndIsrRequest) -> Response:
    error = cluster_action_refused(ctx) or await stale_broker_epoch(ctx, request)
    if error is not None:
        return ctx.respond(error_code=error, topics=[])
    updates, topic_ids = parse_partition_states(request)
    known = ctx.replica_manager.partitions
    new_replicas = sum(1 for tp in updates if tp not in known)
    live_leaders = {int(b.broker_id): BrokerEndPoint(int(b.broker_id), b.host_name, int(b.port))
                    for b in request.live_leaders}
    await ctx.topic_configs.load(set(topic_ids))
    started = time.perf_counter()
    try:
        await ctx.replica_manager.create_new_logs(int(request.controller_epoch), updates)
        created = time.perf_counter()
        # In slices: the loop answers other connections' requests (a client's Metadata)
        # between them.
        results, busy_ms, slices = await ctx.replica_manager.apply_leader_and_isr_sliced(
            int(request.controller_epoch), updates, int(request.type_) == FULL, live_leaders
        )
    except KafkaError as exc:
        return ctx.respond(error_code=exc.code, topics=[])
    log.info("LeaderAndIsr from controller epoch %d: %d partitions applied in %.0f ms "
             "(%d slices over %.0f ms; new logs created off the event loop first: %.0f ms)",
             int(request.controller_epoch), len(updates), busy_ms, slices,
             (time.perf_counter() - created) * 1000, (created - started) * 1000)
    if new_replicas >= gc_tuning.FREEZE_AFTER_NEW_REPLICAS:
        # after the answer is written (the next turn of the loop)
        asyncio.get_running_loop().call_soon(gc_tuning.freeze_new_replicas, new_replicas, log)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, code in results.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": code})
    return ctx.respond(error_code=ErrorCode.none, topics=[
        {"topic_id": topic_ids[t], "partition_errors": errs} for t, errs in by_topic.items()
    ])

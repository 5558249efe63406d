"""Fetch (1): consumers read below the high watermark; followers read to the log end.

Fetch sessions (KIP-227) are not kept: every response carries session id 0, which tells the
client that no session was created, so it keeps sending full fetch requests.
"""

from __future__ import annotations

from typing import Any

from weir.common import TopicPartition
from weir.protocol import fetch_response
from weir.protocol.errors import ErrorCode
from weir.protocol.fetch_response import PartitionData
from weir.replication.read_replica import rack_aware_enabled
from weir.replication.replica_manager import FetchPartition, FetchResult
from weir.server.context import RawResponse

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 12


async def handle(ctx, request) -> Any:
    broker = ctx.broker
    # Fetch sessions (KIP-227, v7+) are not kept: a request naming one is refused.
    session_id = getattr(request, "session_id", 0)
    if session_id != 0 and request.session_epoch not in (-1, 0):
        return RawResponse(fetch_response.encode(
            ctx.version, [], error_code=int(ErrorCode.fetch_session_id_not_found)))
    wanted: list[FetchPartition] = []
    for topic in request.topics:
        for part in topic.partitions:
            wanted.append(FetchPartition(
                tp=TopicPartition(topic.topic, int(part.partition)),
                fetch_offset=int(part.fetch_offset),
                partition_max_bytes=int(part.partition_max_bytes),
                current_leader_epoch=int(getattr(part, "current_leader_epoch", -1)),
                last_fetched_epoch=int(getattr(part, "last_fetched_epoch", -1)),
                log_start_offset=int(getattr(part, "log_start_offset", -1)),
            ))
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    max_bytes = int(getattr(request, "max_bytes", 0x7FFFFFFF))
    replica_id = int(request.replica_id)
    consumer = replica_id < 0
    redirected = _preferred_read_replicas(ctx, request, wanted) if consumer else {}
    results = await broker.replica_manager.fetch(
        replica_id, max_wait_ms, int(request.min_bytes), max_bytes,
        [w for w in wanted if w.tp not in redirected],
        followers_serve_consumers=consumer and ctx.version >= 11,
    )
    for tp in redirected:
        results[tp] = FetchResult()
    by_topic: dict[str, list[PartitionData]] = {}
    for req in wanted:
        r = results[req.tp]
        error = ctx.partition_error(req.tp, r.error)
        data = PartitionData(
            partition_index=req.tp.partition, error_code=int(error),
            high_watermark=r.high_watermark, last_stable_offset=r.high_watermark,
            log_start_offset=r.log_start_offset,
            records=r.records if r.records is not None else b"",
            diverging_epoch=r.diverging_epoch,
        )
        if req.tp in redirected:
            p = broker.replica_manager.partitions[req.tp]
            data.preferred_read_replica = redirected[req.tp]
            data.records = b""
            data.high_watermark = data.last_stable_offset = p.log.high_watermark
            data.log_start_offset = p.log.log_start_offset
        meta = broker.metadata.partition(req.tp)
        if error in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch) and meta:
            data.current_leader = (meta.leader, meta.leader_epoch)
        by_topic.setdefault(req.tp.topic, []).append(data)
    return RawResponse(fetch_response.encode(ctx.version, list(by_topic.items())))


def _preferred_read_replicas(ctx, request, wanted: list[FetchPartition]) -> dict:
    """KIP-392: partitions led here whose consumer should read from a replica in its rack."""
    broker = ctx.broker
    client_rack = getattr(request, "rack_id", "") or ""
    if not client_rack or not rack_aware_enabled(broker.config.get("replica.selector.class")):
        return {}
    racks = {b.id: b.rack for b in broker.metadata.brokers.values()}
    out = {}
    for w in wanted:
        chosen = broker.replica_manager.preferred_read_replica(w.tp, w.fetch_offset, racks,
                                                               client_rack)
        if chosen >= 0 and chosen != broker.broker_id:
            out[w.tp] = chosen
    return out

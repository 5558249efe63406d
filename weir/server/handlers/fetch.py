"""Fetch (1): consumers read below the high watermark; followers read to the log end.

Fetch v7+ may use incremental fetch sessions (KIP-227, :mod:`weir.server.fetch_session`):
a full fetch creates one, an incremental fetch names only what changed and is answered only
for partitions with something new. Fetch v13+ names topics by id (KIP-516): an id this
broker does not know is answered UNKNOWN_TOPIC_ID for its partitions, and one that differs
from the log's (a log of an older topic of the same name) INCONSISTENT_TOPIC_ID
(:mod:`weir.storage.topic_ids`). Fetch v0-3 get their
records down-converted to message format v0 (v0-1) or v1 (v2-3), as Kafka's
``RecordsUtil.downConvert`` (:mod:`weir.records.legacy`); a zstd topic or batch is
UNSUPPORTED_COMPRESSION_TYPE for them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.coordination.codecs import topic_id_to_str
from weir.protocol import fetch_response
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.fetch_response import FileRegion, PartitionData
from weir.records import legacy
from weir.replication.local_reads import FetchPartition, FetchResult
from weir.replication.read_replica import rack_aware_enabled
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz
from weir.server.context import RawResponse
from weir.server.fetch_session import PartitionRequest

if TYPE_CHECKING:
    from kio.schema.fetch.v17.request import FetchRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 1
MIN_VERSION = 0
MAX_VERSION = 17


def _replica_id(request, version: int) -> int:
    if version >= 15:  # KIP-903: the follower's id moved into ReplicaState
        return int(request.replica_state.replica_id)
    return int(request.replica_id)


def _requested(request, version: int, resolve) -> tuple[list[PartitionRequest],
                                                        list[PartitionRequest]]:
    fetch: list[PartitionRequest] = []
    for topic in request.topics:
        if version >= 13:
            topic_id = topic.topic_id or uuid.UUID(int=0)
            name = resolve(topic_id)
        else:
            topic_id, name = None, topic.topic
        for part in topic.partitions:
            fetch.append(PartitionRequest(
                topic=name, topic_id=topic_id, partition=int(part.partition),
                fetch_offset=int(part.fetch_offset),
                partition_max_bytes=int(part.partition_max_bytes),
                current_leader_epoch=int(getattr(part, "current_leader_epoch", -1)),
                last_fetched_epoch=int(getattr(part, "last_fetched_epoch", -1)),
                log_start_offset=int(getattr(part, "log_start_offset", -1)),
            ))
    forgotten: list[PartitionRequest] = []
    for topic in getattr(request, "forgotten_topics_data", ()) or ():
        if version >= 13:
            topic_id = topic.topic_id or uuid.UUID(int=0)
            name = resolve(topic_id)
        else:
            topic_id, name = None, topic.topic
        for index in topic.partitions:
            forgotten.append(PartitionRequest(name, topic_id, int(index), -1, 0))
    return fetch, forgotten


async def handle(ctx: RequestContext, request: FetchRequest) -> Response:
    version = ctx.version
    replica_id = _replica_id(request, version)
    consumer = replica_id < 0
    resolve = ctx.metadata.topic_by_id
    if not consumer and version >= 13:
        resolve = _follower_resolver(ctx)
    fetch, forgotten = _requested(request, version, resolve)
    context = ctx.fetch_sessions.new_context(
        version, int(getattr(request, "session_id", 0)),
        int(getattr(request, "session_epoch", -1)), not consumer, fetch, forgotten,
        _now_ms(), resolve)
    if context.error:
        return RawResponse(fetch_response.encode(version, [], error_code=context.error))
    denied = _unauthorized_topics(ctx, consumer, context.partitions)
    wanted: list[FetchPartition] = []
    for req in context.partitions:
        if req.topic is None or req.topic in denied:
            continue  # an unknown topic id (UNKNOWN_TOPIC_ID below) or not authorized
        w = req.fetch
        if w is None:  # built once per partition request; a session keeps it between fetches
            w = req.fetch = FetchPartition(
                tp=TopicPartition(req.topic, req.partition), fetch_offset=req.fetch_offset,
                partition_max_bytes=req.partition_max_bytes,
                current_leader_epoch=req.current_leader_epoch,
                last_fetched_epoch=req.last_fetched_epoch,
                log_start_offset=req.log_start_offset,
                topic_id=topic_id_to_str(req.topic_id) if req.topic_id is not None else None)
        wanted.append(w)
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    max_bytes = int(getattr(request, "max_bytes", 0x7FFFFFFF))
    redirected = _preferred_read_replicas(ctx, request, wanted) if consumer else {}
    results = await ctx.replica_manager.reads.fetch(
        replica_id, max_wait_ms, int(request.min_bytes), max_bytes,
        [w for w in wanted if w.tp not in redirected] if redirected else wanted,
        followers_serve_consumers=consumer and version >= 11,
        isolation_level=int(getattr(request, "isolation_level", 0)) if version >= 4 else 0,
    )
    for tp in redirected:
        results[tp] = FetchResult()
    # An incremental fetch session answers only the partitions with something new (Kafka's
    # CachedPartition.maybeUpdateResponseData): one read with no records, no error and the
    # session's high watermark and log start offset is left out before it is encoded.
    unchanged = context.unchanged
    answers: list[tuple[PartitionRequest, PartitionData]] = []
    leaders: set[int] = set()
    for req in context.partitions:
        if req.topic is not None and req.topic in denied:
            answers.append((req, PartitionData(
                partition_index=req.partition,
                error_code=int(ErrorCode.topic_authorization_failed))))
            continue
        w = req.fetch
        r = None if w is None else results.get(w.tp)
        if r is None:
            # A topic id unknown when this fetch read (another request of the session may
            # have resolved it since, while this one waited).
            answers.append((req, PartitionData(
                partition_index=req.partition, error_code=int(ErrorCode.unknown_topic_id))))
            continue
        tp = w.tp
        error = r.error
        if (not error and not r.size and r.diverging_epoch is None and unchanged is not None
                and tp not in redirected and unchanged(req, r.high_watermark,
                                                       r.log_start_offset)):
            continue
        if error:
            error = ctx.partition_error(tp, error)
        data = PartitionData(
            partition_index=req.partition, error_code=int(error),
            high_watermark=r.high_watermark,
            last_stable_offset=r.last_stable_offset if r.last_stable_offset >= 0
            else r.high_watermark,
            log_start_offset=r.log_start_offset,
            records=r.records if r.records is not None else b"",
            diverging_epoch=r.diverging_epoch,
            aborted_transactions=None if r.aborted_transactions is None else [
                (t.producer_id, t.first_offset) for t in r.aborted_transactions],
        )
        if tp in redirected:
            p = ctx.replica_manager.partitions[tp]
            data.preferred_read_replica = redirected[tp]
            data.records = b""
            data.high_watermark = p.log.high_watermark
            data.last_stable_offset = p.log.last_stable_offset
            data.log_start_offset = p.log.log_start_offset
        if error in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
            meta = ctx.metadata.partition(tp)
            if meta:
                data.current_leader = (meta.leader, meta.leader_epoch)
                leaders.add(meta.leader)
        answers.append((req, data))
    if version < 4:
        await _down_convert(ctx, answers)
    elif version <= 5:
        for _req, data in answers:
            # Kafka's maybeDownConvertStorageError: old clients do not know the code.
            if data.error_code == ErrorCode.kafka_storage_error:
                data.error_code = int(ErrorCode.not_leader_or_follower)
    error, session_id, kept = context.respond(answers, _now_ms())
    by_topic: dict[Any, list[PartitionData]] = {}
    for req, data in kept:
        by_topic.setdefault(req.topic_id if version >= 13 else req.topic, []).append(data)
    endpoints = []
    if version >= 16:  # KIP-951: where the new leaders are
        for leader in sorted(leaders):
            b = ctx.metadata.broker_on(leader, ctx.listener)
            if b is not None:
                endpoints.append((b.id, b.host, b.port, b.rack))
    return RawResponse(fetch_response.encode(version, list(by_topic.items()), error_code=error,
                                             session_id=session_id, node_endpoints=endpoints))


def _follower_resolver(ctx):
    """A follower's topic ids: the metadata cache's, else those of the partitions hosted
    here.  The controller sends LeaderAndIsr before UpdateMetadata, so a new topic's
    follower may fetch before this leader's cache knows the id; Kafka's ZooKeeper-mode
    leader answers UNKNOWN_TOPIC_ID then, and the follower backs off for
    replica.fetch.backoff.ms."""
    known = ctx.metadata.topic_by_id
    hosted = ctx.replica_manager.hosted_topic_by_id
    looked_up: dict = {}  # each id the cache lacks is looked up once per request

    def resolve(topic_id):
        name = known(topic_id)
        if name is not None:
            return name
        if topic_id not in looked_up:
            looked_up[topic_id] = hosted(topic_id)  # a scan of the hosted partitions
        return looked_up[topic_id]
    return resolve


def _unauthorized_topics(ctx, consumer: bool, partitions) -> set[str]:
    """Kafka's handleFetchRequest: a consumer needs READ on each topic; a follower needs
    CLUSTER_ACTION on the cluster, or every partition is TOPIC_AUTHORIZATION_FAILED."""
    if not authz.enabled(ctx):
        return set()
    topics = {req.topic for req in partitions if req.topic is not None}
    if not consumer:
        return set() if authz.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION) else topics
    return {t for t in topics
            if not authz.authorize(ctx, AclOperation.READ, ResourceType.TOPIC, t)}


async def _down_convert(ctx, answers: list[tuple[PartitionRequest, PartitionData]]) -> None:
    """Records of Fetch v0-3 in message format v0/v1 (read and converted off the loop)."""
    magic = 0 if ctx.version <= 1 else 1
    work = []
    for req, data in answers:
        if data.error_code == ErrorCode.kafka_storage_error:
            data.error_code = int(ErrorCode.not_leader_or_follower)
        if data.error_code or req.topic is None:
            continue
        if ctx.topic_configs.topic_config(req.topic).get("compression.type") == "zstd":
            data.error_code = int(ErrorCode.unsupported_compression_type)
            data.records = b""
            continue
        if data.records:
            work.append((data, data.records, req.fetch_offset))
    if not work:
        return

    def convert() -> list[tuple[bytes, int]]:
        out = []
        for _data, records, fetch_offset in work:
            try:
                raw = _read(records) if isinstance(records, FileRegion) else bytes(records)
                out.append((legacy.down_convert(raw, magic, fetch_offset), 0))
            except KafkaError as exc:
                out.append((b"", int(exc.code)))
            except OSError:  # the segment went away meanwhile: nothing this time
                out.append((b"", 0))
        return out

    for (data, _records, _offset), (converted, code) in zip(
            work, await asyncio.to_thread(convert), strict=True):
        data.records = converted
        if code:
            data.error_code = code


def _read(region: FileRegion) -> bytes:
    with open(region.path, "rb") as f:
        f.seek(region.position)
        return f.read(region.size)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _preferred_read_replicas(ctx, request, wanted: list[FetchPartition]) -> dict:
    """KIP-392: partitions led here whose consumer should read from a replica in its rack."""
    client_rack = getattr(request, "rack_id", "") or ""
    if not client_rack or not rack_aware_enabled(ctx.config.get("replica.selector.class")):
        return {}
    racks = {b.id: b.rack for b in ctx.metadata.brokers.values()}
    out = {}
    for w in wanted:
        chosen = ctx.replica_manager.reads.preferred_read_replica(w.tp, w.fetch_offset, racks,
                                                               client_rack)
        if chosen >= 0 and chosen != ctx.broker_id:
            out[w.tp] = chosen
    return out

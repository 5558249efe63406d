"""OffsetFetch (9): committed offsets of one group (v1–v7) or several (v8)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.coordination import paths
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.offset_fetch.v9.request import OffsetFetchRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 9
MIN_VERSION = 0
MAX_VERSION = 9


def _fetch(ctx, group_id: str, topics: Any,
           require_stable: bool = False) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """(group error, topics) for one group; ``topics`` None asks for every offset.
    ``require_stable`` (v7+, KIP-447): a partition with a transactional commit still
    undecided is UNSTABLE_OFFSET_COMMIT (the consumer retries)."""
    wanted = None
    if topics is not None:
        wanted = [TopicPartition(t.name, int(p)) for t in topics for p in t.partition_indexes]
    # Kafka's handleOffsetFetchRequest: DESCRIBE on the group; DESCRIBE on each topic (a
    # request for every offset leaves out the topics the principal may not describe).
    denied: set[str] = set()
    if not authz.authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        found, error = dict.fromkeys(wanted or ()), ErrorCode.group_authorization_failed
    else:
        if wanted is not None:
            _, refused = authz.filter_authorized(ctx, AclOperation.DESCRIBE,
                                                 ResourceType.TOPIC, {tp.topic for tp in wanted})
            denied = set(refused)
        try:
            found = ctx.group_coordinator.fetch_offsets(
                group_id, None if wanted is None else [tp for tp in wanted
                                                       if tp.topic not in denied])
            error = ErrorCode.none
        except KafkaError as exc:
            found, error = dict.fromkeys(wanted or ()), exc.code
        if wanted is None:
            found = {tp: o for tp, o in found.items()
                     if authz.authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        tp.topic, log_if_denied=False)}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    coordinator = ctx.group_coordinator
    for tp, o in found.items():
        if (require_stable and error == ErrorCode.none
                and coordinator.has_pending_txn_offsets(group_id, tp)):
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "",
                "error_code": ErrorCode.unstable_offset_commit})
            continue
        by_topic.setdefault(tp.topic, []).append({
            "partition_index": tp.partition,
            "committed_offset": o.offset if o else -1,
            "committed_leader_epoch": o.leader_epoch if o else -1,
            "metadata": o.metadata if o else "",
            # Before v2 there is no group-level error: each partition carries it.
            "error_code": error if ctx.version < 2 else ErrorCode.none,
        })
    for tp in wanted or ():
        if tp.topic in denied:
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": -1,
                "committed_leader_epoch": -1, "metadata": "",
                "error_code": ErrorCode.topic_authorization_failed})
    return error, [{"name": n, "partitions": parts} for n, parts in by_topic.items()]


async def handle(ctx: RequestContext, request: OffsetFetchRequest) -> Response:
    if ctx.version == 0:
        return ctx.respond(topics=await _fetch_from_zookeeper(ctx, request.group_id,
                                                              request.topics))
    stable = bool(getattr(request, "require_stable", False))
    if ctx.version >= 8:
        groups = []
        for g in request.groups:
            error, topics = _fetch(ctx, g.group_id, g.topics, stable)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return ctx.respond(groups=groups)
    error, topics = _fetch(ctx, request.group_id, request.topics, stable)
    return ctx.respond(topics=topics, error_code=error)


async def _fetch_from_zookeeper(ctx, group_id: str, topics: Any) -> list[dict[str, Any]]:
    """OffsetFetch v0 reads what OffsetCommit v0 wrote to ZooKeeper (Kafka's
    ``handleOffsetFetchRequestFromZookeeper``); an unknown partition or one never committed
    is offset -1 without an error."""
    wanted = [TopicPartition(t.name, int(p)) for t in topics for p in t.partition_indexes]
    errors: dict[TopicPartition, ErrorCode] = {}
    if not authz.authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        errors = dict.fromkeys(wanted, ErrorCode.group_authorization_failed)
    else:
        _, refused = authz.filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                             {tp.topic for tp in wanted})
        errors = {tp: ErrorCode.topic_authorization_failed for tp in wanted
                  if tp.topic in set(refused)}
    known = [tp for tp in wanted
             if tp not in errors and ctx.metadata.partition(tp) is not None]
    found = await asyncio.to_thread(_read_offsets, ctx.zk.kazoo, group_id, known)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in wanted:
        offset, error = found.get(tp, (-1, errors.get(tp, ErrorCode.none)))
        by_topic.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "committed_offset": offset, "metadata": "",
            "error_code": error})
    return [{"name": n, "partitions": parts} for n, parts in by_topic.items()]


def _read_offsets(kazoo, group_id: str, wanted: list[TopicPartition]
                  ) -> dict[TopicPartition, tuple[int, ErrorCode]]:
    from kazoo.exceptions import NoNodeError

    out = {}
    for tp in wanted:
        try:
            data, _stat = kazoo.get(paths.consumer_offset(group_id, tp.topic, tp.partition))
            out[tp] = (int(data.decode()), ErrorCode.none)
        except NoNodeError:
            continue
        except Exception:  # noqa: BLE001 - as Kafka's Errors.forException (a bad path, data)
            out[tp] = (-1, ErrorCode.unknown_server_error)
    return out

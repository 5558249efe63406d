"""OffsetCommit (8): write committed offsets to ``__consumer_offsets`` (acks=all).

v0, as in Kafka 3.9's ZooKeeper mode, stores offsets in ZooKeeper instead
(``/consumers/<group>/offsets/<topic>/<partition>``, read back by OffsetFetch v0); v1
carries a commit timestamp per partition (-1: now).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.coordination import paths
from weir.groups.codec import OffsetAndMetadata
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.offset_commit.v9.request import OffsetCommitRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 8
MIN_VERSION = 0
MAX_VERSION = 9


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> Response:
    now = int(time.time() * 1000)
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    # Kafka's handleOffsetCommitRequest: READ on the group (else every partition fails),
    # READ on each topic.
    refused: dict[TopicPartition, ErrorCode] = {}
    group_ok = authz.authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id)
    for topic in request.topics:
        topic_ok = group_ok and authz.authorize(ctx, AclOperation.READ, ResourceType.TOPIC,
                                                topic.name)
        for p in topic.partitions:
            if not topic_ok:
                refused[TopicPartition(topic.name, int(p.partition_index))] = (
                    ErrorCode.topic_authorization_failed if group_ok
                    else ErrorCode.group_authorization_failed)
                continue
            offsets[TopicPartition(topic.name, int(p.partition_index))] = OffsetAndMetadata(
                offset=int(p.committed_offset),
                leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                metadata=p.committed_metadata or "",
                commit_timestamp=_commit_timestamp(p, now),
            )
    if ctx.version == 0:
        results = await _commit_to_zookeeper(ctx, request.group_id, offsets)
        return _response(ctx, {**refused, **results})
    results = await ctx.group_coordinator.commit_offsets(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        int(request.generation_id_or_member_epoch), offsets) if offsets or not refused else {}
    return _response(ctx, {**refused, **results})


def _commit_timestamp(partition, now: int) -> int:
    stamp = int(getattr(partition, "commit_timestamp", -1))  # v1 only
    return now if stamp == -1 else stamp


def _response(ctx, results: dict[TopicPartition, ErrorCode]) -> Any:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, error in results.items():
        by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition,
                                                  "error_code": error})
    return ctx.respond(topics=[{"name": name, "partitions": parts}
                               for name, parts in by_topic.items()])


async def _commit_to_zookeeper(ctx, group: str, offsets: dict[TopicPartition, OffsetAndMetadata]
                               ) -> dict[TopicPartition, ErrorCode]:
    """Kafka's ``commitOffsetsToZookeeper``: unknown topics or partitions and oversized
    metadata are refused, the rest written one znode each."""
    max_meta = int(ctx.config.get("offset.metadata.max.bytes"))
    results: dict[TopicPartition, ErrorCode] = {}
    writes: dict[TopicPartition, int] = {}
    for tp, o in offsets.items():
        if ctx.metadata.partition(tp) is None:
            results[tp] = ErrorCode.unknown_topic_or_partition
        elif len(o.metadata) > max_meta:
            results[tp] = ErrorCode.offset_metadata_too_large
        else:
            writes[tp] = o.offset
    if writes:
        results.update(await asyncio.to_thread(_write_offsets, ctx.zk.kazoo, group, writes))
    return results


def _write_offsets(kazoo, group: str, writes: dict[TopicPartition, int]
                   ) -> dict[TopicPartition, ErrorCode]:
    from kazoo.exceptions import NoNodeError

    out = {}
    for tp, offset in writes.items():
        path = paths.consumer_offset(group, tp.topic, tp.partition)
        data = str(offset).encode()
        try:
            try:
                kazoo.set(path, data)
            except NoNodeError:
                kazoo.create(path, data, makepath=True)
            out[tp] = ErrorCode.none
        except Exception:  # noqa: BLE001 - as Kafka's Errors.forException: a bad path too
            out[tp] = ErrorCode.unknown_server_error
    return out

"""TxnOffsetCommit (28): offsets committed inside a producer's transaction (KIP-98; the
group generation of KIP-447 from v3). They are written to ``__consumer_offsets`` as the
producer's transactional batch and become visible when the transaction's COMMIT marker
arrives (WRITE on the transactional id, READ on the group and on each topic)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.groups.codec import OffsetAndMetadata
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 4


def _response(ctx, errors: dict[TopicPartition, ErrorCode]) -> Any:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": error})
    return ctx.respond(topics=[{"name": t, "partitions": p} for t, p in by_topic.items()])


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> Response:
    tps = [TopicPartition(t.name, int(p.partition_index)) for t in request.topics
           for p in t.partitions]
    if not authz.authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                           request.transactional_id):
        return _response(ctx, dict.fromkeys(tps, ErrorCode.transactional_id_authorization_failed))
    if not authz.authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, dict.fromkeys(tps, ErrorCode.group_authorization_failed))
    now = int(time.time() * 1000)
    refused: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    allowed: dict[str, bool] = {}
    for topic in request.topics:
        if topic.name not in allowed:
            allowed[topic.name] = authz.authorize(ctx, AclOperation.READ, ResourceType.TOPIC,
                                                  topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, int(p.partition_index))
            if not allowed[topic.name]:
                refused[tp] = ErrorCode.topic_authorization_failed
            elif ctx.metadata.partition(tp) is None:
                refused[tp] = ErrorCode.unknown_topic_or_partition
            else:
                offsets[tp] = OffsetAndMetadata(
                    offset=int(p.committed_offset),
                    leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                    metadata=p.committed_metadata or "", commit_timestamp=now)
    results: dict[TopicPartition, ErrorCode] = {}
    if offsets:
        results = await ctx.group_coordinator.commit_txn_offsets(
            request.group_id, int(request.producer_id), int(request.producer_epoch),
            getattr(request, "member_id", ""), getattr(request, "group_instance_id", None),
            int(getattr(request, "generation_id", -1)), offsets)
    return _response(ctx, {**refused, **results})

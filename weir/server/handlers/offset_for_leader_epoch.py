"""OffsetForLeaderEpoch (23): the end offset of a leader epoch (KIP-101/279, KIP-320)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 23
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> Response:
    rm = ctx.replica_manager
    topics = []
    # Kafka's handleOffsetForLeaderEpochRequest: CLUSTER_ACTION (followers) covers every
    # topic; consumers (KIP-320) need DESCRIBE on each.
    cluster = authz.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION, log_if_denied=False)
    for topic in request.topics:
        parts = []
        allowed = cluster or authz.authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                             topic.topic)
        for part in topic.partitions:
            tp = TopicPartition(topic.topic, int(part.partition))
            entry: dict[str, Any] = {"partition": tp.partition, "leader_epoch": -1,
                                     "end_offset": -1, "error_code": ErrorCode.none}
            if not allowed:
                entry["error_code"] = ErrorCode.topic_authorization_failed
                parts.append(entry)
                continue
            try:
                _p, plog = rm.leader_log(tp, int(getattr(part, "current_leader_epoch", -1)))
                epoch, end = plog.epoch_cache.end_offset_for(int(part.leader_epoch),
                                                             plog.log_end_offset)
                entry.update(leader_epoch=epoch, end_offset=end)
            except KafkaError as exc:
                entry["error_code"] = ctx.partition_error(tp, exc.code)
            parts.append(entry)
        topics.append({"topic": topic.topic, "partitions": parts})
    return ctx.respond(topics=topics)

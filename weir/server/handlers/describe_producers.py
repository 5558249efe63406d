"""DescribeProducers (61, KIP-664): the active producers of partitions hosted here.

As Kafka's ``KafkaApis.handleDescribeProducersRequest``: READ on the topic (else every
partition is TOPIC_AUTHORIZATION_FAILED), a topic the cluster does not know is
UNKNOWN_TOPIC_OR_PARTITION; then any replica hosted here (leader or follower, as Kafka's
``Partition.activeProducerState``) answers with each producer id's epoch, last sequence,
last timestamp, the coordinator epoch of its last transaction marker and the first offset of
its open transaction (-1 if none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: DescribeProducersRequest) -> Response:
    topics = []
    for topic in request.topics:
        error = None
        if not authz.authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name):
            error = ErrorCode.topic_authorization_failed
        elif not ctx.metadata.has_topic(topic.name):
            error = ErrorCode.unknown_topic_or_partition
        parts = []
        for index in topic.partition_indexes:
            tp = TopicPartition(topic.name, int(index))
            parts.append(_partition(ctx, tp) if error is None
                         else {"partition_index": tp.partition, "error_code": error,
                               "active_producers": []})
        topics.append({"name": topic.name, "partitions": parts})
    return ctx.respond(topics=topics)


def _partition(ctx, tp: TopicPartition) -> dict[str, Any]:
    out: dict[str, Any] = {"partition_index": tp.partition, "active_producers": []}
    try:
        p = ctx.replica_manager.partition(tp)
    except KafkaError as exc:
        out["error_code"] = ctx.partition_error(tp, exc.code)
        out["error_message"] = exc.message
        return out
    if p.log is None:
        out["error_code"] = ErrorCode.not_leader_or_follower
        return out
    out["error_code"] = ErrorCode.none
    for pid, entry in sorted(p.log.producer_state.producers.items()):
        last_seq = entry.last_seq
        first = entry.current_txn_first_offset
        out["active_producers"].append({
            "producer_id": pid, "producer_epoch": entry.epoch,
            "last_sequence": -1 if last_seq is None else last_seq,
            "last_timestamp": entry.last_timestamp,
            "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": -1 if first is None else first,
        })
    return out

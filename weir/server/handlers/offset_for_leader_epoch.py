"""OffsetForLeaderEpoch (23): the end offset of a leader epoch (KIP-101/279, KIP-320)."""

from __future__ import annotations

from typing import Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4


async def handle(ctx, request) -> Any:
    rm = ctx.broker.replica_manager
    topics = []
    for topic in request.topics:
        parts = []
        for part in topic.partitions:
            tp = TopicPartition(topic.topic, int(part.partition))
            entry: dict[str, Any] = {"partition": tp.partition, "leader_epoch": -1,
                                     "end_offset": -1, "error_code": ErrorCode.none}
            try:
                _p, plog = rm.leader_log(tp, int(part.current_leader_epoch))
                epoch, end = plog.epoch_cache.end_offset_for(int(part.leader_epoch),
                                                             plog.log_end_offset)
                entry.update(leader_epoch=epoch, end_offset=end)
            except KafkaError as exc:
                entry["error_code"] = ctx.partition_error(tp, exc.code)
            parts.append(entry)
        topics.append({"topic": topic.topic, "partitions": parts})
    return ctx.respond(topics=topics)

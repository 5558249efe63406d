"""Produce (0): append record batches as leader; acks 0, 1 or all (-1)."""

from __future__ import annotations

from typing import Any

from weir.common import TopicPartition
from weir.groups.codec import OFFSETS_TOPIC
from weir.protocol import produce_response
from weir.protocol.errors import ErrorCode
from weir.replication.replica_manager import ProduceResult
from weir.server.context import RawResponse

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 9
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})


async def handle(ctx, request) -> Any:
    broker = ctx.broker
    acks = int(request.acks)
    entries: dict[TopicPartition, bytes] = {}
    results: dict[TopicPartition, ProduceResult] = {}
    for topic in request.topic_data:
        for part in topic.partition_data:
            tp = TopicPartition(topic.name, int(part.index))
            if acks not in (-1, 0, 1):
                results[tp] = ProduceResult(ErrorCode.invalid_required_acks,
                                            message=f"acks={acks} is not one of -1, 0, 1")
            elif request.transactional_id is not None:
                results[tp] = ProduceResult(ErrorCode.transactional_id_authorization_failed,
                                            message="transactions are not supported")
            elif topic.name in INTERNAL_TOPICS:
                # Kafka's ReplicaManager.appendToLocalLog: clients may not write to the
                # internal topics; only the coordinators do, through the replica manager.
                results[tp] = ProduceResult(ErrorCode.invalid_topic_exception,
                                            message=f"Cannot append to internal topic "
                                                    f"{topic.name}")
            elif not part.records:
                results[tp] = ProduceResult(ErrorCode.corrupt_message, message="no records")
            else:
                entries[tp] = part.records
    if entries:
        timeout_ms = int(request.timeout.total_seconds() * 1000)
        results.update(await broker.replica_manager.append(acks, timeout_ms, entries))
    if acks == 0:
        return None
    for tp, result in results.items():
        result.error = ctx.partition_error(tp, result.error)
    by_topic: dict[str, list[produce_response.PartitionResult]] = {}
    for tp, r in results.items():
        by_topic.setdefault(tp.topic, []).append((
            tp.partition, int(r.error), r.base_offset, r.log_append_time_ms,
            r.log_start_offset, r.message if r.error != ErrorCode.none else None,
        ))
    return RawResponse(produce_response.encode(ctx.version, by_topic.items()))

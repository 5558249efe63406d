"""Sending transaction markers to partition leaders (Kafka's TransactionMarkerChannelManager
and TransactionMarkerRequestCompletionHandler).

One WriteTxnMarkers request (v1) per leader and round; each partition's answer decides
whether it is done, retried at its (possibly new) leader, or ends the sending.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest

from weir.common import TopicPartition, partitions_by_topic
from weir.protocol.client import BrokerConnection, BrokerConnections
from weir.protocol.codec import build
from weir.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

DONE = "done"
RETRY = "retry"
STOP = "stop"

# Kafka's TransactionMarkerRequestCompletionHandler, per partition.
_RETRIABLE = {
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
    ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out, ErrorCode.kafka_storage_error,
}
# The producer or coordinator epoch moved on: this transaction's markers are no longer ours.
_STOP = {ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced}
# The producer could not have written there: nothing to mark.
_SKIP = {ErrorCode.unsupported_for_message_format, ErrorCode.unsupported_version}


def classify(error: ErrorCode) -> str:
    if error == ErrorCode.none or error in _SKIP:
        return DONE
    if error in _STOP:
        return STOP
    if error not in _RETRIABLE:
        log.error("unexpected error %s writing a transaction marker; retrying", error.name)
    return RETRY


class MarkerSender:
    """Connections to the partition leaders over the inter-broker listener."""

    def __init__(self, broker_id: int, metadata: Any, listener: str, security: Any = None,
                 connect: Callable[..., BrokerConnection] | None = None,
                 request_timeout_s: float = 30.0) -> None:
        """``metadata`` is the broker's metadata cache, ``listener`` the inter-broker
        listener's name and ``security`` its client-side TLS/SASL settings."""
        self.broker_id = broker_id
        self.metadata = metadata
        self.listener = listener
        self.security = security
        self.request_timeout_s = request_timeout_s
        self._connections = BrokerConnections.on_listener(
            metadata, listener, f"broker-{broker_id}-txn-markers", security=security,
            connect=connect)

    async def close(self) -> None:
        await self._connections.close()

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The partition's leader, -2 when the topic is gone (nothing to mark), None while
        unknown."""
        cache = self.metadata
        if not cache.has_topic(tp.topic):
            return -2
        meta = cache.partition(tp)
        if meta is None:
            return -2
        if meta.leader < 0 or meta.leader not in cache.brokers:
            return None
        return meta.leader

    async def send(self, broker_id: int, producer_id: int, producer_epoch: int, commit: bool,
                   coordinator_epoch: int,
                   tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """One WriteTxnMarkers request; a failed connection is retried as not-leader."""
        by_topic = partitions_by_topic(tps)
        request = build(WriteTxnMarkersRequest, markers=[{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": p} for t, p in by_topic.items()]}])
        try:
            response = await self._connections.request(broker_id, request,
                                                       self.request_timeout_s)
        except (TimeoutError, ConnectionError, OSError) as exc:
            log.info("transaction markers to broker %d failed: %s", broker_id, exc)
            return dict.fromkeys(tps, ErrorCode.not_leader_or_follower)
        results = dict.fromkeys(tps, ErrorCode.unknown_server_error)
        for marker in response.markers:
            if int(marker.producer_id) != producer_id:
                continue
            for topic in marker.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, int(p.partition_index))
                    if tp in results:
                        results[tp] = ErrorCode(p.error_code)
        return results

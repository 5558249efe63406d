"""Transaction verification by partition leaders (KIP-890 part 1).

With ``transaction.partition.verification.enable`` (Kafka's default: true), the leader of a
partition receiving the first transactional batch of a producer that has no transaction
open there asks the producer's transaction coordinator — AddPartitionsToTxn v4 with
``verify_only`` — whether the partition was added to the transaction, before appending.
A late or stray batch (its transaction already aborted, say) is refused with
INVALID_TXN_STATE instead of opening a transaction nobody will ever end, which would hold
the last stable offset back forever.  Kafka's ``AddPartitionsToTxnManager`` and
``ReplicaManager.appendRecords`` post-verification error translation.

The guard that makes the answer count only for the append it was asked for lives in the
partition's producer state (:mod:`weir.storage.producer_state`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnRequest

from weir.common import TopicPartition, partitions_by_topic
from weir.protocol.client import BrokerConnections
from weir.protocol.codec import build
from weir.protocol.errors import ErrorCode
from weir.transactions.codec import TRANSACTION_STATE_TOPIC

__all__ = ["TxnVerifier", "translate"]

log = logging.getLogger(__name__)

# Kafka's ReplicaManager: verification failures older clients would not retry become
# NOT_ENOUGH_REPLICAS (retriable, no metadata refresh).
_RETRY_AS_NOT_ENOUGH_REPLICAS = {
    ErrorCode.concurrent_transactions, ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
}


# Kafka's AddPartitionsToTxnManager: producers expect INVALID_PRODUCER_EPOCH when fenced,
# and Produce up to v11 knows "not in the transaction" as INVALID_TXN_STATE.
_PARTITION_ERRORS = {
    ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
    ErrorCode.transaction_abortable: ErrorCode.invalid_txn_state,
}


def translate(error: ErrorCode) -> ErrorCode:
    """The Produce error for a partition whose verification failed with ``error``."""
    return ErrorCode.not_enough_replicas if error in _RETRY_AS_NOT_ENOUGH_REPLICAS else error


class TxnVerifier:
    """Verify-only AddPartitionsToTxn requests to transaction coordinators."""

    def __init__(self, broker_id: int, metadata: Any, listener: str,
                 coordinator_partition: Callable[[str], int], security: Any = None,
                 request_timeout_s: float = 30.0, connect: Any = None) -> None:
        """``metadata`` is the broker's metadata cache, ``listener`` the inter-broker
        listener's name, ``coordinator_partition`` the ``__transaction_state`` partition of
        a transactional id (the transaction coordinator's placement); ``connect`` builds a
        connection (default: TCP, ``BrokerConnection``; ``BrokerCore``'s ``connect`` when
        it was given one: the simulation's network, ``weir.sim.node``)."""
        self.broker_id = broker_id
        self.metadata = metadata
        self.listener = listener
        self._coordinator_partition = coordinator_partition
        self.security = security
        self.request_timeout_s = request_timeout_s
        self._connections = BrokerConnections.on_listener(
            metadata, listener, f"broker-{broker_id}-txn-verify", security=security,
            connect=connect)

    async def close(self) -> None:
        await self._connections.close()

    def _coordinator(self, transactional_id: str) -> int | None:
        index = self._coordinator_partition(transactional_id)
        meta = self.metadata.partition(TopicPartition(TRANSACTION_STATE_TOPIC, index))
        if meta is None or meta.leader < 0:
            return None
        return meta.leader

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's verdict per partition (NONE: it is in the transaction)."""
        coordinator = self._coordinator(transactional_id)
        if coordinator is None:
            return dict.fromkeys(tps, ErrorCode.coordinator_not_available)
        by_topic = partitions_by_topic(tps)
        request = build(AddPartitionsToTxnRequest, transactions=[{
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "verify_only": True,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()]}])
        try:
            response = await self._connections.request(coordinator, request,
                                                       self.request_timeout_s)
        except (TimeoutError, ConnectionError, OSError) as exc:
            log.info("transaction verification at broker %d failed: %s", coordinator, exc)
            return dict.fromkeys(tps, ErrorCode.network_exception)
        top = ErrorCode(response.error_code)
        if top != ErrorCode.none:
            # Kafka: a broker refused as not CLUSTER_ACTION cannot verify: INVALID_TXN_STATE.
            error = (ErrorCode.invalid_txn_state if top == ErrorCode.cluster_authorization_failed
                     else top)
            return dict.fromkeys(tps, error)
        errors = dict.fromkeys(tps, ErrorCode.none)
        for txn in response.results_by_transaction:
            if txn.transactional_id != transactional_id:
                continue
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    tp = TopicPartition(topic.name, int(p.partition_index))
                    code = ErrorCode(p.partition_error_code)
                    if tp in errors and code != ErrorCode.none:
                        errors[tp] = _PARTITION_ERRORS.get(code, code)
        return errors

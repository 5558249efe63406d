"""WriteTxnMarkers (27): a transaction coordinator's COMMIT/ABORT markers (KIP-98).

As Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``: the caller needs ALTER on the cluster
or CLUSTER_ACTION (else every partition is CLUSTER_AUTHORIZATION_FAILED); each marker is
appended, as this broker leads the partition, as one control batch of the producer (its id
and epoch, :mod:`weir.records.control`) with origin COORDINATOR and acks=all, waiting up
to ``request.timeout.ms``.  Per partition the answer is the append's error: UNKNOWN_TOPIC_
OR_PARTITION when no replica is hosted here, NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH
for a producer epoch older than the partition's, TRANSACTION_COORDINATOR_FENCED for a
coordinator epoch older than the last marker's, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT.
Once a marker is in a ``__consumer_offsets`` partition, the group coordinator materializes
(COMMIT) or drops (ABORT) the producer's pending transactional offset commits there
(Kafka's ``GroupCoordinator.onTransactionCompleted``).

Kafka 3.9 serves v0-1; kio has v1 (flexible) only, so that is what Weir serves.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.groups.codec import OFFSETS_TOPIC
from weir.protocol.errors import ErrorCode
from weir.records.control import build_marker
from weir.security.acls import AclOperation
from weir.server import authz
from weir.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 1
DEFAULT_REQUEST_TIMEOUT_MS = 30000

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> Response:
    allowed = (authz.authorize_cluster(ctx, AclOperation.ALTER, log_if_denied=False)
               or authz.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION))
    if not allowed:
        return ctx.respond(markers=[_result(m, lambda _tp: ErrorCode.cluster_authorization_failed)
                                    for m in request.markers])
    outcomes = await asyncio.gather(*(_write(ctx, marker) for marker in request.markers))
    return ctx.respond(markers=[_result(m, errors.__getitem__)
                                for m, errors in zip(request.markers, outcomes, strict=True)])


def _partitions(marker) -> list[TopicPartition]:
    return [TopicPartition(t.name, int(p)) for t in marker.topics for p in t.partition_indexes]


def _result(marker, error_of) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in _partitions(marker):
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": error_of(tp)})
    return {"producer_id": marker.producer_id,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


async def _write(ctx, marker) -> dict[TopicPartition, ErrorCode]:
    """Append one marker to each of its partitions; the error per partition."""
    rm = ctx.replica_manager
    pid, committed = int(marker.producer_id), bool(marker.transaction_result)
    errors: dict[TopicPartition, ErrorCode] = {}
    entries: dict[TopicPartition, bytes] = {}
    now = rm.clock()  # the broker's clock (the replica manager's: virtual in the simulation)
    for tp in _partitions(marker):
        p = rm.partitions.get(tp)
        if p is None or p.log is None:  # Kafka: replicaManager.getMagic is None
            errors[tp] = ErrorCode.unknown_topic_or_partition
            continue
        entries[tp] = build_marker(pid, int(marker.producer_epoch), committed,
                                   int(marker.coordinator_epoch), now)
    if entries:
        timeout = int(ctx.config.get("request.timeout.ms") or DEFAULT_REQUEST_TIMEOUT_MS)
        results = await rm.append(-1, timeout, entries, origin=AppendOrigin.COORDINATOR)
        for tp, result in results.items():
            errors[tp] = result.error
            if result.error == ErrorCode.none and tp.topic == OFFSETS_TOPIC:
                errors[tp] = _complete_offsets(ctx, tp, pid, committed)
    return errors


def _complete_offsets(ctx, tp: TopicPartition, producer_id: int,
                      committed: bool) -> ErrorCode:
    """Hand the decided transaction to the group coordinator (its pending offsets)."""
    hook = getattr(ctx.group_coordinator, "on_txn_marker", None)
    if hook is None:
        return ErrorCode.none
    try:
        hook(tp, producer_id, committed)
    except Exception:
        log.exception("completing transactional offsets of producer %d in %s failed",
                      producer_id, tp)
        return ErrorCode.unknown_server_error
    return ErrorCode.none

"""AddPartitionsToTxn (24): partitions join a producer's transaction (KIP-98).

v0–3 come from clients (one transaction; WRITE on the transactional id and on each topic);
v4+ batch transactions and come from brokers (CLUSTER_ACTION), usually ``verify_only``
(KIP-890). One failing partition fails the whole transaction: the others get
OPERATION_NOT_ATTEMPTED, as Kafka's handleAddPartitionsToTxnRequest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz
from weir.server.handlers._txn import fenced_for_version
from weir.server.handlers.produce import INTERNAL_TOPICS

if TYPE_CHECKING:
    from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5


def _results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "partition_error_code": error})
    return [{"name": t, "results_by_partition": r} for t, r in by_topic.items()]


async def _one(ctx, txn_id: str, pid: int, epoch: int, topics, verify_only: bool,
               from_client: bool) -> dict[TopicPartition, ErrorCode]:
    # Request order, each partition once: the response lists them so (Kafka builds it from
    # the request's partitions in order).
    tps = list(dict.fromkeys(TopicPartition(t.name, int(p))
                             for t in topics for p in t.partitions))
    if from_client and not authz.authorize(ctx, AclOperation.WRITE,
                                           ResourceType.TRANSACTIONAL_ID, txn_id):
        return dict.fromkeys(tps, ErrorCode.transactional_id_authorization_failed)
    failed: dict[TopicPartition, ErrorCode] = {}
    allowed: dict[str, bool] = {}
    for tp in tps:
        if from_client and tp.topic not in allowed:
            # Kafka authorizes only non-internal topics here: a client cannot add an
            # internal topic's partition (AddOffsetsToTxn adds __consumer_offsets).
            allowed[tp.topic] = tp.topic not in INTERNAL_TOPICS and authz.authorize(
                ctx, AclOperation.WRITE, ResourceType.TOPIC, tp.topic)
        if from_client and not allowed[tp.topic]:
            failed[tp] = ErrorCode.topic_authorization_failed
        elif ctx.metadata.partition(tp) is None:
            failed[tp] = ErrorCode.unknown_topic_or_partition
    if failed:
        return {tp: failed.get(tp, ErrorCode.operation_not_attempted) for tp in tps}
    coordinator = ctx.txn_coordinator
    if verify_only:
        verified = coordinator.verify_partitions(txn_id, pid, epoch, set(tps))
        return {tp: verified[tp] for tp in tps}
    error = await coordinator.add_partitions(txn_id, pid, epoch, set(tps))
    return dict.fromkeys(tps, fenced_for_version(error, ctx.version, 2))


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> Response:
    if ctx.version <= 3:
        errors = await _one(ctx, request.v3_and_below_transactional_id,
                            int(request.v3_and_below_producer_id),
                            int(request.v3_and_below_producer_epoch),
                            request.v3_and_below_topics, False, True)
        return ctx.respond(results_by_topic_v3_and_below=_results(errors))
    if not authz.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return ctx.respond(error_code=ErrorCode.cluster_authorization_failed)
    results = []
    for txn in request.transactions:
        errors = await _one(ctx, txn.transactional_id, int(txn.producer_id),
                            int(txn.producer_epoch), txn.topics, bool(txn.verify_only), False)
        results.append({"transactional_id": txn.transactional_id, "topic_results": _results(errors)})
    return ctx.respond(error_code=ErrorCode.none, results_by_transaction=results)

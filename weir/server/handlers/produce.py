"""Produce (0): append record batches as leader; acks 0, 1 or all (-1).

v0-2 carry message format v0/v1 message sets, up-converted to one v2 batch each
(:mod:`weir.records.legacy`), as Kafka's LogValidator does for a log of format v2.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.groups.codec import OFFSETS_TOPIC
from weir.protocol import produce_request, produce_response
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records import legacy
from weir.records.batch import ATTRIBUTES_OFFSET, MAGIC_OFFSET, TRANSACTIONAL_BIT, parse_header
from weir.replication.replica_manager import ProduceResult
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz
from weir.server.context import RawResponse
from weir.server.txn_verification import translate
from weir.transactions.codec import TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from kio.schema.produce.v11.request import ProduceRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Answer

API_KEY = 0
MIN_VERSION = 0
MAX_VERSION = 11
# Consecutive Produce requests on a connection are pipelined: each one's append happens in
# request order, in its call, while their waits for replication (acks=all) overlap.
PIPELINED = True
# The hot path: v3-v11 read by hand; anything unusual is left to kio's decoder (None).
decode_request = produce_request.decode
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def handle(ctx: RequestContext, request: ProduceRequest) -> Answer:
    """The checks and the append happen in the call (in request order, also for the
    pipelined requests of a connection); the response now, or, for ``acks=all`` whose
    followers have yet to catch up, an awaitable of it (the request's ``DelayedProduce``
    in the produce purgatory).  A KIP-890 verification must ask the transaction
    coordinator before the append: then all of it is the awaitable."""
    if _needs_verification(ctx, getattr(request, "transactional_id", None), False):
        return _verified(ctx, request)
    acks, entries, results, txn_denied, _tid = _collect(ctx, request)
    if not entries:
        return _response(ctx, acks, results, txn_denied)
    appended, wait = ctx.replica_manager.append_now(acks, _timeout_ms(request), entries)
    results.update(appended)
    if wait is None:
        return _response(ctx, acks, results, txn_denied)
    return _replicated(ctx, acks, results, txn_denied, wait)


async def _replicated(ctx: RequestContext, acks: int,
                      results: dict[TopicPartition, ProduceResult], txn_denied: bool,
                      wait: Awaitable[None]) -> Any:
    await wait
    return _response(ctx, acks, results, txn_denied)


async def _verified(ctx: RequestContext, request: ProduceRequest) -> Any:
    acks, entries, results, txn_denied, transactional_id = _collect(ctx, request)
    verification = None
    if entries and _needs_verification(ctx, transactional_id, txn_denied):
        verification = await _verify(ctx, transactional_id, entries, results)
    if entries:
        results.update(await ctx.replica_manager.append(
            acks, _timeout_ms(request), entries, verification=verification))
    return _response(ctx, acks, results, txn_denied)


def _timeout_ms(request) -> int:
    """The request's timeout in ms (the hand decoder's attribute, or kio's timedelta)."""
    timeout_ms = getattr(request, "timeout_ms", None)
    return int(request.timeout.total_seconds() * 1000) if timeout_ms is None else timeout_ms


def _needs_verification(ctx, transactional_id: str | None, txn_denied: bool) -> bool:
    return transactional_id is not None and not txn_denied \
        and bool(ctx.config.get("transaction.partition.verification.enable"))


def _collect(ctx, request) -> tuple[int, dict[TopicPartition, bytes],
                                    dict[TopicPartition, ProduceResult], bool, str | None]:
    """(acks, the records to append per partition, the partitions refused already, whether
    the transactional id was refused, the transactional id)."""
    acks = int(request.acks)
    entries: dict[TopicPartition, bytes] = {}
    results: dict[TopicPartition, ProduceResult] = {}
    # Kafka's handleProduceRequest: WRITE on each topic, asked once per topic.
    allowed = {t.name: authz.authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, t.name)
               for t in request.topic_data} if authz.enabled(ctx) else None
    transactional_id = getattr(request, "transactional_id", None)
    # Kafka's handleProduceRequest (KIP-98): transactional records need a transactional id
    # the principal may WRITE, or the whole request fails.
    txn_denied = _has_transactional_records(request) and (
        transactional_id is None or not authz.authorize(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id))
    version = ctx.header.api_version
    for topic in request.topic_data:
        for part in topic.partition_data:
            tp = TopicPartition(topic.name, int(part.index))
            if acks not in (-1, 0, 1):
                results[tp] = ProduceResult(ErrorCode.invalid_required_acks,
                                            message=f"acks={acks} is not one of -1, 0, 1")
            elif allowed is not None and not allowed[topic.name]:
                results[tp] = ProduceResult(ErrorCode.topic_authorization_failed)
            elif txn_denied:
                results[tp] = ProduceResult(ErrorCode.transactional_id_authorization_failed)
            elif topic.name in INTERNAL_TOPICS:
                # Kafka's ReplicaManager.appendToLocalLog: clients may not write to the
                # internal topics; only the coordinators do, through the replica manager.
                results[tp] = ProduceResult(ErrorCode.invalid_topic_exception,
                                            message=f"Cannot append to internal topic "
                                                    f"{topic.name}")
            elif not part.records:
                results[tp] = ProduceResult(ErrorCode.corrupt_message, message="no records")
            elif version < 3:
                try:
                    entries[tp] = legacy.up_convert(part.records)
                except KafkaError as exc:
                    results[tp] = ProduceResult(exc.code, message=exc.message)
            else:
                entries[tp] = part.records
    return acks, entries, results, txn_denied, transactional_id


def _response(ctx, acks: int, results: dict[TopicPartition, ProduceResult],
              txn_denied: bool) -> Any:
    if acks == 0:
        return None
    version = ctx.header.api_version
    if not txn_denied and len(results) == 1:
        # The common request: one partition (librdkafka sends one request per partition
        # leader and batch); appended, or refused with no leader hint to look up.
        ((tp, r),) = results.items()
        if r.error == ErrorCode.none or (
                r.error != ErrorCode.unknown_topic_or_partition and version < 10):
            return RawResponse(produce_response.encode_one(
                version, tp.topic, tp.partition, int(r.error), r.base_offset,
                r.log_append_time_ms, r.log_start_offset,
                r.message if r.error != ErrorCode.none else None, r.record_errors))
    if txn_denied:
        for result in results.values():
            result.error = ErrorCode.transactional_id_authorization_failed
    for tp, result in results.items():
        if result.error != ErrorCode.topic_authorization_failed:
            result.error = ctx.partition_error(tp, result.error)
    by_topic: dict[str, list[produce_response.PartitionResult]] = {}
    for tp, r in results.items():
        by_topic.setdefault(tp.topic, []).append((
            tp.partition, int(r.error), r.base_offset, r.log_append_time_ms,
            r.log_start_offset, r.message if r.error != ErrorCode.none else None,
        ))
    leaders: dict[tuple[str, int], tuple[int, int]] = {}
    endpoints = []
    if ctx.version >= 10:  # KIP-951: where the partitions refused here are led now
        for tp, r in results.items():
            if r.error != ErrorCode.not_leader_or_follower:
                continue
            meta = ctx.metadata.partition(tp)
            if meta is not None and meta.leader >= 0:
                leaders[(tp.topic, tp.partition)] = (meta.leader, meta.leader_epoch)
        for leader_id in sorted({leader for leader, _ in leaders.values()}):
            b = ctx.metadata.broker_on(leader_id, ctx.listener)
            if b is not None:
                endpoints.append((b.id, b.host, b.port, b.rack))
    record_errors = {(tp.topic, tp.partition): r.record_errors
                     for tp, r in results.items() if r.record_errors}  # KIP-467
    return RawResponse(produce_response.encode(ctx.version, by_topic.items(), leaders,
                                               endpoints, record_errors))


def _has_transactional_records(request) -> bool:
    """Kafka's ``ProduceRequest.hasTransactionalRecords``: the first batch of some
    partition has the transactional attribute (magic v2 only)."""
    for topic in request.topic_data:
        for part in topic.partition_data:
            records = part.records
            if records and len(records) > ATTRIBUTES_OFFSET + 1 \
                    and records[MAGIC_OFFSET] == 2 \
                    and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_BIT:
                return True
    return False


async def _verify(ctx, transactional_id: str, entries: dict[TopicPartition, bytes],
                  results: dict[TopicPartition, ProduceResult]
                  ) -> dict[TopicPartition, object | None]:
    """KIP-890 (Kafka's ReplicaManager.appendRecords with verification): start a
    verification on each partition whose producer has no transaction open there, ask the
    coordinator once for all of them, and take the refused partitions out of ``entries``
    (their results set).  The guards, for the append."""
    rm = ctx.replica_manager
    guards: dict[TopicPartition, object | None] = {}
    pending: list[TopicPartition] = []
    producer = None
    for tp, records in list(entries.items()):
        try:
            header = parse_header(records)
        except KafkaError:
            continue  # the append reports the corrupt records
        if not header.is_transactional or header.producer_id < 0:
            continue
        producer = (header.producer_id, header.producer_epoch)
        try:
            guards[tp] = rm.start_transaction_verification(
                tp, header.producer_id, header.base_sequence, header.producer_epoch)
        except KafkaError as exc:
            results[tp] = ProduceResult(exc.code, message=exc.message)
            del entries[tp]
            continue
        if guards[tp] is not None:
            pending.append(tp)
    if pending and producer is not None:
        verdicts = await ctx.txn_verifier.verify(transactional_id, *producer, pending)
        for tp, error in verdicts.items():
            if error != ErrorCode.none:
                results[tp] = ProduceResult(
                    translate(error),
                    message="Partition was not added to the transaction"
                    if error == ErrorCode.invalid_txn_state else
                    f"Unable to verify the partition has been added to the transaction: "
                    f"{error.name}")
                entries.pop(tp, None)
    return guards

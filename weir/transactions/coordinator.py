"""The transaction coordinator: the asyncio shell around :mod:`weir.transactions.state`
(Kafka's TransactionCoordinator and TransactionStateManager).

It owns the ``__transaction_state`` partitions this broker leads (loaded when leadership
arrives, dropped when it goes), writes every state change of a transactional id to its
partition with acks=all before answering, sends the markers of ending transactions to the
partition leaders (:mod:`weir.transactions.markers`), resumes the markers of transactions
found in PrepareCommit/PrepareAbort after a failover, and aborts transactions that outlive
their timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from weir.common import TopicPartition
from weir.config import BrokerConfig, default_value
from weir.coordinator_runtime import (
    SYSTEM_CLOCK,
    Clock,
    CoordinatorLog,
    CoordinatorPartition,
    CoordinatorShell,
    Loading,
    MetadataView,
    read_batches,
)
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import parse_header
from weir.records.builder import build_batch
from weir.records.records import iter_records
from weir.transactions import codec
from weir.transactions.codec import TRANSACTION_STATE_TOPIC
from weir.transactions.markers import DONE, STOP, classify
from weir.transactions.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    STATE_BY_NAME,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    init_producer_id_valid,
    prepare_add_partitions,
    prepare_end,
)

__all__ = ["InitResult", "Loading", "TransactionCoordinator", "TransactionCoordinatorSettings",
           "TxnPartition"]

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0  # markers to a broker that keeps failing (reconnect backoff)

# Kafka's TransactionStateManager.appendTransactionToLog error mapping.
_WRITE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
}


@dataclass(frozen=True)
class TransactionCoordinatorSettings:
    """The broker keys the transaction coordinator reads (Kafka's TransactionConfig)."""

    broker_id: int
    transaction_state_log_num_partitions: int = default_value(
        "transaction.state.log.num.partitions")
    transaction_max_timeout_ms: int = default_value("transaction.max.timeout.ms")
    request_timeout_ms: int = default_value("request.timeout.ms")
    abort_timed_out_interval_ms: int = default_value(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms")
    remove_expired_interval_ms: int = default_value(
        "transaction.remove.expired.transaction.cleanup.interval.ms")
    transactional_id_expiration_ms: int = default_value("transactional.id.expiration.ms")

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TransactionCoordinatorSettings:
        return cls(
            broker_id=config.broker_id,
            transaction_state_log_num_partitions=config.transaction_state_log_num_partitions,
            transaction_max_timeout_ms=config.transaction_max_timeout_ms,
            request_timeout_ms=config.request_timeout_ms,
            abort_timed_out_interval_ms=(
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms),
            remove_expired_interval_ms=(
                config.transaction_remove_expired_transaction_cleanup_interval_ms),
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        )


class ProducerIdSource(Protocol):
    """Blocks of producer ids (Kafka's ProducerIdManager)."""

    async def next_id(self) -> int: ...


class MarkerChannel(Protocol):
    """Sends transaction markers to partition leaders (weir.transactions.markers.MarkerSender,
    Kafka's TransactionMarkerChannelManager)."""

    def leader_of(self, tp: TopicPartition) -> int | None: ...

    async def send(self, broker_id: int, producer_id: int, producer_epoch: int, commit: bool,
                   coordinator_epoch: int,
                   tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]: ...

    async def close(self) -> None: ...


@dataclass
class TxnPartition(CoordinatorPartition):
    """One ``__transaction_state`` partition this broker leads; ``epoch`` is its leader
    epoch, the coordinator epoch the markers carry."""

    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator(CoordinatorShell[TxnPartition, dict[str, TransactionMetadata]]):
    topic = TRANSACTION_STATE_TOPIC
    reload_on_new_epoch = True  # a new epoch reloads: transactions in flight are resumed

    def __init__(self, settings: TransactionCoordinatorSettings, metadata: MetadataView,
                 log: CoordinatorLog, producer_ids: ProducerIdSource, sender: MarkerChannel,
                 *, clock: Clock = SYSTEM_CLOCK,
                 create_topic: Callable[[], Awaitable[None]] | None = None) -> None:
        super().__init__(broker_id=settings.broker_id, metadata=metadata,
                         default_partitions=settings.transaction_state_log_num_partitions,
                         clock=clock, create_topic=create_topic)
        self.settings = settings
        self.log = log
        self.producer_ids = producer_ids
        self.sender = sender

    def _now(self) -> int:
        return self.clock.now_ms()

    # -- the coordinator shell's part ---------------------------------------------------------

    async def stop(self) -> None:
        await super().stop()
        await self.sender.close()

    def _periodic_jobs(self) -> tuple[float, Any, list[tuple[float, Any]]]:
        return (self.settings.abort_timed_out_interval_ms / 1000, self.abort_timed_out,
                [(self.settings.remove_expired_interval_ms / 1000,
                  self.expire_transactional_ids)])

    def _new_partition(self, index: int, epoch: int) -> TxnPartition:
        return TxnPartition(index, epoch)

    def _on_unloaded(self, part: TxnPartition) -> None:
        log.info("resigned as transaction coordinator of %s-%d", TRANSACTION_STATE_TOPIC,
                 part.index)

    def partition_for(self, transactional_id: str) -> int:
        return codec.partition_for(transactional_id, self.num_partitions())

    def _owns(self, part: TxnPartition) -> bool:
        return self.owns(part)

    def _install(self, part: TxnPartition, state: dict[str, TransactionMetadata],
                 elapsed_ms: float) -> None:
        part.txns = state
        log.info("loaded %s-%d at coordinator epoch %d: %d transactional ids",
                 TRANSACTION_STATE_TOPIC, part.index, part.epoch, len(state))
        for txn_id, meta in state.items():
            # Kafka's loadTransactionsForTxnTopicPartition: transactions that were ending
            # when the previous coordinator stopped get their markers (again).
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                transit = meta.prepare_complete(self._now())
                self._spawn(self._complete_txn(part, txn_id, meta, transit))

    async def _scan(self, tp: TopicPartition) -> dict[str, TransactionMetadata]:
        latest: dict[str, TxnTransit | None] = {}
        async for batch in read_batches(self.log.log(tp)):
            try:
                for rec in iter_records(batch):
                    if rec.key is None:
                        continue
                    txn_id = codec.decode_key(rec.key)
                    if txn_id is not None:
                        latest[txn_id] = (None if rec.value is None
                                          else codec.decode_value(rec.value))
            except (KafkaError, codec.CorruptTxnRecord, UnicodeDecodeError) as exc:
                log.error("%s: skipping a corrupt record batch at offset %d: %s", tp,
                          parse_header(batch).base_offset, exc)
        return {txn_id: TransactionMetadata.from_transit(txn_id, t)
                for txn_id, t in latest.items() if t is not None and t.state != TxnState.DEAD}

    # -- lookups --------------------------------------------------------------------------------

    def _partition_of(self, transactional_id: str) -> TxnPartition:
        return self.loaded_partition(self.partition_for(transactional_id),
                                     f"transactional id {transactional_id!r}")

    def _existing(self, transactional_id: str) -> tuple[TxnPartition, TransactionMetadata]:
        if not transactional_id:
            raise KafkaError(ErrorCode.invalid_request, "the transactional id is empty")
        part = self._partition_of(transactional_id)
        meta = part.txns.get(transactional_id)
        if meta is None or meta.state == TxnState.DEAD:
            raise KafkaError(ErrorCode.invalid_producer_id_mapping,
                             f"no producer id is mapped to {transactional_id!r}")
        return part, meta

    async def find_coordinator(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """(error, node id) of the transactional id's coordinator; the first lookup creates
        ``__transaction_state``."""
        return await self.coordinator_for(
            lambda count: codec.partition_for(transactional_id, count))

    # -- writing the log ------------------------------------------------------------------------

    async def _append(self, part: TxnPartition, txn_id: str, meta: TransactionMetadata,
                      transit: TxnTransit) -> ErrorCode:
        """Persist ``transit`` and install it (Kafka's appendTransactionToLog); on failure
        the metadata stays as it was."""
        epoch = part.epoch
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, part.index)
        batch = build_batch([codec.encode_value(transit)], keys=[codec.encode_key(txn_id)],
                            timestamp_ms=self._now())
        try:
            error, _base = await self.log.append(tp, batch, self.settings.request_timeout_ms)
            error = _WRITE_ERRORS.get(error, error)
        except KafkaError as exc:
            error = _WRITE_ERRORS.get(exc.code, exc.code)
        if error == ErrorCode.none and not (self._owns(part) and part.epoch == epoch
                                            and part.txns.get(txn_id) is meta):
            error = ErrorCode.not_coordinator  # leadership moved while we wrote
        if error == ErrorCode.none:
            meta.complete(transit)
        else:
            log.info("writing %s of %r failed: %s", transit.state.kafka_name, txn_id, error.name)
            meta.abandon()
        return error

    # -- InitProducerId -------------------------------------------------------------------------

    def _validate_timeout(self, timeout_ms: int) -> None:
        if not 0 < timeout_ms <= self.settings.transaction_max_timeout_ms:
            raise KafkaError(ErrorCode.invalid_transaction_timeout,
                             f"transaction.timeout.ms {timeout_ms} is not in (0, "
                             f"{self.settings.transaction_max_timeout_ms}]")

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected_pid: int = -1, expected_epoch: int = -1) -> InitResult:
        """InitProducerId with a transactional id (Kafka's handleInitProducerId): a new epoch
        fences older producers; an open transaction is aborted first (the client retries
        after CONCURRENT_TRANSACTIONS). KIP-360: (pid, epoch) of the caller may be given."""
        try:
            if not transactional_id:
                raise KafkaError(ErrorCode.invalid_request, "the transactional id is empty")
            self._validate_timeout(timeout_ms)
            part = self._partition_of(transactional_id)
            meta = part.txns.get(transactional_id)
            if meta is None:
                pid = await self.producer_ids.next_id()
                part = self._partition_of(transactional_id)  # may have moved while we waited
                meta = part.txns.setdefault(transactional_id, TransactionMetadata(
                    transactional_id, pid, txn_timeout_ms=timeout_ms,
                    txn_last_update_timestamp=self._now()))
            return await self._init_existing(part, meta, timeout_ms, expected_pid,
                                             expected_epoch)
        except KafkaError as exc:
            return InitResult(exc.code)

    async def _init_existing(self, part: TxnPartition, meta: TransactionMetadata,
                             timeout_ms: int, expected_pid: int,
                             expected_epoch: int) -> InitResult:
        expected = expected_pid >= 0
        if meta.pending:
            raise KafkaError(ErrorCode.concurrent_transactions, "a state change is in progress")
        if expected and not init_producer_id_valid(meta, expected_pid, expected_epoch):
            raise KafkaError(ErrorCode.producer_fenced,
                             f"producer id {expected_pid} is not {meta.transactional_id}'s")
        state = meta.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise KafkaError(ErrorCode.concurrent_transactions, "a transaction is completing")
        if state == TxnState.ONGOING:
            # Fence the current producer and abort its transaction; the epoch of the fence is
            # never returned: the client retries and gets the next one.
            fence = meta.prepare_fence_producer_epoch()
            error = await self._end(part, meta, fence.producer_id, fence.producer_epoch,
                                    commit=False, from_client=False)
            raise KafkaError(error if error != ErrorCode.none
                             else ErrorCode.concurrent_transactions)
        if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            raise KafkaError(ErrorCode.invalid_txn_state, f"transactional id is {state.name}")
        now = self._now()
        if meta.is_producer_epoch_exhausted() and (not expected
                                                   or expected_epoch == meta.producer_epoch):
            new_pid = await self.producer_ids.next_id()
            transit = meta.prepare_producer_id_rotation(new_pid, timeout_ms, now, expected)
        else:
            transit = meta.prepare_increment_producer_epoch(
                timeout_ms, expected_epoch if expected else None, now)
        error = await self._append(part, meta.transactional_id, meta, transit)
        if error != ErrorCode.none:
            return InitResult(error)
        log.info("initialised transactional id %r: producer id %d epoch %d",
                 meta.transactional_id, transit.producer_id, transit.producer_epoch)
        return InitResult(ErrorCode.none, transit.producer_id, transit.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, tps: set[TopicPartition]) -> ErrorCode:
        try:
            part, meta = self._existing(transactional_id)
            transit = prepare_add_partitions(meta, producer_id, producer_epoch, tps, self._now())
        except KafkaError as exc:
            return exc.code
        if transit is None:
            return ErrorCode.none
        return await self._append(part, transactional_id, meta, transit)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          tps: set[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ verify-only (KIP-890): are the partitions in the
        transaction?"""
        try:
            _part, meta = self._existing(transactional_id)
            if meta.producer_id != producer_id:
                raise KafkaError(ErrorCode.invalid_producer_id_mapping)
            if meta.producer_epoch != producer_epoch:
                raise KafkaError(ErrorCode.producer_fenced)
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                raise KafkaError(ErrorCode.concurrent_transactions)
        except KafkaError as exc:
            return dict.fromkeys(tps, exc.code)
        return {tp: ErrorCode.none if tp in meta.partitions else ErrorCode.transaction_abortable
                for tp in tps}

    # -- EndTxn ---------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        try:
            part, meta = self._existing(transactional_id)
        except KafkaError as exc:
            return exc.code
        return await self._end(part, meta, producer_id, producer_epoch, commit, from_client=True)

    async def _end(self, part: TxnPartition, meta: TransactionMetadata, producer_id: int,
                   producer_epoch: int, commit: bool, from_client: bool) -> ErrorCode:
        """Kafka's endTransaction: write PrepareCommit/PrepareAbort, answer, then send the
        markers and write CompleteCommit/CompleteAbort."""
        txn_id = meta.transactional_id
        fencing = meta.pending_state == TxnState.PREPARE_EPOCH_FENCE
        try:
            transit = prepare_end(meta, producer_id, producer_epoch, commit, from_client,
                                  self._now())
        except KafkaError as exc:
            if fencing and meta.pending_state == TxnState.PREPARE_EPOCH_FENCE:
                meta.abandon()
            return exc.code
        if transit is None:
            return ErrorCode.none
        error = await self._append(part, txn_id, meta, transit)
        if error != ErrorCode.none:
            if fencing:
                meta.has_failed_epoch_fence = True
            return error
        complete = meta.prepare_complete(self._now())
        self._spawn(self._complete_txn(part, txn_id, meta, complete))
        return ErrorCode.none

    async def _complete_txn(self, part: TxnPartition, txn_id: str, meta: TransactionMetadata,
                            complete: TxnTransit) -> None:
        """Send the markers until every partition has one, then write the Complete state."""
        commit = complete.state == TxnState.COMPLETE_COMMIT
        remaining = set(meta.partitions)
        pid, epoch = meta.producer_id, meta.producer_epoch
        backoff = RETRY_BACKOFF_S
        while remaining:
            before = len(remaining)
            if not self._owns(part):
                return  # the next coordinator reloads and resends
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining):  # a fixed order (a set of names: hash-seeded)
                leader = self.sender.leader_of(tp)
                if leader == -2:
                    remaining.discard(tp)  # the topic is gone: nothing to mark
                elif leader is not None:
                    by_leader.setdefault(leader, []).append(tp)
            sends = [self.sender.send(leader, pid, epoch, commit, part.epoch, tps)
                     for leader, tps in by_leader.items()]
            for results in await asyncio.gather(*sends):
                for tp, error in results.items():
                    outcome = classify(error)
                    if outcome == STOP:
                        log.info("markers of %r stopped: %s", txn_id, error.name)
                        if self._owns(part) and meta.pending_state == complete.state:
                            meta.abandon()
                        return
                    if outcome == DONE:
                        remaining.discard(tp)
            if remaining:
                progress = len(remaining) < before
                backoff = RETRY_BACKOFF_S if progress else min(backoff * 2, MAX_BACKOFF_S)
                await asyncio.sleep(backoff)
        log.info("transaction of %r (producer id %d epoch %d) %s: markers written", txn_id,
                 pid, epoch, "committed" if commit else "aborted")
        while self._owns(part) and part.txns.get(txn_id) is meta:
            # Kafka's maybeWriteTxnCompletion: retried until written or no longer ours.
            if meta.pending_state != complete.state:
                complete = meta.prepare_complete(self._now())
            error = await self._append(part, txn_id, meta, complete)
            if error in (ErrorCode.none, ErrorCode.not_coordinator):
                return
            await asyncio.sleep(RETRY_BACKOFF_S)

    # -- timeouts and expiry --------------------------------------------------------------------

    def abort_timed_out(self, now: int) -> None:
        """Kafka's abortTimedOutTransactions: an Ongoing transaction older than its timeout
        is aborted with a bumped epoch (the producer is fenced)."""
        for part in self.loaded_partitions():
            for meta in list(part.txns.values()):
                if (meta.state == TxnState.ONGOING and not meta.pending
                        and meta.txn_start_timestamp + meta.txn_timeout_ms <= now):
                    log.info("aborting the timed-out transaction of %r (producer id %d)",
                             meta.transactional_id, meta.producer_id)
                    try:
                        fence = meta.prepare_fence_producer_epoch()
                    except KafkaError as exc:
                        log.warning("cannot abort %r: %s", meta.transactional_id, exc.message)
                        continue
                    self._spawn(self._end(part, meta, fence.producer_id, fence.producer_epoch,
                                          commit=False, from_client=False))

    def expire_transactional_ids(self, now: int) -> None:
        """``transactional.id.expiration.ms``: an idle id whose last transaction ended that
        long ago is removed with a tombstone (Kafka's removeExpiredTransactionalIds)."""
        expiry = self.settings.transactional_id_expiration_ms
        for part in self.loaded_partitions():
            for txn_id, meta in list(part.txns.items()):
                if (meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                   TxnState.COMPLETE_ABORT) and not meta.pending
                        and meta.txn_last_update_timestamp + expiry <= now):
                    self._spawn(self._tombstone(part, txn_id, meta))

    async def _tombstone(self, part: TxnPartition, txn_id: str,
                         meta: TransactionMetadata) -> None:
        try:
            meta.prepare_dead()
        except KafkaError:
            return  # it moved on meanwhile
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, part.index)
        batch = build_batch([None], keys=[codec.encode_key(txn_id)], timestamp_ms=self._now())
        try:
            error, _base = await self.log.append(tp, batch, self.settings.request_timeout_ms)
        except KafkaError as exc:
            error = exc.code
        if error == ErrorCode.none and self._owns(part) and part.txns.get(txn_id) is meta:
            del part.txns[txn_id]
            meta.state, meta.pending_state = TxnState.DEAD, None
            log.info("expired transactional id %r", txn_id)
        else:
            meta.abandon()

    # -- DescribeTransactions / ListTransactions ------------------------------------------------

    def describe(self, transactional_id: str) -> dict[str, Any]:
        # An error leaves the other fields at the schema's defaults (zeros), as Kafka.
        entry: dict[str, Any] = {"transactional_id": transactional_id, "producer_id": 0,
                                 "producer_epoch": 0, "transaction_state": "",
                                 "transaction_timeout_ms": 0,
                                 "transaction_start_time_ms": 0, "topics": []}
        try:
            if not transactional_id:
                raise KafkaError(ErrorCode.invalid_request)
            meta = self._partition_of(transactional_id).txns.get(transactional_id)
            if meta is None or meta.state == TxnState.DEAD:
                raise KafkaError(ErrorCode.transactional_id_not_found)
        except KafkaError as exc:
            return {**entry, "error_code": exc.code}
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(meta.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return {**entry, "error_code": ErrorCode.none, "producer_id": meta.producer_id,
                "producer_epoch": meta.producer_epoch,
                "transaction_state": meta.state.kafka_name,
                "transaction_timeout_ms": meta.txn_timeout_ms,
                "transaction_start_time_ms": meta.txn_start_timestamp,
                "topics": [{"topic": t, "partitions": p} for t, p in by_topic.items()]}

    def list_transactions(self, producer_ids: set[int], states: set[str],
                          min_duration_ms: int = -1) -> tuple[ErrorCode, set[str], list]:
        """(error, unknown state filters, [(transactional id, producer id, state name)])."""
        unknown = {s for s in states if s not in STATE_BY_NAME}
        wanted = {STATE_BY_NAME[s] for s in states if s in STATE_BY_NAME}
        if self.loading():
            return ErrorCode.coordinator_load_in_progress, unknown, []
        error = ErrorCode.none
        found = []
        now = self._now()
        for part in self.partitions.values():
            for txn_id, meta in part.txns.items():
                if meta.state == TxnState.DEAD:
                    continue
                if producer_ids and meta.producer_id not in producer_ids:
                    continue
                if states and meta.state not in wanted:
                    continue
                if min_duration_ms >= 0 and now - meta.txn_start_timestamp < min_duration_ms:
                    continue
                found.append((txn_id, meta.producer_id, meta.state.kafka_name))
        return error, unknown, found


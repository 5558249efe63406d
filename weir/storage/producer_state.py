"""Producer state of one partition: idempotence (KIP-98) and transactions.

For every producer id we keep its epoch, the metadata of its last five batches (the window
a producer may retry within, ``max.in.flight.requests.per.connection`` ≤ 5), the epoch of the
transaction coordinator that wrote its last marker, its last timestamp and the first offset
of its open transaction — Kafka's ``ProducerStateEntry``.  Before a leader append the log
asks :meth:`ProducerStateManager.check_all`; after the append it feeds every batch to
:meth:`ProducerStateManager.apply`.

Validation follows Kafka's ``ProducerAppendInfo`` by :class:`AppendOrigin`:

* producer id -1: not idempotent, nothing to check;
* epoch below the known one: ``INVALID_PRODUCER_EPOCH`` (CLIENT and COORDINATOR appends;
  REPLICATION only logs);
* CLIENT data batches, same epoch: a batch whose (first, last) sequence matches one of the
  last five is a duplicate → the original offsets are returned; otherwise the first sequence
  must follow the last one (wrapping after 2**31 - 1), else ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
  a new epoch must start at sequence 0 — unless the producer is unknown here (its state went
  with retention, truncation or was never seen), which is accepted at any sequence, as
  Kafka 3.x (KIP-360 made UNKNOWN_PRODUCER_ID a thing of the past for partition leaders);
* a non-transactional data batch of a producer with an open transaction: ``INVALID_TXN_STATE``;
* a COMMIT/ABORT marker (control batch) whose coordinator epoch is below the one last seen:
  ``TRANSACTION_COORDINATOR_FENCED``.

Transactions (Kafka's ``ProducerStateManager``): a transactional data batch of a producer
with no open transaction starts one at its first offset (*ongoing*).  A marker ends it:
:meth:`apply` returns the :class:`CompletedTxn` and the last stable offset to record in the
aborted-transaction index, and the transaction stays *unreplicated* until the high
watermark passes its marker.  The first unstable offset is the smallest first offset of an
ongoing or unreplicated transaction; the log's LSO is that, bounded by the high watermark.

Transaction verification (KIP-890, ``transaction.partition.verification.enable``): before
the first transactional append of a producer with no open transaction here, the leader asks
the transaction coordinator whether the partition is in the transaction.  Meanwhile a
*verification entry* holds a unique guard object, the lowest sequence asked about and the
epoch (Kafka's ``VerificationStateEntry``); the append must bring back the same guard, and
any transactional append of the producer (data or marker) removes the entry — so a marker
written between the coordinator's answer and the append makes the append fail with
INVALID_TXN_STATE instead of opening a transaction nobody will end.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import INT32_MAX, BatchHeader
from weir.records.control import EndTxnMarker

__all__ = [
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerEntry",
    "ProducerStateManager",
]

log = logging.getLogger(__name__)

MAX_BATCHES_PER_PRODUCER = 5


class AppendOrigin(enum.Enum):
    """Kafka's ``AppendOrigin``: how much a leader append is validated."""

    CLIENT = "client"  # Produce: sequences, epochs, transaction state
    COORDINATOR = "coordinator"  # group/transaction coordinators, markers: epochs only
    REPLICATION = "replication"  # a follower copying the leader: nothing is refused


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker at ``last_offset`` (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER)
    )
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id, self.epoch, deque(self.batches, maxlen=MAX_BATCHES_PER_PRODUCER),
            self.coordinator_epoch, self.last_timestamp, self.current_txn_first_offset,
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        for meta in self.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None

    def set_epoch(self, epoch: int) -> None:
        """Kafka's ``maybeUpdateProducerEpoch``: a new epoch forgets the batch window."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch


@dataclass(slots=True)
class VerificationEntry:
    """Kafka's ``VerificationStateEntry``: ``guard`` is compared by identity."""

    guard: object
    lowest_seq: int
    epoch: int
    started_ms: int = 0

    def update(self, seq: int, epoch: int) -> None:
        """Kafka's ``maybeUpdateLowestSequenceAndEpoch``."""
        if epoch == self.epoch and seq < self.lowest_seq:
            self.lowest_seq = seq
        if epoch > self.epoch:
            self.epoch, self.lowest_seq = epoch, seq


def is_expired(entry: ProducerEntry, now_ms: int, expiration_ms: int) -> bool:
    """Kafka's ``isProducerExpired``: no open transaction and idle for ``expiration_ms``."""
    return (entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= expiration_ms)


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateManager:
    """Per-partition producer id → :class:`ProducerEntry`, plus open transactions."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}  # first offset → producer id (undecided)
        self._unreplicated: dict[int, int] = {}  # first offset → marker offset (≥ HW)
        self._verifying: dict[int, VerificationEntry] = {}  # KIP-890, by producer id

    @property
    def producers(self) -> dict[int, ProducerEntry]:
        """Read-only use: producer id → entry."""
        return self._producers

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    # -- transaction verification (KIP-890) ---------------------------------------------
    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self._producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None

    def maybe_start_verification(self, producer_id: int, seq: int, epoch: int,
                                 now_ms: int = 0) -> object | None:
        """The guard an append must carry after the coordinator verified the partition;
        None (nothing to verify) if the producer has a transaction open here (Kafka's
        ``UnifiedLog.maybeStartTransactionVerification``)."""
        if self.has_ongoing_transaction(producer_id):
            return None
        entry = self._verifying.get(producer_id)
        if entry is None:
            entry = self._verifying[producer_id] = VerificationEntry(object(), seq, epoch,
                                                                     now_ms)
        else:
            entry.update(seq, epoch)
        return entry.guard

    def verification_guard(self, producer_id: int) -> object | None:
        entry = self._verifying.get(producer_id)
        return None if entry is None else entry.guard

    def check_verified(self, headers: Iterable[BatchHeader], guard: object | None) -> None:
        """Kafka's ``batchMissingRequiredVerification``: a transactional data batch of a
        producer with no open transaction here needs the guard of its verification."""
        for h in headers:
            if (h.is_transactional and not h.is_control and h.producer_id >= 0
                    and not self.has_ongoing_transaction(h.producer_id)
                    and (guard is None or self.verification_guard(h.producer_id) is not guard)):
                raise KafkaError(ErrorCode.invalid_txn_state,
                                 "Record was not part of an ongoing transaction")

    # -- checks ------------------------------------------------------------------------
    def check(self, header: BatchHeader, origin: AppendOrigin = AppendOrigin.CLIENT,
              marker: EndTxnMarker | None = None) -> tuple[int, int] | None:
        """Validate one batch against current state; (first, last) offsets if duplicate."""
        if header.producer_id < 0:
            return None
        return _check_entry(self._producers.get(header.producer_id), header, origin, marker)

    def check_all(self, headers: Iterable[BatchHeader],
                  origin: AppendOrigin = AppendOrigin.CLIENT,
                  markers: dict[int, EndTxnMarker | None] | None = None,
                  ) -> tuple[int, int] | None:
        """Validate a whole append (several batches may share a producer id); ``markers``
        maps a control batch's position to its decoded marker.

        Returns the offsets of the first duplicate found, as Kafka does.

        A batch is checked against its producer's entry as the batches before it in the
        append left it: a copy advanced batch by batch (the entry itself changes only in
        :meth:`apply`).  The checks only read the entry, so the last batch (the only one of
        most appends) needs no copy nor advance."""
        scratch: dict[int, ProducerEntry] = {}
        headers = headers if isinstance(headers, list) else list(headers)
        last = len(headers) - 1
        for i, header in enumerate(headers):
            if header.producer_id < 0:
                continue
            pid = header.producer_id
            entry = scratch.get(pid)
            copied = entry is not None
            if entry is None:
                entry = self._producers.get(pid)
            marker = markers.get(header.position) if markers else None
            self._check_verification_sequence(header, origin)
            duplicate = _check_entry(entry, header, origin, marker)
            if duplicate is not None:
                return duplicate
            if i < last:
                if entry is not None and not copied:
                    entry = entry.copy()
                scratch[pid], _done = _advance(entry, header, marker)
        return None

    def _check_verification_sequence(self, header: BatchHeader, origin: AppendOrigin) -> None:
        """Kafka's ``checkSequence``: while a verification is pending, no sequence above the
        lowest one it asked about may be written."""
        entry = self._verifying.get(header.producer_id)
        if (origin is AppendOrigin.CLIENT and entry is not None and not header.is_control
                and header.base_sequence > entry.lowest_seq):
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"producer {header.producer_id}: sequence {header.base_sequence} is above the "
                f"lowest sequence {entry.lowest_seq} being verified")

    # -- updates -----------------------------------------------------------------------
    def apply(self, header: BatchHeader, marker: EndTxnMarker | None = None,
              ) -> tuple[CompletedTxn, int] | None:
        """Record an appended batch (its offsets are final).

        For a marker ending a transaction: the completed transaction and the last stable
        offset to store with it in the aborted-transaction index (Kafka's
        ``lastStableOffset(completedTxn)``: the first offset of the earliest *other* open
        transaction, else the marker's offset + 1); the transaction is then unreplicated."""
        if header.producer_id < 0:
            return None
        pid = header.producer_id
        current = self._producers.get(pid)
        if current is not None and header.producer_epoch < current.epoch:
            log.warning("producer %d epoch %d at offset %d is older than epoch %d", pid,
                        header.producer_epoch, header.base_offset, current.epoch)
        entry, completed = _advance(current, header, marker)
        self._producers[pid] = entry
        if header.is_transactional:  # the transaction started or ended: verified or moot
            self._verifying.pop(pid, None)
        if completed is None:
            first = entry.current_txn_first_offset
            if first is not None and self._ongoing.get(first) != pid:
                self._ongoing[first] = pid  # a transaction begins
            return None
        lso = completed.last_offset + 1
        others = [f for f, p in self._ongoing.items() if p != pid]
        if others:
            lso = min(others)
        self._ongoing.pop(completed.first_offset, None)
        self._unreplicated[completed.first_offset] = completed.last_offset
        return completed, lso

    def load_entries(self, entries: Iterable[ProducerEntry]) -> None:
        """Start from snapshot entries (Kafka's ``loadProducerEntry``)."""
        self.clear()
        for entry in entries:
            self._producers[entry.producer_id] = entry
            if entry.current_txn_first_offset is not None:
                self._ongoing[entry.current_txn_first_offset] = entry.producer_id

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._verifying.clear()

    # -- stability ---------------------------------------------------------------------
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest undecided or unreplicated transaction (asked at
        every read of a partition: without transactions, two emptiness tests)."""
        ongoing, unreplicated = self._ongoing, self._unreplicated
        if not ongoing:
            return min(unreplicated) if unreplicated else None
        return min(min(ongoing), min(unreplicated)) if unreplicated else min(ongoing)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Transactions whose marker is below the HW are replicated: the LSO may pass them."""
        if self._unreplicated:  # else nothing to do (the usual: no marker awaits replication)
            self._remove_unreplicated(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated(log_start_offset)

    def _remove_unreplicated(self, offset: int) -> None:
        if not self._unreplicated:  # no transaction marker awaits replication (the usual)
            return
        for first, last in list(self._unreplicated.items()):
            if last < offset:
                del self._unreplicated[first]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's ``removeExpiredProducers`` (``producer.id.expiration.ms``): forget the
        producers with no open transaction whose last timestamp is that old, and the
        verification entries started that long ago; returns how many producers went."""
        expired = [pid for pid, e in self._producers.items()
                   if is_expired(e, now_ms, expiration_ms)]
        for pid in expired:
            del self._producers[pid]
        for pid, v in list(self._verifying.items()):
            if now_ms - v.started_ms >= expiration_ms:
                del self._verifying[pid]
        return len(expired)


def _check_entry(entry: ProducerEntry | None, header: BatchHeader, origin: AppendOrigin,
                 marker: EndTxnMarker | None) -> tuple[int, int] | None:
    if entry is None or origin is AppendOrigin.REPLICATION:
        return None
    pid, epoch = header.producer_id, header.producer_epoch
    if epoch < entry.epoch:
        raise KafkaError(
            ErrorCode.invalid_producer_epoch,
            f"producer {pid} epoch {epoch} is older than current epoch {entry.epoch}",
        )
    if header.is_control:
        if marker is not None and marker.coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.transaction_coordinator_fenced,
                f"producer {pid}: coordinator epoch {marker.coordinator_epoch} is older "
                f"than {entry.coordinator_epoch}",
            )
        return None
    if origin is AppendOrigin.CLIENT and header.base_sequence >= 0:
        duplicate = _check_sequence(entry, header)
        if duplicate is not None:
            return duplicate
    if entry.current_txn_first_offset is not None and not header.is_transactional:
        raise KafkaError(
            ErrorCode.invalid_txn_state,
            f"producer {pid} has a transaction open since offset "
            f"{entry.current_txn_first_offset}: expected a transactional batch",
        )
    return None


def _check_sequence(entry: ProducerEntry, header: BatchHeader) -> tuple[int, int] | None:
    pid, epoch = header.producer_id, header.producer_epoch
    if epoch > entry.epoch:
        if header.base_sequence != 0:
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"producer {pid} new epoch {epoch} must start at sequence 0, "
                f"got {header.base_sequence}",
            )
        return None
    duplicate = entry.find_duplicate(header)
    if duplicate is not None:
        return duplicate.first_offset, duplicate.last_offset
    last = entry.last_seq
    if last is not None and header.base_sequence != _next_seq(last):
        raise KafkaError(
            ErrorCode.out_of_order_sequence_number,
            f"producer {pid} epoch {epoch}: expected sequence {_next_seq(last)}, "
            f"got {header.base_sequence}",
        )
    return None


def _advance(entry: ProducerEntry | None, header: BatchHeader, marker: EndTxnMarker | None,
             ) -> tuple[ProducerEntry, CompletedTxn | None]:
    """The entry after ``header`` and the transaction a marker completed, if any (Kafka's
    ``ProducerAppendInfo.append``; an empty control batch or one of another type changes
    nothing)."""
    if entry is None:
        entry = ProducerEntry(header.producer_id, header.producer_epoch)
    if header.is_control:
        if marker is None:
            return entry, None
        completed = None
        if entry.current_txn_first_offset is not None:
            completed = CompletedTxn(header.producer_id, entry.current_txn_first_offset,
                                     header.base_offset, not marker.committed)
        entry.set_epoch(header.producer_epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.current_txn_first_offset = None
        entry.last_timestamp = header.max_timestamp
        return entry, completed
    entry.set_epoch(header.producer_epoch)
    if header.base_sequence >= 0:
        entry.batches.append(
            BatchMetadata(
                header.base_sequence, header.last_sequence, header.base_offset, header.last_offset
            )
        )
    entry.last_timestamp = header.max_timestamp
    if header.is_transactional and entry.current_txn_first_offset is None:
        entry.current_txn_first_offset = header.base_offset
    return entry, None

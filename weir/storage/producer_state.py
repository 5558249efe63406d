"""Idempotent-producer state of one partition.

For every producer id we keep its epoch and the metadata of its last five batches (first and
last sequence, first and last offset) — the window a producer may retry within
(``max.in.flight.requests.per.connection`` ≤ 5).  Before an append the log asks
:meth:`ProducerStateManager.check`; after the append it calls :meth:`update` with the final
offsets.  The state is rebuilt from the log's batch headers on open and after truncation
(there are no snapshot files).

Rules (Kafka's, for client appends):

* producer id -1: not idempotent, nothing to check;
* epoch below the known one: ``INVALID_PRODUCER_EPOCH``;
* same epoch: a batch whose (first, last) sequence matches one of the last five is a
  duplicate → the original offsets are returned; otherwise the first sequence must follow
  the last one (wrapping after 2**31 - 1), else ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* a new epoch must start at sequence 0;
* an unknown producer id is accepted at any sequence (its state may have been removed by
  retention or truncation).

Transactions are not tracked (no LSO / aborted-transaction index); control batches only
advance the epoch.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import INT32_MAX, BatchHeader

__all__ = ["BatchMetadata", "ProducerEntry", "ProducerStateManager"]

MAX_BATCHES_PER_PRODUCER = 5


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=MAX_BATCHES_PER_PRODUCER)
    )

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id, self.epoch, deque(self.batches, maxlen=MAX_BATCHES_PER_PRODUCER)
        )

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        for meta in self.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


def _is_idempotent(header: BatchHeader) -> bool:
    return header.producer_id >= 0


class ProducerStateManager:
    """Per-partition producer id → :class:`ProducerEntry`."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    @property
    def producers(self) -> dict[int, ProducerEntry]:
        """Read-only use: producer id → entry."""
        return self._producers

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    # -- checks ------------------------------------------------------------------------
    def check(self, header: BatchHeader) -> tuple[int, int] | None:
        """Validate one batch against current state; (first, last) offsets if duplicate."""
        if not _is_idempotent(header):
            return None
        return _check_entry(self._producers.get(header.producer_id), header)

    def check_all(self, headers: Iterable[BatchHeader]) -> tuple[int, int] | None:
        """Validate a whole append (several batches may share a producer id).

        Returns the offsets of the first duplicate found, as Kafka does.
        """
        scratch: dict[int, ProducerEntry] = {}
        for header in headers:
            if not _is_idempotent(header):
                continue
            pid = header.producer_id
            entry = scratch.get(pid)
            if entry is None and pid in self._producers:
                entry = self._producers[pid].copy()
            duplicate = _check_entry(entry, header)
            if duplicate is not None:
                return duplicate
            scratch[pid] = _advance(entry, header)
        return None

    # -- updates -----------------------------------------------------------------------
    def update(self, header: BatchHeader) -> None:
        """Record an appended batch (its offsets are final)."""
        if not _is_idempotent(header):
            return
        pid = header.producer_id
        self._producers[pid] = _advance(self._producers.get(pid), header)

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Reset and replay batch headers in log order."""
        self._producers.clear()
        for header in headers:
            self.update(header)

    def clear(self) -> None:
        self._producers.clear()


def _check_entry(entry: ProducerEntry | None, header: BatchHeader) -> tuple[int, int] | None:
    if entry is None:
        return None
    pid, epoch = header.producer_id, header.producer_epoch
    if epoch < entry.epoch:
        raise KafkaError(
            ErrorCode.invalid_producer_epoch,
            f"producer {pid} epoch {epoch} is older than current epoch {entry.epoch}",
        )
    if header.is_control or header.base_sequence < 0:
        return None
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


def _advance(entry: ProducerEntry | None, header: BatchHeader) -> ProducerEntry:
    """The entry after ``header`` (a new object when the epoch changes)."""
    if entry is None or header.producer_epoch != entry.epoch:
        entry = ProducerEntry(header.producer_id, header.producer_epoch)
    if not header.is_control and header.base_sequence >= 0:
        entry.batches.append(
            BatchMetadata(
                header.base_sequence, header.last_sequence, header.base_offset, header.last_offset
            )
        )
    return entry

"""What the log cleaner knows of transactions as it walks a log — Kafka's
``CleanedTransactionMetadata`` (``LogCleaner.scala``), KIP-98 with KIP-534's marker horizon.

The cleaner reads batches in offset order.  Each aborted transaction of the log (the
``.txnindex`` entries: producer id, first offset, ABORT marker offset) becomes *ongoing*
once the walk reaches its first offset; until its ABORT marker a transactional batch of
that producer is aborted data (dropped).  Any other transactional batch is committed data
and is compacted like non-transactional records.

A marker can go once no data of its transaction is left below it:

* an ABORT marker is kept while the walk saw a batch of its transaction (that batch is
  dropped now, so the next cleaning sees none); then its ``.txnindex`` entry is carried to
  the cleaned segment (a consumer still needs it for the retained batch header);
* a COMMIT marker is kept while the walk saw a batch of its transaction since the last
  marker of that producer (the batch may have lost its records only now);
* a marker that may go is first rewritten with a delete horizon (``now +
  delete.retention.ms``, KIP-534, the tombstones' rule: a consumer that read the
  transaction's data still sees its marker), and removed by a cleaning after the horizon.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from weir.records.batch import BatchHeader
from weir.records.control import ABORT, COMMIT
from weir.storage.txn_index import AbortedTxn

__all__ = ["CleanedTransactionMetadata"]


class CleanedTransactionMetadata:
    """Transaction state of one walk over a log (the offset map's, or a cleaning's, whose
    state carries from one group of segments to the next)."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = [(t.first_offset, i, t) for i, t in enumerate(aborted)]
        heapq.heapify(self._pending)
        # producer id → (its aborted transaction, last offset of a batch of it seen)
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, int | None]] = {}
        self._ongoing_committed: set[int] = set()
        # the aborted transactions whose marker was kept since the last take_entries()
        self._kept_entries: list[AbortedTxn] = []

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            _first, _i, txn = heapq.heappop(pending)
            self._ongoing_aborted.setdefault(txn.producer_id, (txn, None))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch read; True if it belongs to an aborted transaction (Kafka's
        ``onBatchRead``)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        pid = header.producer_id
        ongoing = self._ongoing_aborted.get(pid)
        if ongoing is not None:
            self._ongoing_aborted[pid] = (ongoing[0], header.last_offset)
            return True
        self._ongoing_committed.add(pid)
        return False

    def on_marker(self, header: BatchHeader, control_type: int | None) -> bool:
        """A control batch read (``control_type`` None: it has no record, it was cleaned
        already); True if it may be removed (Kafka's ``onControlBatchRead``)."""
        self._consume_up_to(header.last_offset)
        if control_type is None:
            return True
        pid = header.producer_id
        if control_type == ABORT:
            ongoing = self._ongoing_aborted.pop(pid, None)
            if ongoing is not None and ongoing[1] is not None:
                self._kept_entries.append(ongoing[0])
                return False
            return True
        if control_type == COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False  # another control type: kept

    def take_entries(self) -> list[AbortedTxn]:
        """The ``.txnindex`` entries of the markers kept since the last call (one cleaned
        segment's)."""
        entries, self._kept_entries = self._kept_entries, []
        return entries

"""Loading producer and transaction state for a log: snapshot + replay (KIP-98).

Kafka's ``LogLoader``/``UnifiedLog.rebuildProducerState``: start from the newest producer
snapshot at or below where the log's trusted data ends, then replay only the batch headers
after it (reading the single record of each control batch to know COMMIT from ABORT).
While replaying a segment that crash recovery just re-validated, its aborted-transaction
index is rebuilt as well (Kafka's ``LogSegment.recover(producerStateManager)``); the index of
any other segment is trusted.  Without any snapshot the replay starts at the first segment.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import BatchHeader
from weir.records.control import EndTxnMarker, read_marker
from weir.storage.integrity import checked_headers
from weir.storage.producer_snapshot import delete_snapshots, load_latest, write_snapshot
from weir.storage.producer_state import ProducerStateManager
from weir.storage.segment import LogSegment
from weir.storage.txn_index import AbortedTxn

__all__ = [
    "check_client_batches",
    "follower_marker",
    "load_producer_state",
    "marker_of",
    "replay",
    "take_snapshot",
    "truncate_snapshots",
]

log = logging.getLogger(__name__)


def marker_of(seg: LogSegment, header: BatchHeader) -> EndTxnMarker | None:
    """The COMMIT/ABORT marker of a control batch stored in ``seg`` (None if it has none)."""
    if not header.is_control:
        return None
    try:
        return read_marker(seg.read_bytes(header.position, header.size))
    except KafkaError as exc:
        log.warning("%s: control batch at offset %d does not decode (%s); ignored",
                    seg.log_path, header.base_offset, exc.message)
        return None


def load_producer_state(directory: Path, segments: Sequence[LogSegment],
                        state: ProducerStateManager, *, recovered_from: int | None,
                        snapshots: list[int] | None = None) -> int:
    """Fill ``state`` for ``segments``; returns the offset the replay started at.

    ``recovered_from``: the base offset of the first segment crash recovery re-validated
    (None after a clean shutdown).  A snapshot above it is not trusted (it may describe
    batches recovery cut off), and those segments get their transaction index rebuilt.
    ``snapshots``: the directory's snapshot offsets, if the caller listed it already."""
    leo = segments[-1].next_offset
    first_base = segments[0].base_offset
    at_most = leo if recovered_from is None else min(leo, recovered_from)
    snap = load_latest(directory, at_most=at_most, at_least=first_base, offsets=snapshots)
    if snap is None:
        state.clear()
        start = first_base
    else:
        start, entries = snap
        state.load_entries(entries)
    replay(segments, state, start, rebuild_index_from=recovered_from)
    return start


def replay(segments: Sequence[LogSegment], state: ProducerStateManager, start: int, *,
           rebuild_index_from: int | None = None) -> None:
    """Apply every batch at or after ``start`` to ``state`` (headers are checked as they are
    walked: an impossible one raises ``CorruptSegmentError``)."""
    for seg in segments:
        if seg.next_offset <= start:
            continue
        rebuild = rebuild_index_from is not None and seg.base_offset >= rebuild_index_from
        if rebuild:
            seg.txn_index.reset()
        for header in checked_headers([seg]):
            if header.last_offset < start:
                continue
            done = state.apply(header, marker_of(seg, header))
            if rebuild and done is not None and done[0].is_aborted:
                txn, lso = done
                seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset,
                                                txn.last_offset, lso))


def take_snapshot(directory: Path, offset: int, state: ProducerStateManager, *,
                  sync: bool) -> None:
    """Write ``<offset>.snapshot`` with the state after every batch below ``offset``."""
    write_snapshot(directory, offset, state.producers.values(), sync=sync)


def truncate_snapshots(directory: Path, log_start_segment: int, log_end: int) -> None:
    """Drop the snapshots that describe offsets no longer in the log."""
    delete_snapshots(directory, below=log_start_segment, above=log_end)


def check_client_batches(tp: TopicPartition, headers: list[BatchHeader]) -> None:
    """Kafka's ``LogValidator.validateBatch`` for CLIENT appends: no control batches, and a
    batch with a producer id has a sequence."""
    for h in headers:
        if h.is_control:
            raise KafkaError(ErrorCode.invalid_record,
                             f"Clients are not allowed to write control records in {tp}")
        if h.producer_id >= 0 and h.base_sequence < 0:
            raise KafkaError(ErrorCode.invalid_record,
                             f"Invalid sequence number {h.base_sequence} in record batch "
                             f"with producerId {h.producer_id} in {tp}")


def follower_marker(tp: TopicPartition, records: bytes, header: BatchHeader
                     ) -> EndTxnMarker | None:
    try:
        return read_marker(records, header)
    except KafkaError as exc:
        log.warning("%s: replicated control batch at %d does not decode: %s", tp,
                    header.base_offset, exc.message)
        return None

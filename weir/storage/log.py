"""A partition's log: an ordered list of segments, the leader epoch cache and producer state.

Invariants (asserted after every mutation): log start ≤ high watermark ≤ log end offset,
segments are ordered (with offset gaps after compaction), the last one is the active one.

Synchronous and single-threaded; the clock is always passed in (``now_ms``).  Any
``OSError`` marks the log offline and surfaces as ``KafkaError(kafka_storage_error)``.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import os
import shutil
from collections.abc import Sequence
from concurrent.futures import Executor, Future
from pathlib import Path

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import (
    CONTROL_BIT,
    BatchHeader,
    assign_offsets,
    validate_batches,
    validate_produce,
)
from weir.records.control import EndTxnMarker, read_marker
from weir.records.filter import require_keys
from weir.storage import timestamp_lookup
from weir.storage.checkpoints import LEADER_EPOCH_CHECKPOINT
from weir.storage.config import LogConfig
from weir.storage.epoch_cache import LeaderEpochCache
from weir.storage.log_dirs import parse_log_dir_name, parse_topic_partition
from weir.storage.log_loader import load_log, new_segment
from weir.storage.log_results import AppendResult, ReadResult, storage_op
from weir.storage.producer_snapshot import snapshot_path
from weir.storage.producer_state import AppendOrigin, ProducerStateManager
from weir.storage.producer_state_loader import (
    check_client_batches,
    follower_marker,
    load_producer_state,
    take_snapshot,
    truncate_snapshots,
)
from weir.storage.retention import segments_past_retention
from weir.storage.segment import LogSegment
from weir.storage.swap import replace_files
from weir.storage.txn_index import AbortedTxn, collect_aborted_transactions

__all__ = ["AppendResult", "Log", "LogConfig", "ReadResult", "parse_topic_partition"]

log = logging.getLogger(__name__)


class Log:
    """Segments of one partition directory."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        epoch_cache: LeaderEpochCache,
        now_ms: int,
        producer_state: ProducerStateManager | None = None,
    ) -> None:
        parsed = parse_log_dir_name(directory.name)  # also ``...-future`` (KIP-113)
        if parsed is None:
            raise ValueError(f"{directory} is not a <topic>-<partition> directory")
        tp = parsed[0]
        self._dir = directory
        self._tp = tp
        self.config = config
        self._segments = segments
        self._log_start = log_start_offset
        self._recovery_point = segments[-1].next_offset
        self._high_watermark = log_start_offset
        self._epoch_cache = epoch_cache
        self._producer_state = producer_state or ProducerStateManager()
        self._clock_ms = now_ms
        self._last_flush_ms = now_ms
        self._unflushed_messages = 0
        self.offline_reason: str | None = None
        # KIP-516: the topic id of partition.metadata (weir.storage.topic_ids), None if unknown.
        self.topic_id: str | None = None
        # Bumped by every truncation: a log cleaning prepared before one is not swapped in;
        # the lowest offset truncated to since the cleaner last looked (its checkpoint may
        # not stay above it, Kafka's LogManager.truncateTo).
        self.truncations = 0
        self.truncated_to: int | None = None
        self._file_work: Future[None] | None = None  # a cleaner swap's renames (swap.py)
        self._loaded_at = (log_start_offset, segments[-1].next_offset)
        self._swapping: frozenset[int] = frozenset()

    # -- opening (Kafka's LogLoader: weir.storage.log_loader) --------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clean_shutdown: bool,
        now_ms: int,
        high_watermark: int | None = None,
    ) -> Log:
        """Load (or create) the log in ``directory``; recover unflushed segments unless the
        previous shutdown was clean (see :func:`weir.storage.log_loader.load_log`)."""
        loaded = load_log(directory, config, recovery_point=recovery_point,
                          log_start_offset=log_start_offset, clean_shutdown=clean_shutdown,
                          now_ms=now_ms)
        opened = cls(directory, config, loaded.segments,
                     log_start_offset=loaded.log_start_offset,
                     epoch_cache=loaded.epoch_cache, now_ms=now_ms,
                     producer_state=loaded.producer_state)
        if high_watermark is not None:
            opened.update_high_watermark(high_watermark)
        opened._check_invariants()
        return opened

    # -- properties --------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self._dir

    @property
    def topic_partition(self) -> TopicPartition:
        return self._tp

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self._segments)

    def update_high_watermark(self, value: int) -> int:
        """Set the high watermark, clamped to [log start, LEO]; returns the value kept."""
        self._high_watermark = min(max(value, self._log_start), self._segments[-1].next_offset)
        self._producer_state.on_high_watermark_updated(self._high_watermark)
        self._check_invariants()
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """KIP-98's LSO: the first offset of the earliest transaction that is undecided or
        whose marker is not yet below the high watermark (never below the log start), else
        the high watermark (Kafka's ``UnifiedLog.lastStableOffset``)."""
        first = self._producer_state.first_unstable_offset()
        if first is None:
            return self._high_watermark
        return min(max(first, self._log_start), self._high_watermark)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """``producer.id.expiration.ms``: forget idle producers (Kafka's periodic check)."""
        return self._producer_state.remove_expired(now_ms, expiration_ms)

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int
                                     ) -> list[AbortedTxn]:
        """The aborted transactions with data in [fetch_offset, upper_bound), from the
        transaction indexes of the segment holding ``fetch_offset`` onwards (Kafka's
        ``UnifiedLog.collectAbortedTransactions``)."""
        segs = self._segments[self._segment_index_for(fetch_offset):]
        return collect_aborted_transactions((s.txn_index for s in segs), fetch_offset,
                                            upper_bound)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.active_segment.index_interval_bytes = config.index_interval_bytes

    def _check_invariants(self) -> None:
        assert self._log_start <= self._high_watermark <= self._segments[-1].next_offset, (
            f"{self._tp}: log start {self._log_start} <= HW {self._high_watermark} "
            f"<= LEO {self.log_end_offset} violated"
        )
        assert self._segments[0].base_offset <= self._log_start

    # -- appends -----------------------------------------------------------------------
    @storage_op
    def append_as_leader(self, records: bytes, leader_epoch: int, now_ms: int,
                         origin: AppendOrigin = AppendOrigin.CLIENT, *,
                         verification: tuple[object | None] | None = None) -> AppendResult:
        """Validate, deduplicate, assign offsets from the LEO and append a produce request
        (``origin`` COORDINATOR: a coordinator's write, e.g. a transaction marker).
        ``verification`` (KIP-890, when enabled): a 1-tuple with the guard the coordinator
        verified (or None): transactional data starting a transaction needs it."""
        self._clock_ms = now_ms
        config = self.config
        headers = validate_produce(records, config.max_message_bytes)
        # Batches with neither a producer id nor the control bit (a producer without
        # idempotence: the usual client append) have nothing for the producer-state checks
        # and bookkeeping below to look at: they are skipped, not run to no effect.
        plain = True
        for h in headers:
            if h.producer_id >= 0 or h.attributes & CONTROL_BIT:
                plain = False
                break
        if not plain and origin is AppendOrigin.CLIENT:
            check_client_batches(self._tp, headers)
        if config.compact:  # keyless records are refused (LogValidator.validateKey)
            require_keys(self._tp, records)
        markers: dict[int, EndTxnMarker | None] = {}
        if not plain:
            markers = {h.position: read_marker(records, h) for h in headers if h.is_control}
            duplicate = self._producer_state.check_all(headers, origin, markers)
            if duplicate is not None:
                return AppendResult(duplicate[0], duplicate[1], -1, self._log_start,
                                    duplicate=True)
            if verification is not None:
                self._producer_state.check_verified(headers, verification[0])
        append_time = now_ms if config.log_append_time else None
        first = self._segments[-1].next_offset  # the log end offset
        buf = assign_offsets(records, headers, first, leader_epoch, append_time)
        self._append(buf, headers, now_ms, markers, producers=not plain)
        self._epoch_cache.assign(leader_epoch, first)
        return self._result(headers, len(buf), -1 if append_time is None else append_time)

    @storage_op
    def append_as_follower(self, records: bytes, now_ms: int | None = None) -> AppendResult:
        """Append batches whose offsets the leader already assigned (must start at the LEO)."""
        if now_ms is not None:
            self._clock_ms = now_ms
        leo = self.log_end_offset
        if not records:
            return AppendResult(leo, leo - 1, -1, self._log_start)
        headers = validate_batches(records, None, strict=False)
        expected = leo
        for header in headers:
            if header.base_offset < expected:  # gaps are legal (a compacted leader)
                raise KafkaError(
                    ErrorCode.unknown_server_error,
                    f"{self._tp}: follower append offset mismatch: batch starts at "
                    f"{header.base_offset}, expected {expected}",
                )
            expected = header.next_offset
        markers = {h.position: follower_marker(self._tp, records, h)
                    for h in headers if h.is_control}
        self._append(records, headers, now_ms, markers)
        for header in headers:
            if header.partition_leader_epoch > self._epoch_cache.latest_epoch:
                self._epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        return self._result(headers, len(records), -1)

    def _result(self, headers: list[BatchHeader], size: int, append_time: int) -> AppendResult:
        last = headers[-1]
        return AppendResult(
            first_offset=headers[0].base_offset,
            last_offset=last.base_offset + last.last_offset_delta,
            log_append_time_ms=append_time,
            log_start_offset=self._log_start,
            num_messages=last.records_count if len(headers) == 1
            else sum(h.records_count for h in headers),
            valid_bytes=size,
        )

    def _append(self, buf: bytes | bytearray, headers: list[BatchHeader], now_ms: int | None,
                markers: dict[int, EndTxnMarker | None], *, producers: bool = True):
        """``producers`` False: no batch has a producer id (nothing for the producer state)."""
        active = self._segments[-1]
        last = headers[-1]
        config = self.config
        if active.should_roll(
            incoming_bytes=len(buf),
            last_offset=last.base_offset + last.last_offset_delta,
            now_ms=now_ms,
            segment_bytes=config.segment_bytes,
            segment_ms=config.segment_ms,
        ):
            self.roll()
            active = self._segments[-1]
        active.append(buf, headers)
        for header in headers if producers else ():
            done = self._producer_state.apply(header, markers.get(header.position))
            if done is not None and done[0].is_aborted:  # KIP-98: index the aborted txn
                txn, lso = done
                self.active_segment.txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
        self._unflushed_messages += last.records_count if len(headers) == 1 \
            else sum(h.records_count for h in headers)
        if self._unflushed_messages >= config.flush_messages:
            self.flush()
        else:
            self._maybe_flush_by_time()
        self._check_invariants()

    @storage_op
    def roll(self) -> LogSegment:
        """Start a new active segment at the LEO (no-op if the active one is empty)."""
        active = self.active_segment
        if active.is_empty:
            return active
        active.on_become_inactive()
        active.flush()
        # Kafka takes a producer snapshot at every roll: a restart replays from here.
        take_snapshot(self._dir, self.log_end_offset, self._producer_state, sync=False)
        seg = new_segment(self._dir, self.log_end_offset, self.config, self._clock_ms)
        self._segments.append(seg)
        return seg

    # -- reads -------------------------------------------------------------------------
    @storage_op
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """Whole batches from the one containing ``offset``, below ``max_offset`` (exclusive)
        and within ``max_bytes`` (the first batch is always returned if ``min_one_batch``)."""
        leo = self.log_end_offset
        if offset < self._log_start or offset > leo:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"{self._tp}: offset {offset} outside [{self._log_start}, {leo}]",
            )
        empty = ReadResult(None, 0, 0, offset)
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return empty
        for seg in self._segments[self._segment_index_for(offset) :]:
            if max_offset is not None and seg.base_offset >= max_offset:
                break
            header = seg.find_batch(offset)
            if header is None:
                continue
            span = seg.span_from(
                header, max_offset=max_offset, max_bytes=max_bytes, min_one_batch=min_one_batch
            )
            if span is None:
                return empty
            return ReadResult(
                seg.log_path,
                span.position,
                span.size,
                span.first_offset,
                span.last_offset,
                seg.file,
            )
        return empty

    def _segment_index_for(self, offset: int) -> int:
        i = bisect.bisect_right(self._segments, offset, key=lambda seg: seg.base_offset)
        return max(0, i - 1)

    @storage_op
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp ≥ ``timestamp`` (Kafka's
        ListOffsets; :mod:`weir.storage.timestamp_lookup`)."""
        return timestamp_lookup.offset_for_timestamp(self._segments, self._log_start, timestamp)

    @storage_op
    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        return timestamp_lookup.max_timestamp_and_offset(self._segments, self._log_start)

    # -- truncation and deletion -------------------------------------------------------
    @storage_op
    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: drop everything from ``offset`` on (the whole batch that
        contains it).  True if anything was removed.

        Even when no record goes, epochs starting at or after the log end are dropped (as
        Kafka does): a broker that became leader and wrote nothing in that epoch keeps an
        entry the new leader never had, and would otherwise ask about it forever."""
        self._await_file_work()
        if offset >= self.log_end_offset:
            # No record goes, only epochs that start at the log end: their checkpoint is
            # written later (Kafka's truncateFromEndAsyncFlush, KAFKA-15046), since a broker
            # demoted from leader of thousands of idle partitions would otherwise fsync one
            # file per partition on its event loop.  Safe by the module rules of
            # weir.storage.epoch_cache: a load drops entries at or past the log end again, a
            # flush writes the cache before the recovery point passes newer records, and
            # recovery re-reads the epochs of the batches it recovers.
            self._epoch_cache.truncate_from_end(self.log_end_offset, defer=True)
            return False
        self._note_truncation(offset)
        if offset < self._log_start:
            self.truncate_fully_and_start_at(offset)
            return True
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
        self.active_segment.truncate_to(offset)
        leo = self.log_end_offset
        self._epoch_cache.truncate_from_end(leo)
        self._reload_producer_state()
        self._recovery_point = min(self._recovery_point, leo)
        self._high_watermark = min(self._high_watermark, leo)
        self._check_invariants()
        return True

    @storage_op
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``."""
        self._await_file_work()
        self._note_truncation(offset)
        for seg in self._segments:
            seg.delete()
        self._segments = [new_segment(self._dir, offset, self.config, self._clock_ms)]
        self._log_start = self._recovery_point = self._high_watermark = offset
        self._epoch_cache.clear()
        self._producer_state.clear()
        truncate_snapshots(self._dir, offset + 1, -1)
        self._check_invariants()

    @storage_op
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (≤ HW); returns the new start."""
        if offset > self._high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"{self._tp}: cannot delete before {offset}, above high watermark "
                f"{self._high_watermark}",
            )
        if offset > self._log_start:
            self._await_file_work()
            self._log_start = offset
            self._delete_segments(self._count_below_start())
            self._epoch_cache.truncate_from_start(offset)
            self._on_log_start_moved()
            self._check_invariants()
        return self._log_start

    def _count_below_start(self) -> int:
        count = 0
        while count + 1 < len(self._segments):
            if self._segments[count + 1].base_offset > self._log_start:
                break
            count += 1
        return count

    @storage_op
    def apply_retention(self, now_ms: int) -> int:
        """Delete old segments by ``retention.ms`` / ``retention.bytes``; returns how many.

        Never the active segment, never a segment reaching past the high watermark
        (:mod:`weir.storage.retention`).
        """
        self._await_file_work()
        self._clock_ms = now_ms
        count = segments_past_retention(self._segments, self.config, now_ms,
                                        high_watermark=self._high_watermark,
                                        log_start=self._log_start)
        if count:
            self._delete_segments(count)
            self._log_start = max(self._log_start, self._segments[0].base_offset)
            self._epoch_cache.truncate_from_start(self._log_start)
            self._on_log_start_moved()
            self._check_invariants()
        return count

    def _reload_producer_state(self) -> None:
        """After truncation: the newest snapshot at or below the new log end, then a replay
        of the batches after it (Kafka's ``truncateAndReload``)."""
        truncate_snapshots(self._dir, self._segments[0].base_offset, self.log_end_offset)
        start = load_producer_state(self._dir, self._segments, self._producer_state,
                                    recovered_from=None)
        log.debug("%s: producer state reloaded from offset %d", self._tp, start)
        self._producer_state.on_high_watermark_updated(min(self._high_watermark,
                                                           self.log_end_offset))

    def _on_log_start_moved(self) -> None:
        self._producer_state.on_log_start_offset_incremented(self._log_start)
        truncate_snapshots(self._dir, self._segments[0].base_offset, self.log_end_offset)

    def _note_truncation(self, offset: int) -> None:
        self.truncations += 1
        self.truncated_to = offset if self.truncated_to is None else min(offset,
                                                                          self.truncated_to)

    @storage_op
    def replace_segments(self, cleaned: list[LogSegment], old: list[LogSegment],
                         generation: int) -> bool:
        """Swap the log cleaner's ``.cleaned`` segments in for ``old`` with all the file
        work on this thread (tests, tools); see :meth:`swap_in_cleaned`."""
        return self.swap_in_cleaned([(cleaned, old)], generation) is not None

    @storage_op
    def swap_in_cleaned(self, groups: Sequence[tuple[list[LogSegment], list[LogSegment]]],
                        generation: int, executor: Executor | None = None
                        ) -> Future[None] | None:
        """Swap the log cleaner's ``.cleaned`` segments in, each group's for its ``old``
        (consecutive segments, none the active one): Kafka's ``UnifiedLog.replaceSegments``.

        Here, on the caller's thread: the check, the segment list and closing the old
        segments' descriptors.  The crash-safe file protocol (:func:`swap.replace_files`:
        renames, unlinks, directory fsyncs) runs on ``executor`` (the log cleaner's storage
        thread; None: here); until it is done, every operation that deletes, renames,
        truncates or flushes segment files waits for it first.  Returns that work's future,
        or None — nothing changed, the new segments deleted — if the log changed since the
        cleaning began: truncated (``generation``), or a segment deleted by retention."""
        self._await_file_work()
        ids = [id(seg) for seg in self._segments[:-1]]
        firsts = []
        for _cleaned, old in groups:
            first = ids.index(id(old[0])) if id(old[0]) in ids else -1
            if first < 0 or ids[first:first + len(old)] != [id(seg) for seg in old]:
                break
            firsts.append(first)
        if generation != self.truncations or len(firsts) != len(groups):
            for cleaned, _old in groups:
                for seg in cleaned:
                    seg.delete()
            return None
        for first, (cleaned, old) in sorted(zip(firsts, groups, strict=True),
                                            key=lambda pair: pair[0], reverse=True):
            self._segments[first:first + len(old)] = cleaned
        for _cleaned, old in groups:
            for seg in old:  # a ReadResult still holding one reads by path, or finds it gone
                seg.release()
        self._check_invariants()
        directory = self._dir
        work = functools.partial(_replace_all, directory, [(list(c), list(o)) for c, o in groups])
        if executor is None:
            done: Future[None] = Future()
            work()
            done.set_result(None)
            return done
        self._swapping = frozenset(id(seg) for cleaned, _old in groups for seg in cleaned)
        self._file_work = executor.submit(work)
        return self._file_work

    def _swapping_now(self) -> frozenset[int]:
        """The segments whose files the storage thread is renaming (already fsynced by the
        cleaner: a flush leaves them alone)."""
        work = self._file_work
        if work is None:
            return frozenset()
        if work.done():
            self._await_file_work()
            return frozenset()
        return self._swapping

    def _await_file_work(self) -> None:
        """Kafka's log lock, for the cleaner's swap: wait for the file work of a swap still
        running on the storage thread (an ``OSError`` it met is raised here)."""
        work, self._file_work = self._file_work, None
        if work is not None:
            work.result()

    def _delete_segments(self, count: int) -> None:
        doomed, self._segments = self._segments[:count], self._segments[count:]
        for seg in doomed:
            seg.delete()

    # -- durability --------------------------------------------------------------------
    @storage_op
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets in [recovery point, up_to) and advance it."""
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if target > self._recovery_point:
            # A deferred leader-epoch entry is written before the recovery point passes
            # records of its epoch: crash recovery only re-reads epochs past that point.
            self._epoch_cache.flush()
            swapping = self._swapping_now()
            for seg in self._segments:
                if (seg.base_offset < target and seg.next_offset > self._recovery_point
                        and id(seg) not in swapping):
                    seg.flush()
            self._recovery_point = target
        if target >= self.log_end_offset:
            self._unflushed_messages = 0
        self._last_flush_ms = self._clock_ms

    def flush_is_due(self, now_ms: int) -> bool:
        """Whether ``flush.ms`` has elapsed with unflushed messages (no side effects: the
        broker's flush scheduler asks every log each second)."""
        return bool(self._unflushed_messages) and (
            now_ms - self._last_flush_ms >= self.config.flush_ms)

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if ``flush.ms`` has elapsed with unflushed messages; True if flushed."""
        self._clock_ms = now_ms
        return self._maybe_flush_by_time()

    def _maybe_flush_by_time(self) -> bool:
        if (
            self._unflushed_messages
            and self._clock_ms - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()
            return True
        return False

    def _snapshot_needed_at_close(self) -> bool:
        """Kafka's ``ProducerStateManager.takeSnapshot`` writes only past the last snapshot:
        not for a log with nothing since its start and no producers, nor when a snapshot at
        the log end exists (a broker with thousands of idle replicas would otherwise fsync
        one file per replica at every clean shutdown)."""
        leo = self.log_end_offset
        if leo == self._segments[0].base_offset and not self._producer_state.producers:
            return False
        return not snapshot_path(self._dir, leo).exists()

    @property
    def epoch_checkpoint_redone_by_load(self) -> bool:
        """Whether the leader-epoch-checkpoint's only pending change is the truncation the
        load made, with the log's start and end unchanged since: the next load makes it
        again, so a clean shutdown need not write it (a broker restarted with thousands of
        empty replicas would otherwise fsync one file each at its next shutdown)."""
        return (self._epoch_cache.loaded
                and self._loaded_at == (self._log_start, self.log_end_offset))

    def close(self) -> None:
        """Close every segment (writes the final time-index entries) and snapshot the
        producer state at the log end (Kafka does on clean shutdown)."""
        try:
            self._await_file_work()
        except OSError as exc:
            self.offline_reason = str(exc)
            log.warning("%s: log cleaner swap failed: %s", self._tp, exc)
        if self.offline_reason is None:
            # a deferred entry (LeaderAndIsr) is written before the clean-shutdown marker
            epoch = self._epoch_cache.dirty and not self.epoch_checkpoint_redone_by_load
            snapshot = self._snapshot_needed_at_close()
            # the directory is looked at only when something is to be written in it (a
            # stat per log was a quarter of closing 10,000 idle logs at shutdown)
            if (epoch or snapshot) and self._dir.exists():
                if epoch:
                    self._epoch_cache.flush()
                try:
                    if snapshot:
                        take_snapshot(self._dir, self.log_end_offset, self._producer_state,
                                      sync=True)
                except OSError as exc:
                    log.warning("%s: producer snapshot not written: %s", self._tp, exc)
        for seg in self._segments:  # what lies past the recovery point may be unsynced
            seg.close(sync=seg.next_offset > self._recovery_point)

    @storage_op
    def rename_dir(self, new_dir: Path) -> None:
        """Rename the partition directory (same file system) and repoint every file path;
        open descriptors stay valid (Kafka's ``UnifiedLog.renameDir``, for the KIP-113 swap
        of a future log and the ``-delete`` rename)."""
        self._await_file_work()
        os.rename(self._dir, new_dir)
        self._dir = new_dir
        for seg in self._segments:
            seg.log_path = new_dir / seg.log_path.name
            seg.index.path = new_dir / seg.index.path.name
            seg.time_index.path = new_dir / seg.time_index.path.name
            seg.txn_index.path = new_dir / seg.txn_index.path.name
        self._epoch_cache.move_to(new_dir / LEADER_EPOCH_CHECKPOINT)

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        with contextlib.suppress(OSError):  # the files go anyway
            self._await_file_work()
        for seg in self._segments:
            seg.delete()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"Log({self._tp}, start={self._log_start}, hw={self._high_watermark}, "
            f"leo={self.log_end_offset}, segments={len(self._segments)})"
        )


def _replace_all(directory: Path, groups: list[tuple[list[LogSegment], list[LogSegment]]]
                 ) -> None:
    for cleaned, old in groups:
        replace_files(directory, cleaned, old)

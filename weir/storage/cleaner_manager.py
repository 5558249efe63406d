"""Which log to clean next and what is cleaned already — Kafka's ``LogCleanerManager``.

Synchronous, called on the event loop.  Per log dir it keeps Kafka's
``cleaner-offset-checkpoint`` (the offset checkpoint format: ``topic partition offset``,
each log's *first dirty offset*: everything below it has been cleaned once).  Per partition
it keeps Kafka's ``LogCleaningState``: in progress, aborted, or paused (a count: truncation,
deletion and a log dir move pause it with :meth:`abort_and_pause` and :meth:`resume` it).

A log is cleanable when ``cleanup.policy`` includes ``compact`` and it is not paused or in
progress.  Its cleanable section (Kafka's ``cleanableOffsets``) is ``[first dirty, first
uncleanable)`` where the first dirty offset is the checkpoint (the log start if the
checkpoint is missing or out of range) and the first uncleanable offset is the smallest of
the active segment's base offset, the last stable offset (≤ the high watermark: a follower
cleans only what is committed, as the leader) and, with ``min.compaction.lag.ms``, the base
of the first segment holding a record younger than the lag.  The *dirty ratio* is the dirty
bytes over the bytes below the first uncleanable offset; the filthiest log with a ratio of
at least ``min.cleanable.dirty.ratio`` is cleaned next, or any log whose first dirty record
waited longer than ``max.compaction.lag.ms`` (KIP-354), first.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from pathlib import Path

from weir.common import TopicPartition
from weir.protocol.errors import KafkaError
from weir.storage.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from weir.storage.cleaner import CleanJob, SegmentView
from weir.storage.log import Log

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "LogCleanerManager", "LogToClean", "cleanable_offsets"]

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


class CleaningState(enum.Enum):
    IN_PROGRESS = "in_progress"
    ABORTED = "aborted"
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class LogToClean:
    tp: TopicPartition
    log: Log
    log_dir: Path
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    compaction_delay_ms: int  # how long past max.compaction.lag.ms its first dirty record is

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_offsets(lg: Log, checkpoint: int | None, now_ms: int) -> tuple[int, int, int]:
    """(first dirty offset, first uncleanable offset, compaction delay ms) of ``lg``."""
    start = lg.log_start_offset
    first_dirty = checkpoint if checkpoint is not None else start
    if first_dirty < start or first_dirty > lg.log_end_offset:
        first_dirty = start
    segments = lg.segments
    bound = min(segments[-1].base_offset, lg.last_stable_offset, lg.high_watermark)
    lag = lg.config.min_compaction_lag_ms
    if lag > 0:
        for seg in segments[:-1]:
            if seg.next_offset > first_dirty and seg.max_timestamp > now_ms - lag:
                bound = min(bound, max(seg.base_offset, first_dirty))
                break
    bound = max(bound, first_dirty)
    delay = 0
    max_lag = lg.config.max_compaction_lag_ms
    if max_lag < 2**62 and bound > first_dirty:
        for seg in segments[:-1]:
            if seg.next_offset > first_dirty:
                first = seg.header_at(0)
                stamp = first.max_timestamp if first is not None else -1
                if stamp >= 0:
                    delay = max(0, now_ms - stamp - max_lag)
                break
    return first_dirty, bound, delay


def _bytes_between(lg: Log, start: int, end: int) -> int:
    """Bytes of the segments overlapping [start, end)."""
    total = 0
    for seg in lg.segments:
        if seg.base_offset >= end:
            break
        if seg.next_offset > start:
            total += seg.size
    return total


def write_cleaner_checkpoint(log_dir: Path, offsets: dict[TopicPartition, int]) -> None:
    write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, offsets)


class LogCleanerManager:
    """Cleaning states and ``cleaner-offset-checkpoint`` files of one broker."""

    def __init__(self, log_dirs: list[Path]) -> None:
        self.log_dirs = list(log_dirs)
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self._states: dict[TopicPartition, CleaningState] = {}
        self._paused: dict[TopicPartition, int] = {}
        self._jobs: dict[TopicPartition, CleanJob] = {}
        self.uncleanable: set[TopicPartition] = set()  # failed with a non-I/O error

    # -- checkpoints -------------------------------------------------------------------
    def checkpoints(self, log_dir: Path) -> dict[TopicPartition, int]:
        if log_dir not in self._checkpoints:
            path = log_dir / CLEANER_OFFSET_CHECKPOINT
            try:
                self._checkpoints[log_dir] = read_offset_checkpoint(path)
            except KafkaError as exc:  # malformed: everything is dirty again, nothing lost
                log.warning("%s; every compacted log of %s is cleaned from its start", exc.message,
                            log_dir)
                self._checkpoints[log_dir] = {}
        return self._checkpoints[log_dir]

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None,
                          write: bool = True) -> dict[TopicPartition, int] | None:
        """Set (None: remove) the partition's first dirty offset and write the file (with
        ``write`` False, return the offsets for :func:`write_cleaner_checkpoint` off the
        event loop; None if nothing changed)."""
        offsets = self.checkpoints(log_dir)
        if offset is None:
            if offsets.pop(tp, None) is None:
                return None
        else:
            offsets[tp] = offset
        if write:
            write_cleaner_checkpoint(log_dir, dict(offsets))
        return dict(offsets)

    def maybe_truncate_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int) -> None:
        """After a truncation to ``offset``: the checkpoint may not stay above it."""
        current = self.checkpoints(log_dir).get(tp)
        if current is not None and current > offset:
            self.update_checkpoint(log_dir, tp, offset)

    # -- choosing ----------------------------------------------------------------------
    def grab_filthiest(self, logs: dict[TopicPartition, tuple[Log, Path]],
                       now_ms: int) -> LogToClean | None:
        """The log to clean now (marked in progress), or None (Kafka's
        ``grabFilthiestCompactedLog``)."""
        candidates: list[LogToClean] = []
        for tp, (lg, log_dir) in logs.items():
            if (not lg.config.compact or tp in self._states or tp in self.uncleanable
                    or lg.offline_reason is not None):
                continue
            if lg.truncated_to is not None:
                self.maybe_truncate_checkpoint(log_dir, tp, lg.truncated_to)
                lg.truncated_to = None
            checkpoint = self.checkpoints(log_dir).get(tp)
            first_dirty, bound, delay = cleanable_offsets(lg, checkpoint, now_ms)
            if bound <= first_dirty:
                continue
            candidates.append(LogToClean(
                tp, lg, log_dir, first_dirty, bound,
                _bytes_between(lg, lg.log_start_offset, first_dirty),
                _bytes_between(lg, first_dirty, bound), delay))
        ready = [c for c in candidates
                 if c.compaction_delay_ms > 0 or c.ratio >= c.log.config.min_cleanable_dirty_ratio]
        if not ready:
            return None
        best = max(ready, key=lambda c: (c.compaction_delay_ms > 0, c.ratio))
        self._states[best.tp] = CleaningState.IN_PROGRESS
        return best

    def make_job(self, chosen: LogToClean, now_ms: int) -> CleanJob:
        lg = chosen.log
        views = [SegmentView(seg, seg.base_offset, seg.next_offset, seg.size, len(seg.index),
                             seg.log_path, tuple(seg.txn_index.entries))
                 for seg in lg.segments[:-1]]
        producers = {pid: entry.last_data_offset for pid, entry in
                     lg.producer_state.producers.items() if entry.last_data_offset >= 0}
        job = CleanJob(chosen.tp, lg.dir, lg.config, views, chosen.first_dirty_offset,
                       chosen.first_uncleanable_offset, producers, now_ms, lg.truncations)
        # producers whose last entry in the log is a marker: it keeps their epoch (fencing)
        job.marker_producers = {pid: entry.epoch for pid, entry in
                                lg.producer_state.producers.items()
                                if entry.last_data_offset < 0}
        # every aborted transaction the log knows (KIP-98), the active segment's too
        job.aborted_txns = [entry for seg in lg.segments for entry in seg.txn_index.entries]
        self._jobs[chosen.tp] = job
        return job

    # -- states (Kafka's LogCleaningState) ---------------------------------------------
    def state(self, tp: TopicPartition) -> CleaningState | None:
        return self._states.get(tp)

    def done_cleaning(self, tp: TopicPartition) -> None:
        """The cleaning ended (swapped in, failed or aborted): back to idle or paused."""
        self._jobs.pop(tp, None)
        if self._paused.get(tp):
            self._states[tp] = CleaningState.PAUSED
        else:
            self._states.pop(tp, None)

    def abort_and_pause(self, tp: TopicPartition) -> None:
        """Stop a cleaning in progress (its result is not swapped in) and keep the log from
        being cleaned until :meth:`resume` (Kafka's ``abortAndPauseCleaning``)."""
        job = self._jobs.get(tp)
        if job is not None:
            job.abort()
            self._states[tp] = CleaningState.ABORTED
        else:
            self._states[tp] = CleaningState.PAUSED
        self._paused[tp] = self._paused.get(tp, 0) + 1

    def resume(self, tp: TopicPartition) -> None:
        count = self._paused.get(tp, 0) - 1
        if count > 0:
            self._paused[tp] = count
            return
        self._paused.pop(tp, None)
        if self._states.get(tp) is CleaningState.PAUSED:
            self._states.pop(tp)

    def abort_all(self) -> None:
        """Shutdown: every cleaning in progress stops."""
        for job in self._jobs.values():
            job.abort()

    def forget(self, tp: TopicPartition, log_dir: Path | None) -> None:
        """The log is gone (deleted or moved away): its checkpoint entry goes too."""
        self.uncleanable.discard(tp)
        if log_dir is not None:
            self.update_checkpoint(log_dir, tp, None)

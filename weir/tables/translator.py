"""The translator's decisions, sans I/O: which led partition of a table topic to load or to
commit next, and what a result or a failure does to it.  Events in (leadership, the log's
last stable offset, results), actions out; the clock is ``now_ms``.

A partition's writer runs on its leader only.  On becoming leader it knows nothing: it first
reads the table's committed offset (``Load``), and resumes there.  Then, whenever the last
stable offset is past the table's offset, it waits up to half of ``weir.iceberg.target.lag.ms``
from the moment it saw the records (so several fetches' worth go into one data file), and
commits ``[table offset, last stable offset)`` (``Commit``).  One job per partition at a time;
a failed job is retried with an exponential backoff (the table falls behind and catches up).
Leadership lost or a new leader epoch drops the state: a late result of the old epoch is
ignored, and the next leadership reads the table again.
"""

from __future__ import annotations

from dataclasses import dataclass

from weir.common import TopicPartition

__all__ = ["Commit", "Load", "PartitionTable", "Translator"]

MIN_BACKOFF_MS = 500
MAX_BACKOFF_MS = 30_000


@dataclass(frozen=True)
class Load:
    tp: TopicPartition
    generation: int


@dataclass(frozen=True)
class Commit:
    tp: TopicPartition
    generation: int
    start: int
    upper: int


@dataclass
class PartitionTable:
    """What the leader knows of one partition's table."""

    tp: TopicPartition
    leader_epoch: int
    generation: int
    next_offset: int | None = None  # the table's offset of the partition; None: not read
    last_stable_offset: int = 0
    pending_since_ms: int | None = None
    busy: bool = False
    retry_at_ms: int = 0
    failures: int = 0
    error: str | None = None
    metadata_location: str | None = None
    rows_written: int = 0
    commits: int = 0

    @property
    def lag_records(self) -> int:
        """Offsets below the last stable offset that the table does not hold yet."""
        return max(0, self.last_stable_offset - (self.next_offset or 0))


class Translator:
    def __init__(self) -> None:
        self.partitions: dict[TopicPartition, PartitionTable] = {}
        # The led partitions by topic: the shell looks only at table topics' partitions.
        self.by_topic: dict[str, set[TopicPartition]] = {}
        self._generations = 0

    def on_leadership(self, tp: TopicPartition, is_leader: bool, leader_epoch: int) -> None:
        current = self.partitions.get(tp)
        if not is_leader:
            if self.partitions.pop(tp, None) is not None:
                led = self.by_topic[tp.topic]
                led.discard(tp)
                if not led:
                    del self.by_topic[tp.topic]
        elif current is None or current.leader_epoch != leader_epoch:
            self._generations += 1
            self.partitions[tp] = PartitionTable(tp, leader_epoch, self._generations)
            self.by_topic.setdefault(tp.topic, set()).add(tp)

    def decide(self, tp: TopicPartition, last_stable_offset: int, target_lag_ms: int,
               now_ms: int) -> Load | Commit | None:
        st = self.partitions.get(tp)
        if st is None:
            return None
        st.last_stable_offset = last_stable_offset
        if st.busy or now_ms < st.retry_at_ms:
            return None
        if st.next_offset is None:
            st.busy = True
            return Load(tp, st.generation)
        if last_stable_offset <= st.next_offset:
            st.pending_since_ms = None
            return None
        if st.pending_since_ms is None:
            st.pending_since_ms = now_ms
        if now_ms - st.pending_since_ms < max(0, target_lag_ms // 2) and st.error is None:
            return None
        st.busy = True
        return Commit(tp, st.generation, st.next_offset, last_stable_offset)

    def _current(self, tp: TopicPartition, generation: int) -> PartitionTable | None:
        st = self.partitions.get(tp)
        return st if st is not None and st.generation == generation else None

    def loaded(self, tp: TopicPartition, generation: int, next_offset: int,
               metadata_location: str | None) -> None:
        st = self._current(tp, generation)
        if st is not None:
            st.busy, st.failures, st.error = False, 0, None
            st.next_offset, st.metadata_location = next_offset, metadata_location

    def committed(self, tp: TopicPartition, generation: int, next_offset: int, rows: int,
                  metadata_location: str | None, now_ms: int) -> None:
        """A commit (or a stale attempt: ``next_offset`` is the table's, moved by another
        writer) finished."""
        st = self._current(tp, generation)
        if st is None:
            return
        st.busy, st.failures, st.error = False, 0, None
        st.next_offset, st.metadata_location = next_offset, metadata_location
        st.rows_written += rows
        st.commits += 1
        st.pending_since_ms = now_ms if st.last_stable_offset > next_offset else None

    def failed(self, tp: TopicPartition, generation: int, error: str, now_ms: int) -> int:
        """A job failed: retry after a backoff (returned, in ms)."""
        st = self._current(tp, generation)
        if st is None:
            return 0
        st.busy = False
        st.failures += 1
        st.error = error
        backoff = min(MAX_BACKOFF_MS, MIN_BACKOFF_MS * 2 ** min(st.failures - 1, 10))
        st.retry_at_ms = now_ms + backoff
        return backoff

"""Leader epoch cache (KIP-101 / KIP-279): which leader epoch started at which offset.

Entries ``(epoch, start_offset)`` are strictly increasing in both fields.  The cache
answers OffsetsForLeaderEpoch, which followers use to find the divergence point instead of
truncating to their high watermark.  Changes are persisted to ``leader-epoch-checkpoint``
(when the cache has a path): at once, or, for ``assign(..., defer=True)`` (a LeaderAndIsr
making this broker leader of many partitions), later by :meth:`LeaderEpochCache.flush` on
the storage thread (:mod:`weir.storage.deferred_writes`).

A deferred entry is safe because of two rules kept by :class:`~weir.storage.log.Log`, the
ones Kafka relies on for its asynchronously flushed truncations (``LeaderEpochFileCache``
``truncateFromEndAsyncFlush``): the log's recovery point never moves past a record while
the cache is dirty (``Log.flush`` flushes the cache first), and crash recovery re-reads
the leader epochs of the batches it recovers (as Kafka's ``LogSegment.recover``), so an
entry missing from the file after a crash is found again in the unflushed data.

Thread safety: the event loop mutates the cache; :meth:`flush` may run on another thread.
A short lock guards the entries; a second lock serialises the file writes, and a write is
skipped when the file already holds the entries.
"""

from __future__ import annotations

import bisect
import os
import threading
from pathlib import Path

from weir.protocol.errors import ErrorCode, KafkaError
from weir.storage.checkpoints import (
    PreparedWrite,
    epoch_checkpoint_text,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
    write_temp,
)

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "LeaderEpochCache"]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Ordered (epoch, start_offset) entries, optionally backed by a checkpoint file."""

    def __init__(self, path: Path | None = None, entries: list[tuple[int, int]] | None = None):
        self._path = path
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for epoch, offset in entries or []:
            self._append_checked(epoch, offset)
        self._lock = threading.Lock()  # the entries (loop vs. storage thread)
        self._write_lock = threading.Lock()  # one file write at a time, in order
        self._writes = 0  # file replacements so far (a batched write checks it: prepare)
        # What the checkpoint file holds, as far as this cache wrote or read it.
        self._durable: list[tuple[int, int]] | None = self.entries if path is not None else None
        # The entries a load made of that file (its truncations to the log's end and
        # start), while nothing else changed them: see ``loaded``.
        self._as_loaded: list[tuple[int, int]] | None = None

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache:
        """Load from ``leader-epoch-checkpoint`` (empty if absent)."""
        return cls(path, read_epoch_checkpoint(path))

    def _append_checked(self, epoch: int, offset: int) -> None:
        if self._epochs and (epoch <= self._epochs[-1] or offset < self._offsets[-1]):
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"{self._path}: non-monotonic epoch entry ({epoch}, {offset}) after {self.entries}",
            )
        self._epochs.append(epoch)
        self._offsets.append(offset)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def dirty(self) -> bool:
        """Whether the checkpoint file lacks a change (an ``assign(..., defer=True)``)."""
        return self._path is not None and self._durable != self.entries

    def mark_loaded(self) -> None:
        """The log loader's truncations are done: the file, loaded again at the same log
        end and start, gives these entries again."""
        self._as_loaded = self.entries

    @property
    def loaded(self) -> bool:
        """Whether the entries are still those the load made (see ``mark_loaded``)."""
        return self._as_loaded is not None and self._as_loaded == self.entries

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or -1 if the cache is empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_epoch(self) -> int:
        return self._epochs[0] if self._epochs else UNDEFINED_EPOCH

    def move_to(self, path: Path) -> None:
        """The checkpoint file now lives at ``path`` (its directory was renamed)."""
        if self._path is not None:
            self._path = path

    def _persist(self) -> None:
        self.flush()

    def flush(self, *, if_dir_exists: bool = False) -> None:
        """Write ``leader-epoch-checkpoint`` if it lacks a change (any thread).

        Raises OSError if the write fails (the cache stays dirty).  ``if_dir_exists`` (the
        storage thread): a partition dir removed meanwhile (the log was deleted) is not an
        error, and nothing is written (Kafka's ``writeIfDirExists``)."""
        if self._path is None:
            return
        with self._write_lock:
            with self._lock:
                entries = self.entries
            if entries == self._durable:
                return
            path = self._path
            if if_dir_exists and not path.parent.is_dir():
                return
            write_epoch_checkpoint(path, entries)
            self._writes += 1
            self._durable = entries

    def prepare(self, *, if_dir_exists: bool = False) -> PreparedWrite | None:
        """The first half of :meth:`flush` for a batched write: the temp file written
        (not synced), or None if nothing needs writing.  Raises OSError (cache stays dirty).

        Writes stay in order without holding the file-write lock across the batch: the
        result's rename takes the lock and is skipped when another write replaced the
        file (or reused the temp file) since this prepare, and ``durable`` records the
        entries only if no write came after the rename."""
        if self._path is None:
            return None
        with self._write_lock:
            with self._lock:
                entries = self.entries
            path = self._path
            if entries == self._durable or (if_dir_exists and not path.parent.is_dir()):
                return None
            tmp = write_temp(path, epoch_checkpoint_text(entries))
            prepared_at = self._writes
        renamed_at = -1

        def replace() -> bool:
            nonlocal renamed_at
            with self._write_lock:
                if self._writes != prepared_at or self._path != path:
                    return False  # superseded: the file already holds newer entries
                try:
                    os.replace(tmp, path)
                except OSError:
                    tmp.unlink(missing_ok=True)  # under the lock: no flush is writing it
                    raise
                self._writes += 1
                renamed_at = self._writes
                return True

        def durable() -> None:
            with self._write_lock:
                if self._writes == renamed_at:
                    self._durable = entries

        return PreparedWrite(tmp, path, replace, durable)

    def assign(self, epoch: int, start_offset: int, *, defer: bool = False) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        Entries that conflict (epoch ≥ ``epoch`` or start ≥ ``start_offset``) are dropped,
        as Kafka does, so the cache stays monotonic.  ``defer``: the checkpoint file is
        written later, by :meth:`flush` (see the module docstring for why that is safe).
        """
        if epoch < 0:
            return False
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._offsets[-1]:
            return False
        keep = 0
        while keep < len(self._epochs) and (
            self._epochs[keep] < epoch and self._offsets[keep] < start_offset
        ):
            keep += 1
        with self._lock:
            del self._epochs[keep:], self._offsets[keep:]
            self._epochs.append(epoch)
            self._offsets.append(start_offset)
        if not defer:
            self._persist()
        return True

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the entry with the largest start offset ≤ ``offset``."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._epochs[i - 1] if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch ≤ requested, end offset of that epoch).

        The end offset is the start of the next higher epoch, or the LEO when the requested
        epoch is the latest.  (-1, -1) when the epoch is undefined or above every known
        epoch.  Below the first epoch Kafka answers (requested, first start offset): that
        data is gone from the leader, and the follower should restart from there.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    def truncate_from_end(self, end_offset: int, *, defer: bool = False) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it).
        ``defer``: the file is written later (Kafka's ``truncateFromEndAsyncFlush``; a
        stale file is truncated again when the log is next loaded)."""
        i = bisect.bisect_left(self._offsets, end_offset)
        if i < len(self._offsets):
            with self._lock:
                del self._epochs[i:], self._offsets[i:]
            if not defer:
                self._persist()

    def truncate_from_start(self, start_offset: int, *, defer: bool = False) -> None:
        """Drop entries wholly below ``start_offset``; the covering one moves up to it.
        ``defer``: as for :meth:`truncate_from_end` (``truncateFromStartAsyncFlush``)."""
        i = bisect.bisect_right(self._offsets, start_offset)
        if i == 0:
            return
        floor = i - 1
        if floor == 0 and self._offsets[0] == start_offset:
            return
        with self._lock:
            del self._epochs[:floor], self._offsets[:floor]
            self._offsets[0] = start_offset
        if not defer:
            self._persist()

    def clear(self) -> None:
        """Remove every entry (log truncated fully)."""
        with self._lock:
            self._epochs.clear()
            self._offsets.clear()
        self._persist()

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries})"

"""Sparse per-segment indexes: ``.index`` (offset → position) and ``.timeindex``.

Design choice: entries live in two in-memory lists used for binary search, and the file is a
plain array of them (no preallocation, no mmap), so it always has its exact length, which makes
validation on open simple (length a multiple of the entry size, keys monotonic).
``segment.index.bytes`` still bounds an index: when it is full the segment rolls.

Writes are deferred: new entries are written (and fsynced) when the segment is flushed or
closed, by opening the file, appending and closing it again, so an index holds no file
descriptor between flushes — one descriptor per open segment, its log, as Kafka has since
1.1 (KAFKA-6175: lazily opened, memory-mapped indexes whose descriptors are closed).  An
index that lacks its newest entries after a crash is still correct (a sparse index only
shortens scans); and the segments after the recovery point, the only ones that can lack
them, are recovered and re-indexed on the next start anyway (Kafka's ``LogLoader``).

* Offset index entry: relative offset u32, file position u32 (8 bytes).  An entry (O, P)
  means "the batch starting at offset O begins at position P".
* Time index entry: timestamp i64, relative offset u32 (12 bytes).  An entry (T, O) means
  "every batch before offset O, and the batch at O, has maxTimestamp ≤ T"; T strictly grows.

``lookup(target)`` returns the entry with the largest key ≤ target, or None.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

__all__ = ["IndexCorruptError", "OffsetIndex", "TimeIndex"]


class IndexCorruptError(Exception):
    """An index file failed validation; the caller rebuilds it from the log."""


class _SparseIndex:
    """Monotonic (key, value) pairs stored as fixed-size big-endian records."""

    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY.size)
        self._keys: list[int] = []
        self._values: list[int] = []
        self._written = 0  # entries on disk; the rest are written by the next flush

    # -- persistence -------------------------------------------------------------------

    def load(self) -> None:
        """Read and validate the file; raises IndexCorruptError (missing counts as corrupt)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError as exc:
            raise IndexCorruptError(f"{self.path} is missing") from exc
        if len(data) % self.ENTRY.size:
            raise IndexCorruptError(f"{self.path} has a partial entry")
        self._keys.clear()
        self._values.clear()
        for raw in self.ENTRY.iter_unpack(data):
            key, value = self._decode(*raw)
            if self._keys and (key <= self._keys[-1] or value < self._values[-1]):
                raise IndexCorruptError(f"{self.path} is not monotonic")
            self._keys.append(key)
            self._values.append(value)
        self._written = len(self._keys)

    def reset(self, *, file: bool = True) -> None:
        """Empty the index (before a rebuild), and its file unless ``file`` is False (the
        index of an empty segment, which a load never reads: the next flush rewrites the
        file whole)."""
        self._keys.clear()
        self._values.clear()
        self._written = 0
        if file:
            with open(self.path, "wb"):
                pass

    def _append(self, key: int, value: int) -> None:
        self._keys.append(key)
        self._values.append(value)

    def _truncate_entries(self, count: int) -> None:
        if count >= len(self._keys):
            return
        del self._keys[count:], self._values[count:]
        if count < self._written:
            os.truncate(self.path, count * self.ENTRY.size)
            self._written = count

    def flush(self) -> None:
        """Write and fsync the entries appended since the last flush."""
        if self._written == len(self._keys):
            return
        data = b"".join(self.ENTRY.pack(*self._encode(k, v)) for k, v in
                        zip(self._keys[self._written:], self._values[self._written:],
                            strict=True))
        # Nothing written yet: the file is rewritten whole (an empty segment's index is
        # never read at load, so its file may still hold entries of an older segment).
        with open(self.path, "ab" if self._written else "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self._written = len(self._keys)

    def close(self) -> None:
        self.flush()

    def release(self) -> None:
        """Forget unwritten entries (the index is about to be reloaded or rebuilt)."""
        del self._keys[self._written:], self._values[self._written:]

    def delete(self) -> None:
        self._keys.clear()
        self._values.clear()
        self._written = 0
        self.path.unlink(missing_ok=True)

    # -- queries -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    def lookup(self, target: int) -> tuple[int, int] | None:
        """The entry with the largest key ≤ ``target``."""
        i = bisect.bisect_right(self._keys, target)
        return (self._keys[i - 1], self._values[i - 1]) if i else None

    def last_entry(self) -> tuple[int, int] | None:
        return (self._keys[-1], self._values[-1]) if self._keys else None

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._keys, self._values, strict=True))

    # -- codec hooks -------------------------------------------------------------------
    def _encode(self, key: int, value: int) -> tuple[int, int]:
        raise NotImplementedError

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        raise NotImplementedError


class OffsetIndex(_SparseIndex):
    """Absolute offset → file position of the batch starting at that offset."""

    ENTRY = struct.Struct(">II")

    def _encode(self, key: int, value: int) -> tuple[int, int]:
        return key - self.base_offset, value

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        return a + self.base_offset, b

    def lookup_position(self, position: int) -> tuple[int, int] | None:
        """The entry with the largest position ≤ ``position`` (positions grow with offsets)."""
        i = bisect.bisect_right(self._values, position)
        return (self._keys[i - 1], self._values[i - 1]) if i else None

    def append(self, offset: int, position: int) -> None:
        if self._keys and offset <= self._keys[-1]:
            raise ValueError(f"offset index entry {offset} not above {self._keys[-1]}")
        self._append(offset, position)

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets ≥ ``offset``."""
        self._truncate_entries(bisect.bisect_left(self._keys, offset))

    def check_positions(self, log_size: int) -> None:
        """Every position must fall inside the log file."""
        if self._values and self._values[-1] >= log_size:
            raise IndexCorruptError(f"{self.path} points past the end of the log")


class TimeIndex(_SparseIndex):
    """Max timestamp so far → offset of a batch (all earlier batches are ≤ that timestamp)."""

    ENTRY = struct.Struct(">qI")

    def _encode(self, key: int, value: int) -> tuple[int, int]:
        return key, value - self.base_offset

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        return a, b + self.base_offset

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append only if ``timestamp`` is newer than the last entry."""
        if self._keys and timestamp <= self._keys[-1]:
            return
        if self._values and offset < self._values[-1]:
            raise ValueError(f"time index offset {offset} below {self._values[-1]}")
        self._append(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove entries pointing at offsets ≥ ``offset``."""
        self._truncate_entries(bisect.bisect_left(self._values, offset))

    def max_timestamp(self) -> int:
        return self._keys[-1] if self._keys else -1

"""The aborted-transaction index: ``<base offset>.txnindex`` beside each segment (KIP-98).

Kafka's ``TransactionIndex``: one 34-byte entry per *aborted* transaction whose ABORT marker
lies in the segment, in marker order, each Kafka's ``AbortedTxn``::

    version i16 (0) | producerId i64 | firstOffset i64 | lastOffset i64 | lastStableOffset i64

``firstOffset`` is the transaction's first data offset, ``lastOffset`` the marker's offset,
``lastStableOffset`` the LSO right after the marker (the first offset of the earliest other
transaction still open then, else ``lastOffset + 1``).  A read_committed fetch asks for the
aborted transactions overlapping the fetched range (:func:`collect_aborted_transactions`,
Kafka's ``UnifiedLog.collectAbortedTransactions``): the search starts at the segment
holding the fetch offset and stops at the first entry whose ``lastStableOffset`` reaches the
upper bound — nothing later in the log can overlap the range.

The file is append-only with an in-memory mirror; an absent file means an empty index (Kafka
creates it lazily too).  A truncated last entry is dropped on load.  The log cleaner keeps a
segment's aborted entries for the transactions it retains (see :func:`entries_overlapping`).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ENTRY_SIZE",
    "AbortedTxn",
    "TransactionIndex",
    "collect_aborted_transactions",
    "entries_overlapping",
]

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(CURRENT_VERSION, self.producer_id, self.first_offset,
                           self.last_offset, self.last_stable_offset)

    @classmethod
    def decode(cls, buf: bytes | memoryview, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = _ENTRY.unpack_from(buf, pos)
        if version != CURRENT_VERSION:
            raise ValueError(f"unknown aborted transaction entry version {version}")
        return cls(pid, first, last, lso)


class TransactionIndex:
    """The aborted transactions of one segment (entries ordered by ``last_offset``)."""

    def __init__(self, path: Path, base_offset: int, *, load: bool = True) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        if load:
            self.entries = self._read()

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        usable = len(data) - len(data) % ENTRY_SIZE
        if usable != len(data):
            log.warning("%s: %d trailing bytes of a torn entry dropped", self.path,
                        len(data) - usable)
            with open(self.path, "r+b") as f:
                f.truncate(usable)
        out = []
        for pos in range(0, usable, ENTRY_SIZE):
            out.append(AbortedTxn.decode(data, pos))
        return out

    def append(self, entry: AbortedTxn) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transaction at {entry.last_offset} is not "
                             f"after the last one at {self.entries[-1].last_offset}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, entry.encode())
        finally:
            os.close(fd)
        self.entries.append(entry)

    def flush(self) -> None:
        if not self.entries:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) == len(self.entries):
            return
        self.entries = keep
        self._rewrite()

    def reset(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)

    def replace(self, entries: Sequence[AbortedTxn]) -> None:
        """Rewrite the whole index (recovery rebuilds it; the cleaner keeps a subset)."""
        self.entries = list(entries)
        self._rewrite()

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(b"".join(e.encode() for e in self.entries))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's ``TransactionIndex.collectAbortedTxns``: the entries overlapping
        [fetch_offset, upper_bound) and whether the search is complete (an entry's LSO
        reached the upper bound)."""
        out = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                out.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return out, True
        return out, False


def collect_aborted_transactions(indexes: Iterable[TransactionIndex], fetch_offset: int,
                                 upper_bound: int) -> list[AbortedTxn]:
    """The aborted transactions a read_committed consumer of [fetch_offset, upper_bound)
    must know to drop their records.

    ``indexes`` are the transaction indexes of the segments from the one containing
    ``fetch_offset`` onwards, in log order (Kafka's ``collectAbortedTransactions``)."""
    out: list[AbortedTxn] = []
    for index in indexes:
        found, complete = index.collect(fetch_offset, upper_bound)
        out.extend(found)
        if complete:
            break
    return out


def entries_overlapping(entries: Iterable[AbortedTxn], start: int, end: int) -> list[AbortedTxn]:
    """The entries of aborted transactions with data in [start, end) (for the cleaner)."""
    return [e for e in entries if e.last_offset >= start and e.first_offset < end]

"""The cleaner's key → latest offset map, bounded like Kafka's ``SkimpyOffsetMap``.

Kafka stores a 16-byte MD5 digest and an 8-byte offset per key in a fixed buffer of
``log.cleaner.dedupe.buffer.size`` bytes (split between the cleaner threads) filled to at
most ``log.cleaner.io.buffer.load.factor``; a digest collision between two keys is accepted
(astronomically unlikely).  Here the entries live in a dict keyed by the same digest (or
the key itself when it is no longer than a digest) and the same arithmetic bounds how many
fit: ``slots = buffer_bytes // 24`` and the map is "full" at
``slots * load_factor`` entries, when the cleaner stops reading the dirty section (the rest
is cleaned by the next round).
"""

from __future__ import annotations

import hashlib

__all__ = ["ENTRY_BYTES", "OffsetMap"]

HASH_BYTES = 16  # MD5
ENTRY_BYTES = HASH_BYTES + 8


class OffsetMap:
    """Key digest → the largest offset seen for the key."""

    def __init__(self, buffer_bytes: int, load_factor: float = 0.9) -> None:
        slots = buffer_bytes // ENTRY_BYTES
        if slots < 1:
            raise ValueError(f"dedupe buffer of {buffer_bytes} bytes holds no entry")
        self.slots = slots
        self.max_entries = max(1, int(slots * load_factor))
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1
        self.lookups = 0
        self.probes = 0

    @staticmethod
    def digest(key: bytes) -> bytes:
        """The key itself when it is at most 16 bytes (no hashing, no collision), else its
        MD5 digest: every entry holds at most 16 bytes of key, as Kafka's."""
        if len(key) <= HASH_BYTES:
            return key
        return hashlib.md5(key, usedforsecurity=False).digest()

    def __len__(self) -> int:
        return len(self._map)

    @property
    def is_full(self) -> bool:
        return len(self._map) >= self.max_entries

    @property
    def utilization(self) -> float:
        """Entries over slots (Kafka's ``OffsetMap.utilization``)."""
        return len(self._map) / self.slots

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` for ``key`` (offsets are put in increasing order)."""
        self._map[self.digest(key)] = offset
        self.latest_offset = max(self.latest_offset, offset)

    def update_latest(self, offset: int) -> None:
        """Account for a record without a key (or a batch with no records) at ``offset``."""
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int:
        """The latest offset recorded for ``key``, -1 if none."""
        self.lookups += 1
        return self._map.get(self.digest(key), -1)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

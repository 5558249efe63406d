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

    def put_all(self, offsets: list[int], keys: list[bytes | None]) -> int:
        """:meth:`put` for each record of a batch (increasing offsets) with a key; returns
        how many had one."""
        m, digest, n = self._map, self.digest, 0
        for offset, key in zip(offsets, keys, strict=True):
            if key is not None:
                m[key if len(key) <= HASH_BYTES else digest(key)] = offset
                n += 1
        if offsets:
            self.latest_offset = max(self.latest_offset, offsets[-1])
        return n

    def get_all(self, keys: list[bytes | None]) -> list[int]:
        """:meth:`get` for each key (-1 for None and unknown keys)."""
        get, digest = self._map.get, self.digest
        self.lookups += len(keys)
        return [-1 if key is None else get(key if len(key) <= HASH_BYTES else digest(key), -1)
                for key in keys]

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

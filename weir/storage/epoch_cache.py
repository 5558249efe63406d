"""Leader epoch cache (KIP-101 / KIP-279): which leader epoch started at which offset.

Entries ``(epoch, start_offset)`` are strictly increasing in both fields.  The cache
answers OffsetsForLeaderEpoch, which followers use to find the divergence point instead of
truncating to their high watermark.  Every change is persisted to
``leader-epoch-checkpoint`` (when the cache has a path).
"""

from __future__ import annotations

import bisect
from pathlib import Path

from weir.protocol.errors import ErrorCode, KafkaError
from weir.storage.checkpoints import read_epoch_checkpoint, write_epoch_checkpoint

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
        if self._path is not None:
            write_epoch_checkpoint(self._path, self.entries)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        Entries that conflict (epoch ≥ ``epoch`` or start ≥ ``start_offset``) are dropped,
        as Kafka does, so the cache stays monotonic.
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
        del self._epochs[keep:], self._offsets[keep:]
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
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

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated to it)."""
        i = bisect.bisect_left(self._offsets, end_offset)
        if i < len(self._offsets):
            del self._epochs[i:], self._offsets[i:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below ``start_offset``; the covering one moves up to it."""
        i = bisect.bisect_right(self._offsets, start_offset)
        if i == 0:
            return
        floor = i - 1
        if floor == 0 and self._offsets[0] == start_offset:
            return
        del self._epochs[:floor], self._offsets[:floor]
        self._offsets[0] = start_offset
        self._persist()

    def clear(self) -> None:
        """Remove every entry (log truncated fully)."""
        self._epochs.clear()
        self._offsets.clear()
        self._persist()

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries})"

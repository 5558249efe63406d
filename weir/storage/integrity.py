"""What a log does with a corrupt file found while loading (see README.md, "Corrupt files").

Every case logs a WARNING naming the file and what is done about it, and none stops the
broker: a damaged file is either rebuilt from the segments or replaced by a value that costs
work (a longer recovery, a high watermark learnt again) but never committed data.

* Offset checkpoints of a log dir (:func:`read_checkpoint_or_reset`): Kafka's ``LogManager``
  resets an unreadable ``recovery-point-offset-checkpoint`` to 0 and an unreadable
  ``log-start-offset-checkpoint`` to the first segment's base offset, with a warning; Weir
  does the same and treats an unreadable ``replication-offset-checkpoint`` as "no high
  watermark known" (the log's start; leaders and followers learn it again through fetches),
  where Kafka's ``OffsetCheckpointFile`` would fail the whole log dir.
* ``leader-epoch-checkpoint`` (:func:`load_epoch_cache`): rebuilt from the partition leader
  epoch of every batch, as Kafka's ``LogSegment.recover`` re-assigns the epochs of the batches
  it recovers into the ``LeaderEpochFileCache``.
* Segments trusted without recovery (after a clean shutdown, or below the recovery point):
  :func:`checked_headers` walks their batch headers (the walk that rebuilds the producer
  state anyway) and raises :class:`CorruptSegmentError` at the first impossible header;
  ``Log.open`` then loads again with recovery from that segment on, which truncates it at
  the first invalid batch and deletes the segments after it (Kafka's ``LogSegment.recover``;
  Kafka itself would fail to start on a corrupt trusted segment).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import BatchHeader
from weir.storage.checkpoints import read_offset_checkpoint, write_epoch_checkpoint
from weir.storage.epoch_cache import LeaderEpochCache
from weir.storage.segment import LogSegment

__all__ = [
    "CorruptSegmentError",
    "checked_headers",
    "load_epoch_cache",
    "read_checkpoint_or_reset",
    "recover_epochs",
]

log = logging.getLogger(__name__)


class CorruptSegmentError(KafkaError):
    """A trusted segment holds an impossible batch header (Kafka's CorruptRecordException)."""

    def __init__(self, segment: LogSegment, position: int, reason: str) -> None:
        super().__init__(
            ErrorCode.corrupt_message,
            f"corrupt log segment {segment.log_path} at byte {position}: {reason}",
        )
        self.path = segment.log_path
        self.base_offset = segment.base_offset


def _is_malformed_file(exc: KafkaError) -> bool:
    return exc.code == ErrorCode.kafka_storage_error


def read_checkpoint_or_reset(path: Path, fallback: str) -> tuple[dict, bool]:
    """A log dir's offset checkpoint, or ({}, True) with a warning if it is malformed.

    ``fallback`` says what the broker does without it.  I/O errors (``OSError``) still
    propagate: they take the log dir offline.
    """
    try:
        return read_offset_checkpoint(path), False
    except KafkaError as exc:
        if not _is_malformed_file(exc):
            raise
        log.warning("%s; %s, and the file will be rewritten", exc, fallback)
        return {}, True


def checked_headers(segments: Iterable[LogSegment]) -> Iterator[BatchHeader]:
    """Every batch header of ``segments``, checking what a header walk can see: a header
    that parses, magic 2, offsets that only grow, batches that end inside the file, and a
    segment whose batches end exactly where its file ends.  CRCs are not checked."""
    for seg in segments:
        position, expected = 0, seg.base_offset
        while position < seg.size:
            try:
                header = seg.header_at(position)
            except KafkaError as exc:
                raise CorruptSegmentError(seg, position, exc.message) from exc
            if header is None:
                raise CorruptSegmentError(seg, position, "truncated batch header")
            if header.magic != 2:
                raise CorruptSegmentError(seg, position, f"magic {header.magic}, expected 2")
            if header.base_offset < expected or header.last_offset_delta < 0:
                raise CorruptSegmentError(
                    seg,
                    position,
                    f"batch offsets {header.base_offset}+"
                    f"{header.last_offset_delta} do not follow offset {expected}",
                )
            if position + header.size > seg.size:
                raise CorruptSegmentError(
                    seg, position, f"batch of {header.size} bytes runs past the end of the file"
                )
            yield header
            position += header.size
            expected = header.next_offset
        if expected != seg.next_offset:
            raise CorruptSegmentError(
                seg, position, f"batches end at offset {expected}, index says {seg.next_offset}"
            )


def load_epoch_cache(path: Path, segments: list[LogSegment]) -> LeaderEpochCache:
    """The partition's leader epoch cache; a malformed checkpoint is rebuilt from the
    partition leader epochs of the batches (may raise :class:`CorruptSegmentError`)."""
    try:
        return LeaderEpochCache.load(path)
    except KafkaError as exc:
        if not _is_malformed_file(exc):
            raise
        log.warning(
            "%s; rebuilding the leader epoch cache from the batches of %s", exc, path.parent
        )
    entries: list[tuple[int, int]] = []
    for header in checked_headers(segments):
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (not entries or epoch > entries[-1][0]):
            entries.append((epoch, header.base_offset))
    write_epoch_checkpoint(path, entries)
    return LeaderEpochCache(path, entries)


def recover_epochs(cache: LeaderEpochCache, segments: list[LogSegment], recovered_from: int
                   ) -> None:
    """Add the leader epochs of the batches from ``recovered_from`` on that ``cache`` lacks
    (Kafka's ``LogSegment.recover``: each batch whose epoch is above the latest one starts
    that epoch); the checkpoint is written once if anything was added."""
    tail = [seg for seg in segments if seg.base_offset >= recovered_from]
    for header in checked_headers(tail):
        epoch = header.partition_leader_epoch
        if epoch > cache.latest_epoch:
            cache.assign(epoch, header.base_offset, defer=True)
    cache.flush()

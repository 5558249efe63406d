"""Loading a partition's log from its directory: Kafka's ``LogLoader``.

Order (as Kafka's ``LogLoader.load``): finish or roll back an interrupted log-cleaner swap
(:mod:`weir.storage.swap`), delete temporary and orphaned files, open every segment —
recovering those from the recovery point on after an unclean shutdown — then the leader
epoch cache and the producer state (newest snapshot plus a replay of the batch headers
after it).  A trusted segment found corrupt while loading is recovered by loading once more
with the recovery point at its base offset (see :mod:`weir.storage.integrity`).

The result is a :class:`LoadedLog` (Kafka's ``LoadedLogOffsets`` plus the loaded parts);
``Log.open`` builds the log from it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from weir.protocol.errors import ErrorCode, KafkaError
from weir.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, TMP_SUFFIX
from weir.storage.config import LogConfig
from weir.storage.epoch_cache import LeaderEpochCache
from weir.storage.integrity import CorruptSegmentError, load_epoch_cache, recover_epochs
from weir.storage.producer_snapshot import snapshot_offsets
from weir.storage.producer_state import ProducerStateManager
from weir.storage.producer_state_loader import load_producer_state
from weir.storage.segment import LogSegment
from weir.storage.swap import CLEANED_SUFFIX, SWAP_SUFFIX, complete_interrupted_swaps

__all__ = ["LoadedLog", "load_log", "new_segment"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LoadedLog:
    """What a load found: the segments (the last one active), the log start offset, the
    leader epoch cache and the producer state at the log end."""

    segments: list[LogSegment]
    log_start_offset: int
    epoch_cache: LeaderEpochCache
    producer_state: ProducerStateManager


def load_log(directory: Path, config: LogConfig, *, recovery_point: int,
             log_start_offset: int | None, clean_shutdown: bool, now_ms: int) -> LoadedLog:
    """Load (or create) the log in ``directory``; recover unflushed segments unless the
    previous shutdown was clean."""
    try:
        return _load(directory, config, log_start_offset, now_ms, recovery_point,
                     clean_shutdown)
    except CorruptSegmentError as exc:
        log.warning("%s; recovering it and the segments after it", exc)
        recovery_point = min(recovery_point, exc.base_offset)
    try:
        return _load(directory, config, log_start_offset, now_ms, recovery_point, False)
    except CorruptSegmentError as exc:  # recovery validated it: not expected
        raise KafkaError(ErrorCode.kafka_storage_error, str(exc)) from exc


def _load(directory: Path, config: LogConfig, log_start_offset: int | None, now_ms: int,
          recovery_point: int, clean_shutdown: bool) -> LoadedLog:
    # One listing of the directory serves every step below (a broker restarting with
    # thousands of replicas would otherwise list each partition directory four times).
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        directory.mkdir(parents=True, exist_ok=True)
        names = []
    if any(name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for name in names):
        complete_interrupted_swaps(directory, index_interval_bytes=config.index_interval_bytes,
                                   max_index_bytes=config.segment_index_bytes, now_ms=now_ms)
        names = os.listdir(directory)
    present = _remove_leftovers(directory, names)
    segments = _load_segments(directory, config, recovery_point, clean_shutdown, now_ms,
                              present)
    start = max(log_start_offset or 0, segments[0].base_offset if segments else 0)
    if segments and start > segments[-1].next_offset:
        for seg in segments:  # data past the checkpointed log start was lost
            seg.delete()
        segments = []
    if not segments:
        segments = [new_segment(directory, start, config, now_ms)]
    producer_state = ProducerStateManager()
    try:
        cache = load_epoch_cache(directory / LEADER_EPOCH_CHECKPOINT, segments)
        recovered = None if clean_shutdown else next(
            (s.base_offset for i, s in enumerate(segments)
             if i + 1 == len(segments) or segments[i + 1].base_offset > recovery_point),
            None)
        load_producer_state(directory, segments, producer_state, recovered_from=recovered,
                            snapshots=snapshot_offsets(present))
        if recovered is not None:
            # Kafka's LogSegment.recover: the epochs of the recovered batches go back
            # into the cache (a deferred checkpoint write may have died with the process).
            recover_epochs(cache, segments, recovered)
    except CorruptSegmentError:
        for seg in segments:
            seg.release()
        raise
    # Written later by the log manager's storage thread, as Kafka's LogLoader does
    # (truncateFrom*AsyncFlush): every load repeats these truncations anyway.
    cache.truncate_from_end(segments[-1].next_offset, defer=True)
    cache.truncate_from_start(start, defer=True)
    cache.mark_loaded()
    return LoadedLog(segments, start, cache, producer_state)


def new_segment(directory: Path, base: int, config: LogConfig, now_ms: int) -> LogSegment:
    return LogSegment.create(
        directory,
        base,
        index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes,
        now_ms=now_ms,
    )


def _remove_leftovers(directory: Path, names: list[str]) -> frozenset[str]:
    """Delete temp files, ``.deleted`` files and indexes without a ``.log``; returns the
    names left."""
    present = set(names)
    for name in names:
        if name.endswith((TMP_SUFFIX, ".deleted", CLEANED_SUFFIX, SWAP_SUFFIX)):
            (directory / name).unlink(missing_ok=True)
            present.discard(name)
        elif name.endswith((".index", ".timeindex", ".txnindex")):
            stem = name.split(".", 1)[0]
            if f"{stem}.log" not in present:
                (directory / name).unlink(missing_ok=True)
                present.discard(name)
    return frozenset(present)


def _segment_bases(names: frozenset[str]) -> list[int]:
    bases = []
    for name in names:
        stem, dot, ext = name.partition(".")
        if ext == "log" and dot and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def _load_segments(
    directory: Path, config: LogConfig, recovery_point: int, clean: bool, now_ms: int,
    present: frozenset[str],
) -> list[LogSegment]:
    """Open every segment; recover those at/after the recovery point after a crash.

    If recovery cuts a segment short, later segments are unreachable and are deleted.
    """
    bases = _segment_bases(present)
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        later = bases[i + 1 :]
        recover = not clean and (not later or later[0] > recovery_point)
        seg, truncated = LogSegment.open(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            now_ms=now_ms,
            recover=recover,
            present=present,
        )
        if recover and seg.size:
            # Recovered bytes may be only in the page cache of the crashed process: made
            # durable now (an empty segment has none, so recovering 10,000 idle replicas
            # costs no fsync each; a truncation to empty is synced at the next flush/close).
            seg.flush()
        segments.append(seg)
        if later and (truncated or seg.next_offset > later[0]):
            for base_after in later:
                _delete_segment_files(directory, base_after)
            break
    return segments


def _delete_segment_files(directory: Path, base: int) -> None:
    for suffix in (".log", ".index", ".timeindex"):
        (directory / f"{base:020d}{suffix}").unlink(missing_ok=True)

"""Moving replicas between the log dirs of one broker (KIP-113, JBOD).

Kafka's ``ReplicaManager.alterReplicaLogDirs`` and ``ReplicaAlterLogDirsManager`` /
``ReplicaAlterLogDirsThread``: AlterReplicaLogDirs creates a *future log* of the partition
in the destination dir, and a mover task copies the current log into it while the partition
keeps being served (produce, fetch, replication all use the current log).  The copy follows
the current log like a follower follows its leader: batches are read from the current log
at the future log's end and appended with their offsets and leader epochs; if the current
log was truncated (this broker is a follower whose leader changed) the future log is
truncated by the KIP-101 rule (end offset of its latest epoch in the current log).  Reading
and appending large chunks runs on worker threads; the last small gap is closed on the event
loop and, in the same step, the future log is swapped in by renames
(:meth:`LogManager.replace_current_with_future`), so no append can fall between the
check "caught up" and the swap.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from weir.asyncutil import cancel_and_wait
from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.storage.log import Log
from weir.storage.log_dirs import future_dir_name
from weir.storage.log_manager import LogManager

if TYPE_CHECKING:
    from weir.replication.replica_manager import ReplicaManager

__all__ = ["CopyQuota", "LogDirMover", "alter_replica_log_dirs"]

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
"""Bytes copied per step on a worker thread (Kafka's ``replica.fetch.max.bytes`` role)."""
ON_LOOP_BYTES = 64 << 10
"""Bytes copied on the event loop per step; a gap this small is closed there and the swap
follows in the same step."""
IDLE_S = 0.05
"""Pause between steps that made no progress (the current log is offline or empty)."""
UNLIMITED = 2**63 - 1


class CopyQuota:
    """``replica.alter.log.dirs.io.max.bytes.per.second``: one rate for all moves of the
    broker (Kafka's alter-log-dirs replication quota); unlimited by default."""

    def __init__(self, bytes_per_second: int = UNLIMITED, clock=time.monotonic) -> None:
        self.rate = bytes_per_second
        self._clock = clock
        self._start = clock()
        self._bytes = 0

    @property
    def limited(self) -> bool:
        return 0 < self.rate < UNLIMITED

    def chunk(self, wanted: int) -> int:
        """How many bytes one step may copy (a tenth of a second's worth when limited)."""
        return min(wanted, max(self.rate // 10, 1)) if self.limited else wanted

    def record(self, size: int) -> float:
        """Count ``size`` copied bytes; the seconds to wait before copying more."""
        if not self.limited:
            return 0.0
        now = self._clock()
        if now - self._start > 1.0 and self._bytes <= self.rate * (now - self._start):
            self._start, self._bytes = now, 0  # idle for a while: no credit is carried
        self._bytes += size
        return max(0.0, self._bytes / self.rate - (now - self._start))


class LogDirMover:
    """One task per partition whose replica moves to another log dir of this broker."""

    def __init__(self, replica_manager: ReplicaManager, log_manager: LogManager,
                 quota: CopyQuota | None = None) -> None:
        self.rm = replica_manager
        self.lm = log_manager
        self.quota = quota or CopyQuota()
        self._tasks: dict[TopicPartition, asyncio.Task] = {}
        self._deletions: set[asyncio.Task] = set()
        self._closing = False
        # Called after a swap as listener(tp, old log dir, new log dir).
        self.moved_listeners: list[Callable[[TopicPartition, Path, Path], None]] = []

    def moving(self) -> set[TopicPartition]:
        return {tp for tp, t in self._tasks.items() if not t.done()}

    def start(self, tp: TopicPartition) -> None:
        """Start (or keep) copying into the partition's future log, if it has one (Kafka's
        ``maybeAddLogDirFetchers``, also after a restart with a future log on disk)."""
        if self._closing or self.lm.future_log(tp) is None:
            return
        task = self._tasks.get(tp)
        if task is not None and not task.done():
            return
        self._tasks[tp] = asyncio.get_running_loop().create_task(
            self._run(tp), name=f"alter-log-dir-{tp}")

    def cancel(self, tp: TopicPartition) -> None:
        """Stop copying now (the caller removes or keeps the future log)."""
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()

    async def close(self, grace_s: float = 5.0) -> None:
        """Stop every move between two steps (a copy on a worker thread cannot be
        interrupted, and the logs are closed after this); the future logs stay on disk and
        the moves resume after the restart."""
        self._closing = True
        tasks, self._tasks = list(self._tasks.values()), {}
        if tasks:
            await asyncio.wait(tasks, timeout=grace_s)
        await cancel_and_wait(*tasks)
        if self._deletions:  # old copies being deleted: let them finish
            await asyncio.wait(list(self._deletions), timeout=grace_s)

    # -- the copy loop -------------------------------------------------------------------
    async def _run(self, tp: TopicPartition) -> None:
        # Kafka's abortAndPauseCleaning for a moving partition: the log cleaner does not
        # replace segments of the current log while they are being copied.
        cleaner = getattr(self.lm, "cleaner", None)
        if cleaner is not None:
            cleaner.abort_and_pause(tp)
        try:
            while not self._closing:
                step = self._step(tp)
                if step is None:
                    return
                if step is _IDLE:
                    await asyncio.sleep(IDLE_S)
                    continue
                source_dir, dest_dir, current, future = step
                copied = await self._copy_chunk(tp, current, future, source_dir, dest_dir)
                delay = self.quota.record(copied)
                if delay:
                    await asyncio.sleep(delay)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("moving %s to another log dir failed", tp)
        finally:
            if cleaner is not None:
                cleaner.resume(tp)
            if self._tasks.get(tp) is asyncio.current_task():
                del self._tasks[tp]

    def _step(self, tp: TopicPartition) -> tuple[Path, Path, Log, Log] | object | None:
        """On the loop: reconcile, close a small gap and swap; else what to copy next.

        None: done (swapped, or nothing left to move)."""
        future = self.lm.future_log(tp)
        if future is None:
            return None
        try:
            current = self.lm.get_log(tp)
        except KafkaError:
            return _IDLE  # the current log's dir is offline; it may come back after restart
        source_dir, dest_dir = self.lm.log_dir_of(tp), self.lm.future_dir_of(tp)
        if current is None or source_dir is None or dest_dir is None:
            return _IDLE
        try:
            _reconcile(current, future)
            if self._close_gap_on_loop(current, future, self.quota.chunk(ON_LOOP_BYTES)):
                self._swap(tp, current, future, source_dir, dest_dir)
                return None
        except KafkaError as exc:
            if exc.code == ErrorCode.kafka_storage_error:
                self._storage_failure(exc, source_dir, dest_dir, future)
            else:  # the current log changed under the copy (retention, truncation): retry
                log.debug("moving %s: %s; trying again", tp, exc.message)
            return _IDLE
        return source_dir, dest_dir, current, future

    def _close_gap_on_loop(self, current: Log, future: Log, limit: int) -> bool:
        """Copy up to ``limit`` bytes (or one larger batch) without yielding to the event
        loop; True if the future log then ends where the current log does."""
        copied = 0
        try:
            while future.log_end_offset < current.log_end_offset:
                if copied >= limit:
                    return False
                read = current.read(future.log_end_offset, limit - copied, max_offset=None)
                # A later first offset is a gap left by compaction (kept as it is).
                if read.size == 0 or read.first_offset < future.log_end_offset:
                    return False
                future.append_as_follower(read.read_bytes())
                copied += read.size
            return future.log_end_offset == current.log_end_offset
        finally:
            self.quota.record(copied)

    async def _copy_chunk(self, tp: TopicPartition, current: Log, future: Log,
                          source_dir: Path, dest_dir: Path) -> int:
        """Read a chunk of the current log and append it to the future log, both on worker
        threads (only this task mutates the future log); returns the bytes copied."""
        start = future.log_end_offset
        try:
            read = current.read(start, self.quota.chunk(CHUNK_BYTES), max_offset=None)
        except KafkaError as exc:
            if exc.code == ErrorCode.offset_out_of_range:
                return 0  # retention moved the start: the next step reconciles
            self._storage_failure(exc, source_dir, dest_dir, future)
            return 0
        if read.size == 0 or read.file_path is None:
            return 0
        if read.first_offset < start:  # the future log ends inside a batch: diverged
            future.truncate_to(read.first_offset)
            return 0
        path, position, size = read.file_path, read.position, read.size
        try:
            data = await asyncio.to_thread(_pread_path, path, position, size)
        except FileNotFoundError:
            return 0  # the segment was deleted meanwhile (retention): try again
        except OSError as exc:
            if self._still_moving(tp, current, future):
                self._storage_failure(KafkaError(ErrorCode.kafka_storage_error, str(exc)),
                                      source_dir, dest_dir, future)
            return 0
        if not self._still_moving(tp, current, future) or future.log_end_offset != start:
            return 0  # cancelled, deleted or reconciled meanwhile
        try:
            # fsynced here too, so that the swap's flush on the event loop is small.
            await asyncio.to_thread(_append_and_flush, future, data)
            return len(data)
        except KafkaError as exc:
            # A storage error counts only if the logs are still the ones being moved (a
            # deleted partition's files vanish under the copy); any other error means the
            # bytes changed under the read (truncation): the next step reads again.
            if exc.code == ErrorCode.kafka_storage_error \
                    and self._still_moving(tp, current, future):
                self._storage_failure(exc, source_dir, dest_dir, future)
            return 0

    def _still_moving(self, tp: TopicPartition, current: Log, future: Log) -> bool:
        if self.lm.future_log(tp) is not future:
            return False
        try:
            return self.lm.get_log(tp) is current
        except KafkaError:
            return False  # the current log's dir failed: that is already recorded

    def _swap(self, tp: TopicPartition, current: Log, future: Log, source_dir: Path,
              dest_dir: Path) -> None:
        if current.log_start_offset > future.log_start_offset:
            future.update_high_watermark(current.high_watermark)
            future.delete_records_before(min(current.log_start_offset, future.high_watermark))
        # Epochs with no batch yet (a leader elected that has not written) exist only in
        # the current log's cache: OffsetForLeaderEpoch must still know them.
        for epoch, start in current.epoch_cache.entries:
            if epoch > future.epoch_cache.latest_epoch:
                future.epoch_cache.assign(epoch, start)
        old = self.lm.replace_current_with_future(tp)
        p = self.rm.partitions.get(tp)
        if p is not None and p.log is old:
            p.log = self.lm.get_log(tp)
        # Waiters re-check against the new log (nothing changed for them otherwise).
        self.rm.notifier.log_replaced(tp)
        deletion = asyncio.get_running_loop().create_task(
            asyncio.to_thread(_delete_quietly, old))
        self._deletions.add(deletion)  # a reference until it is done
        deletion.add_done_callback(self._deletions.discard)
        for listener in self.moved_listeners:
            listener(tp, source_dir, dest_dir)

    def _storage_failure(self, exc: KafkaError, source_dir: Path, dest_dir: Path,
                         future: Log) -> None:
        if exc.code != ErrorCode.kafka_storage_error:
            raise exc
        # Which dir failed: the future log's own operations mark it; else the source.
        failed = dest_dir if future.offline_reason is not None else source_dir
        self.lm.mark_dir_failed(failed, exc.message or str(exc))


_IDLE = object()


def _reconcile(current: Log, future: Log) -> None:
    """Make the future log a prefix of the current log (the KIP-101 rule a follower
    applies to its leader), and keep it within the current log's start."""
    if future.log_end_offset > current.log_end_offset:
        future.truncate_to(current.log_end_offset)
    last = future.epoch_cache.latest_epoch
    if last >= 0 and future.log_end_offset > future.log_start_offset:
        epoch, end = current.epoch_cache.end_offset_for(last, current.log_end_offset)
        if end < 0:
            future.truncate_fully_and_start_at(current.log_start_offset)
        elif epoch != last or end < future.log_end_offset:
            future.truncate_to(min(end, future.log_end_offset))
    if future.log_end_offset < current.log_start_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
    future.update_high_watermark(min(current.high_watermark, future.log_end_offset))


def _append_and_flush(future: Log, data: bytes) -> None:
    future.append_as_follower(data)
    future.flush()


def _pread_path(path: Path, position: int, size: int) -> bytes:
    with open(path, "rb") as f:
        return os.pread(f.fileno(), size, position)


def _delete_quietly(old: Log) -> None:
    try:
        old.delete()
    except OSError as exc:
        log.warning("could not delete %s after a move: %s", old.dir, exc)


# -- AlterReplicaLogDirs --------------------------------------------------------------------

MAX_DIR_NAME = 255


def alter_replica_log_dirs(rm: ReplicaManager, mover: LogDirMover,
                           destinations: Mapping[TopicPartition, str]
                           ) -> dict[TopicPartition, ErrorCode]:
    """Kafka's ``ReplicaManager.alterReplicaLogDirs``: per partition, move its replica to
    the named log dir of this broker, or remember the dir for when it is created."""
    results: dict[TopicPartition, ErrorCode] = {}
    for tp, path in destinations.items():
        try:
            _alter_one(rm, mover, tp, path)
            results[tp] = ErrorCode.none
        except KafkaError as exc:
            log.warning("AlterReplicaLogDirs for %s to %s: %s", tp, path, exc.message)
            # Kafka keeps REPLICA_NOT_AVAILABLE for a partition not hosted here.
            results[tp] = (ErrorCode.replica_not_available
                           if exc.code == ErrorCode.not_leader_or_follower else exc.code)
    return results


def _alter_one(rm: ReplicaManager, mover: LogDirMover, tp: TopicPartition, path: str) -> None:
    lm = rm.log_manager
    if len(future_dir_name(tp)) > MAX_DIR_NAME:  # KAFKA-4893
        raise KafkaError(ErrorCode.invalid_topic_exception, "the topic name is too long")
    dest = lm.resolve_log_dir(path)
    if dest is None:
        raise KafkaError(ErrorCode.log_dir_not_found, f"{path} is not a log dir of this broker")
    if not lm.is_log_dir_online(dest):
        raise KafkaError(ErrorCode.kafka_storage_error, f"log dir {dest} is offline")
    p = rm.partitions.get(tp)
    if p is not None:
        lm.check_online(tp)  # Kafka's HostedPartition.Offline
        future_dir = lm.future_dir_of(tp)
        if future_dir is not None and future_dir != dest:
            # A different destination: the move in progress is abandoned.
            mover.cancel(tp)
            lm.remove_future_log(tp)
    lm.maybe_update_preferred_log_dir(tp, dest)
    if p is None or p.log is None or lm.log_dir_of(tp) is None:
        raise KafkaError(ErrorCode.not_leader_or_follower, f"{tp} has no replica here yet")
    if lm.log_dir_of(tp) == dest or lm.future_log(tp) is not None:
        if lm.future_log(tp) is not None:
            mover.start(tp)
        return
    if lm.offline_dirs:
        # Kafka: no future log while a dir is offline (it could hold another copy).
        raise KafkaError(ErrorCode.kafka_storage_error,
                         f"log dirs {sorted(map(str, lm.offline_dirs))} are offline")
    from weir.coordination.codecs import topic_id_to_str

    topic_id = topic_id_to_str(p.topic_id) if p.topic_id is not None else None
    lm.create_future_log(tp, dest, topic_id)
    mover.start(tp)

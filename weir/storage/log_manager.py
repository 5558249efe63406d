"""All logs of a broker across its log dirs, plus the log-dir level checkpoint files.

Each log dir holds ``<topic>-<partition>/`` directories and Kafka's checkpoint files
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``) and, after a clean shutdown, ``.kafka_cleanshutdown``.

A log dir that fails with an I/O error goes offline: its partitions answer
``KafkaError(kafka_storage_error)`` and the other dirs keep working.

JBOD (KIP-112/113): a new log goes to the online dir holding the fewest logs (current and
future), unless AlterReplicaLogDirs named a preferred dir for it.  Moving a replica to
another dir builds a *future log* there (``<topic>-<partition>.<uuid>-future``, see
:mod:`weir.storage.log_dirs`) that :meth:`LogManager.replace_current_with_future` swaps in
by renames once it has caught up.  The swap renames the current log away to ``-delete``
first and then the future log to ``<topic>-<partition>``, so a crash between the two renames
leaves the complete future log and a ``-delete`` dir: startup finishes the swap.  (Kafka
renames in the other order and refuses to start with two current logs of a partition.)
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    atomic_write,
    fsync_dir,
    write_offset_checkpoint,
)
from weir.storage.config import LogConfig
from weir.storage.deferred_writes import DeferredWriter, DeferredWrites, PartitionMetadataWrite
from weir.storage.dir_checkpoints import (
    CHECKPOINT_VALUES,
    checkpoint_offsets,
    read_dir_checkpoints,
    rewrite_malformed,
)
from weir.storage.dir_lock import DirLock
from weir.storage.log import Log
from weir.storage.log_dirs import DirKind, delete_dir_name, future_dir_name, parse_log_dir_name
from weir.storage.topic_ids import assign_topic_id, load_topic_id

__all__ = ["DuplicateLogError", "LogManager"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class DuplicateLogError(RuntimeError):
    """Two dirs hold the same partition's log: the broker does not start (as Kafka)."""


class LogManager:
    """Creates, loads, checkpoints and retires the logs of one broker."""

    def __init__(self, log_dirs: list[Path], default_config: LogConfig, *,
                 deferred: DeferredWrites | None = None) -> None:
        """``deferred``: the storage thread of small-file writes (default: a
        :class:`DeferredWriter`; the simulation injects a deterministic one)."""
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._offline: dict[Path, str] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._now_ms = 0
        # Called with (log dir, reason) when a dir goes offline (Kafka's LogDirFailureChannel).
        self.dir_failure_listeners: list[Callable[[Path, str], None]] = []
        # KIP-113: future logs (one per partition being moved), preferred dirs for logs not
        # created yet, and ``-delete`` dirs found at startup.
        self._future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self._leftover_deletes: dict[TopicPartition, list[Path]] = {}
        # Dirs whose every log :meth:`startup` loaded, and whether it ran: shutdown writes
        # checkpoints and the clean-shutdown marker only where it knows the logs.
        self._loaded_dirs: set[Path] = set()
        self._startup_ran = False
        # The log cleaner's LogCleanerManager (weir.storage.log_cleaner sets it): cleaning
        # is aborted and paused while a log is deleted or swapped with its future log.
        self.cleaner: Any = None
        # The storage thread: partition.metadata and deferred leader-epoch checkpoints.
        self.deferred: DeferredWrites = deferred or DeferredWriter()
        self._locks: list[DirLock] = []

    def lock_dirs(self) -> None:
        """Lock every log dir's ``.lock`` before anything in it is read or written (Kafka's
        ``LogManager.lockLogDirs``): :class:`~weir.storage.dir_lock.LogDirLockedError` when
        another process holds one (nothing is loaded or written then); any other I/O error
        takes that dir offline.  Held until :meth:`shutdown` or the process' end."""
        try:
            for log_dir in self.log_dirs:
                lock = self._guard(log_dir, lambda d=log_dir: DirLock.acquire(d))
                if lock is not None:
                    self._locks.append(lock)
        except BaseException:
            self.release_locks()
            raise

    def release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks.clear()

    # -- startup and shutdown ----------------------------------------------------------
    def startup(self, now_ms: int, configs: Mapping[str, LogConfig] | None = None) -> None:
        """Load every partition dir of every log dir (``configs``: per-topic overrides)."""
        self._now_ms = now_ms
        self._startup_ran = True
        self._topic_configs.update(configs or {})
        for log_dir in self.log_dirs:
            self._guard(log_dir, lambda d=log_dir: self._load_dir(d, now_ms))
            if log_dir not in self._offline:
                self._loaded_dirs.add(log_dir)
        self._finish_interrupted_swaps()
        if not self._offline:  # a failed dir may hold the only complete copy
            self._delete_leftovers()

    def _load_dir(self, log_dir: Path, now_ms: int) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        checkpoints = read_dir_checkpoints(log_dir)
        with os.scandir(log_dir) as listing:  # d_type: no stat per entry
            children = sorted(entry.name for entry in listing if entry.is_dir())
        for name in children:
            parsed = parse_log_dir_name(name)
            if parsed is None:
                continue
            child = log_dir / name
            tp, kind = parsed
            if kind is DirKind.DELETE:
                self._leftover_deletes.setdefault(tp, []).append(child)
                continue
            if kind not in (DirKind.CURRENT, DirKind.FUTURE):
                continue
            logs, dirs = ((self._logs, self._log_dir_of) if kind is DirKind.CURRENT
                          else (self._future_logs, self._future_dir_of))
            if tp in logs:
                # Kafka's LogManager.loadLog: "Duplicate log directories" stops the broker.
                raise DuplicateLogError(
                    f"duplicate {kind.name.lower()} logs of {tp}: {child} and "
                    f"{dirs[tp] / logs[tp].dir.name}; delete one of them")
            dirs[tp] = log_dir  # known even if opening fails below
            logs[tp] = Log.open(
                child,
                self.config_for(tp.topic),
                recovery_point=checkpoints.recovery_points.get(tp, 0),
                log_start_offset=checkpoints.log_start_offsets.get(tp),
                clean_shutdown=clean,
                now_ms=now_ms,
                high_watermark=checkpoints.high_watermarks.get(tp),
            )
            logs[tp].topic_id = load_topic_id(child)
        # Epoch checkpoints the load truncated (e.g. an empty log's entry at its end) are
        # written by the storage thread, not one fsync'd file per log before registering.
        self.deferred.submit([lg.epoch_cache for lg in [*self._logs.values(),
                                                         *self._future_logs.values()]
                              if lg.epoch_cache.dirty])
        marker.unlink(missing_ok=True)
        if checkpoints.malformed:
            rewrite_malformed(log_dir, checkpoints.malformed, self._logs_in_dir(log_dir))
        log.info("loaded %s (clean shutdown: %s)", log_dir, clean)

    def shutdown(self) -> None:
        """Flush and close every log, write all checkpoints and the clean-shutdown marker."""
        marks = [time.perf_counter()]
        every = self._every_online_log()
        # The load's own epoch truncations are made again by the next load (Log.close).
        self.deferred.discard([lg.epoch_cache for _d, lg in every
                               if lg.epoch_checkpoint_redone_by_load])
        pending = self.deferred.pending
        self.deferred.close()
        marks.append(time.perf_counter())
        for log_dir, lg in every:
            self._guard(log_dir, lg.flush)
        marks.append(time.perf_counter())
        self._checkpoint_all_at_shutdown()
        marks.append(time.perf_counter())
        for log_dir, lg in every:
            self._guard(log_dir, lg.close)
        for log_dir in self._known_dirs(marker=True):
            self._guard(log_dir, lambda d=log_dir: atomic_write(d / CLEAN_SHUTDOWN_FILE, ""))
        self.release_locks()
        marks.append(time.perf_counter())
        step = [(b - a) * 1000 for a, b in itertools.pairwise(marks)]
        log.info("%d logs shut down in %.0f ms (pending small-file writes %d: %.0f ms, "
                 "flush %.0f ms, checkpoints %.0f ms, close and marker %.0f ms)", len(every),
                 sum(step), pending, *step)

    def _checkpoint_all_at_shutdown(self) -> None:
        """The recovery-point, log-start-offset and high-watermark checkpoints of every
        online dir, its logs grouped once for all three (``checkpoint_*`` group them per
        file: three passes over 10,000 logs on the way out)."""
        groups: dict[Path, dict[TopicPartition, Log]] = {d: {} for d in self._known_dirs()}
        for logs, dirs in ((self._logs, self._log_dir_of),
                           (self._future_logs, self._future_dir_of)):
            for tp, lg in logs.items():
                group = groups.get(dirs[tp])
                if group is not None:
                    group[tp] = lg
        for log_dir, logs in groups.items():
            for file_name in CHECKPOINT_VALUES:
                offsets = checkpoint_offsets(file_name, logs)
                self._guard(log_dir, lambda d=log_dir, f=file_name, o=offsets:
                            write_offset_checkpoint(d / f, o))

    def _known_dirs(self, marker: bool = False) -> list[Path]:
        """The online dirs whose logs this manager knows: loaded by :meth:`startup`, or (for
        checkpoints, and for the marker when no startup ran) holding logs it created.  A
        dir it never loaded, as after a start that failed before the logs were loaded (a
        foreign meta.properties, ZooKeeper unreachable), keeps its files: empty
        checkpoints and a clean-shutdown marker there would let the next start skip the
        recovery of logs nobody looked at, and forget their high watermarks."""
        holding = set(self._log_dir_of.values()) | set(self._future_dir_of.values())
        known = self._loaded_dirs | (holding if not (marker and self._startup_ran) else set())
        return [d for d in self.online_dirs if d in known]

    # -- offline handling --------------------------------------------------------------
    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Failed log dirs → reason."""
        return dict(self._offline)

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self._offline]

    def _guard(self, log_dir: Path, action: Callable[[], _T]) -> _T | None:
        """Run ``action``; an I/O failure takes ``log_dir`` offline instead of raising."""
        if log_dir in self._offline:
            return None
        try:
            return action()
        except (OSError, KafkaError) as exc:
            if isinstance(exc, KafkaError) and exc.code != ErrorCode.kafka_storage_error:
                raise
            self._mark_offline(log_dir, str(exc))
            return None

    def is_log_dir_online(self, log_dir: Path) -> bool:
        return log_dir in self.log_dirs and log_dir not in self._offline

    def mark_dir_failed(self, log_dir: Path, reason: str) -> None:
        """An I/O error seen outside this manager (e.g. while copying a future log off the
        event loop) takes ``log_dir`` offline."""
        if log_dir in self.log_dirs and log_dir not in self._offline:
            self._mark_offline(log_dir, reason)

    def _mark_offline(self, log_dir: Path, reason: str) -> None:
        log.error("log dir %s is offline: %s", log_dir, reason)
        self._offline[log_dir] = reason
        for tp, d in list(self._log_dir_of.items()):
            if d == log_dir and tp in self._logs:
                self._logs[tp].offline_reason = reason
        # Kafka's handleLogDirFailure: a future log in the failed dir is dropped from
        # memory (its files stay); a move into a failed dir is abandoned.
        for tp, d in list(self._future_dir_of.items()):
            if d == log_dir:
                del self._future_dir_of[tp]
                future = self._future_logs.pop(tp, None)
                if future is not None:
                    future.offline_reason = reason
        for listener in self.dir_failure_listeners:
            listener(log_dir, reason)

    def _storage_error(self, tp: TopicPartition) -> KafkaError:
        log_dir = self._log_dir_of[tp]
        return KafkaError(
            ErrorCode.kafka_storage_error,
            f"{tp} is in offline log dir {log_dir}: {self._offline[log_dir]}",
        )

    # -- lookup and lifecycle ----------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, tp: TopicPartition) -> Log | None:
        """The partition's log, None if absent; KafkaError(kafka_storage_error) if offline."""
        lg = self._logs.get(tp)
        if lg is not None and lg.offline_reason is not None:
            self._guard_failed(tp, lg.offline_reason)
        if self._log_dir_of.get(tp) in self._offline:
            raise self._storage_error(tp)
        return lg

    def _guard_failed(self, tp: TopicPartition, reason: str) -> None:
        log_dir = self._log_dir_of[tp]
        if log_dir not in self._offline:
            self._mark_offline(log_dir, reason)

    def all_logs(self) -> dict[TopicPartition, Log]:
        """Online logs by partition."""
        return {
            tp: lg for tp, lg in self._logs.items() if self._log_dir_of[tp] not in self._offline
        }

    def get_or_create_log(
        self,
        tp: TopicPartition,
        config: LogConfig | None = None,
        topic_id: str | None = None,
        *,
        now_ms: int | None = None,
        is_new: bool = True,
    ) -> Log:
        """Existing log, or a new one: in the preferred dir AlterReplicaLogDirs named, else
        in the online log dir holding the fewest logs (Kafka's ``nextLogDirs``).

        A replica that is not new (``is_new`` False: it may exist in a failed dir) is not
        created while any log dir is offline (Kafka's ``getOrCreateLog``)."""
        existing = self.get_log(tp)
        if existing is not None:
            if topic_id is not None:  # Kafka's getOrCreateLog: assigned, or checked
                assign_topic_id(existing, topic_id, self.deferred.submit)
            return existing
        if not is_new and self._offline:
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"cannot create the log of {tp}: log dirs {sorted(map(str, self._offline))} "
                "are offline",
            )
        if config is not None:
            self._topic_configs[tp.topic] = config
        now = self._now_ms if now_ms is None else now_ms
        preferred = self._preferred_dirs.get(tp)
        candidates = [preferred] if preferred is not None else self._dirs_by_load()
        for log_dir in candidates:
            created = self._guard(log_dir, lambda d=log_dir: self._create(d, tp, topic_id, now))
            if created is not None:
                self._preferred_dirs.pop(tp, None)
                return created
        raise KafkaError(ErrorCode.kafka_storage_error, f"no online log dir can host {tp}")

    # -- creating many logs off the event loop (a LeaderAndIsr for a new topic) ------
    def plan_new_logs(self, wanted: list[tuple[TopicPartition, LogConfig, str | None]]
                      ) -> list[tuple[TopicPartition, Path, LogConfig, str | None]]:
        """Which of ``wanted`` (partition, config, topic id) :meth:`open_new_logs` may
        create off the event loop: those without a log, when there is one online log dir
        to put them in and no preferred dir (JBOD placement stays in
        :meth:`get_or_create_log`)."""
        online = self.online_dirs
        if len(self.log_dirs) != 1 or len(online) != 1:
            return []
        plan = []
        for tp, config, topic_id in wanted:
            if tp not in self._logs and tp not in self._preferred_dirs:
                self._topic_configs[tp.topic] = config
                plan.append((tp, online[0], config, topic_id))
        return plan

    @staticmethod
    def open_new_logs(plan: list[tuple[TopicPartition, Path, LogConfig, str | None]],
                      now_ms: int) -> list[tuple[TopicPartition, Path, Log | OSError, str | None]]:
        """Create the planned logs' directories and first segments (any thread: touches no
        state of the manager).  A failure is returned, not raised, for :meth:`adopt_logs`."""
        made: list[tuple[TopicPartition, Path, Log | OSError, str | None]] = []
        ready: set[Path] = set()  # log dirs made sure of (one mkdir each, not one per log)
        for tp, log_dir, config, topic_id in plan:
            try:
                if log_dir not in ready:
                    log_dir.mkdir(parents=True, exist_ok=True)
                    ready.add(log_dir)
                lg = Log.open(log_dir / str(tp), config, clean_shutdown=True, now_ms=now_ms)
                made.append((tp, log_dir, lg, topic_id))
            except (OSError, KafkaError) as exc:
                failure = exc if isinstance(exc, OSError) else OSError(str(exc))
                made.append((tp, log_dir, failure, topic_id))
        return made

    def adopt_logs(self, made: list[tuple[TopicPartition, Path, Log | OSError, str | None]]
                   ) -> None:
        """Register logs made by :meth:`open_new_logs` (on the event loop) and queue their
        ``partition.metadata``.  A failure takes its log dir offline, as it would have
        inline; a partition that got a log meanwhile keeps it (the spare is dropped)."""
        for tp, log_dir, lg, topic_id in made:
            if isinstance(lg, OSError):
                self._guard(log_dir, lambda exc=lg: _raise(exc))
            elif tp in self._logs or log_dir in self._offline:
                for seg in lg.segments:
                    seg.release()
            else:
                self._logs[tp] = lg
                self._log_dir_of[tp] = log_dir
                if topic_id is not None:
                    assign_topic_id(lg, topic_id, self.deferred.submit)

    def _dirs_by_load(self) -> list[Path]:
        online = self.online_dirs
        if len(online) <= 1:  # nothing to choose (and no count per new log)
            return online
        counts = Counter(self._log_dir_of.values())
        counts.update(self._future_dir_of.values())
        return sorted(online, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def _create(self, log_dir: Path, tp: TopicPartition, topic_id: str | None, now: int,
                name: str | None = None) -> Log:
        log_dir.mkdir(parents=True, exist_ok=True)
        lg = Log.open(log_dir / (name or str(tp)), self.config_for(tp.topic),
                      clean_shutdown=True, now_ms=now)
        if topic_id is not None:
            if name is None:  # on the storage thread, as Kafka's flush-metadata-file
                assign_topic_id(lg, topic_id, self.deferred.submit)
            else:  # a future log (KIP-113) is renamed later: written before that
                lg.topic_id = topic_id
                PartitionMetadataWrite(lg.dir, topic_id).flush()
        if name is None:
            self._logs[tp] = lg
            self._log_dir_of[tp] = log_dir
        return lg

    def schedule_epoch_checkpoints(self, logs: list[Log]) -> None:
        """Write the leader-epoch checkpoints these logs lack on the storage thread."""
        self.deferred.submit([lg.epoch_cache for lg in logs if lg.epoch_cache.dirty])

    def delete_log(self, tp: TopicPartition) -> bool:
        """Remove the partition's log (and future log) and directory; True if it existed."""
        self.remove_future_log(tp)
        lg = self._logs.pop(tp, None)
        log_dir = self._log_dir_of.pop(tp, None)
        self._preferred_dirs.pop(tp, None)
        if lg is None or log_dir is None:
            return False
        if self.cleaner is not None:
            self.cleaner.abort_and_pause(tp)
        try:
            self._guard(log_dir, lg.delete)
            if self.cleaner is not None:
                self._guard(log_dir, lambda: self.cleaner.forget(tp, log_dir))
        finally:
            if self.cleaner is not None:
                self.cleaner.resume(tp)
        return True

    # -- JBOD: log dirs of partitions, future logs (KIP-113) ----------------------------
    def log_dir_of(self, tp: TopicPartition) -> Path | None:
        """The log dir holding the partition's current log (None if it has none)."""
        return self._log_dir_of.get(tp) if tp in self._logs else None

    def future_log(self, tp: TopicPartition) -> Log | None:
        return self._future_logs.get(tp)

    def future_dir_of(self, tp: TopicPartition) -> Path | None:
        return self._future_dir_of.get(tp) if tp in self._future_logs else None

    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def check_online(self, tp: TopicPartition) -> None:
        """KafkaError(kafka_storage_error) if the partition's current log is in an offline
        dir (Kafka's ``HostedPartition.Offline``)."""
        lg = self._logs.get(tp)
        # get_log raises only for a log marked failed or a dir offline: with neither (every
        # produce and fetch), it has nothing to say.
        if lg is not None and (lg.offline_reason is not None or self._offline):
            self.get_log(tp)

    def resolve_log_dir(self, path: str) -> Path | None:
        """The configured log dir named by ``path`` (absolute, as DescribeLogDirs reports
        it), or None (LOG_DIR_NOT_FOUND)."""
        try:
            wanted = os.path.abspath(path)
        except (ValueError, TypeError):
            return None
        for log_dir in self.log_dirs:
            if os.path.abspath(log_dir) == wanted:
                return log_dir
        return None

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, log_dir: Path) -> None:
        """Remember ``log_dir`` for when the partition's log is created, unless its current
        or future log is already there (Kafka's ``maybeUpdatePreferredLogDir``)."""
        if self.log_dir_of(tp) != log_dir and self._future_dir_of.get(tp) != log_dir:
            self._preferred_dirs[tp] = log_dir

    def preferred_log_dir(self, tp: TopicPartition) -> Path | None:
        return self._preferred_dirs.get(tp)

    def create_future_log(self, tp: TopicPartition, log_dir: Path,
                          topic_id: str | None = None) -> Log:
        """A new, empty future log of ``tp`` in ``log_dir`` (not its current dir)."""
        if tp not in self._logs:
            raise KafkaError(ErrorCode.replica_not_available, f"{tp} has no log here")
        if self._log_dir_of[tp] == log_dir:
            raise ValueError(f"{tp} already lives in {log_dir}")
        if tp in self._future_logs:
            raise ValueError(f"{tp} already has a future log in {self._future_dir_of[tp]}")
        if not self.is_log_dir_online(log_dir):
            raise KafkaError(ErrorCode.kafka_storage_error, f"log dir {log_dir} is offline")
        created = self._guard(
            log_dir, lambda: self._create(log_dir, tp, topic_id, self._now_ms,
                                          name=future_dir_name(tp)))
        if created is None:
            raise KafkaError(ErrorCode.kafka_storage_error,
                             f"cannot create the future log of {tp} in {log_dir}")
        self._future_logs[tp] = created
        self._future_dir_of[tp] = log_dir
        self._preferred_dirs.pop(tp, None)
        log.info("created future log of %s in %s", tp, log_dir)
        return created

    def remove_future_log(self, tp: TopicPartition) -> Log | None:
        """Forget the future log and delete its files (a cancelled or superseded move)."""
        future = self._future_logs.pop(tp, None)
        log_dir = self._future_dir_of.pop(tp, None)
        if future is not None and log_dir is not None:
            self._guard(log_dir, future.delete)
        return future

    def replace_current_with_future(self, tp: TopicPartition) -> Log:
        """Swap the caught-up future log in for the current one (Kafka's
        ``replaceCurrentWithFutureLog``); returns the old log, renamed to ``-delete`` and
        closed, for the caller to delete (off the event loop).

        Order (see the module docstring): flush the future log, rename the current log to
        ``-delete`` (its dir fsynced), rename the future log to ``<topic>-<partition>`` (its
        dir fsynced).  KafkaError(kafka_storage_error) if a dir fails on the way; a failure
        before the first rename leaves everything as it was."""
        source, dest = self._logs.get(tp), self._future_logs.get(tp)
        src_dir, dest_dir = self._log_dir_of.get(tp), self._future_dir_of.get(tp)
        if source is None or src_dir is None or dest is None or dest_dir is None:
            raise KafkaError(ErrorCode.kafka_storage_error, f"{tp} has no future log to swap in")
        self.get_log(tp)  # the current log's dir must be online
        if dest.log_end_offset != source.log_end_offset:
            raise ValueError(f"future log of {tp} has not caught up: {dest} vs {source}")
        self._checked(dest_dir, dest.flush)
        if self.cleaner is not None:  # Kafka's abortAndPauseCleaning around the swap
            self.cleaner.abort_and_pause(tp)
        try:
            self._swap_dirs(tp, source, src_dir, dest, dest_dir)
        finally:
            if self.cleaner is not None:
                self.cleaner.resume(tp)
        return source

    def _swap_dirs(self, tp: TopicPartition, source: Log, src_dir: Path, dest: Log,
                   dest_dir: Path) -> None:
        self._checked(src_dir, lambda: source.rename_dir(src_dir / delete_dir_name(tp)))
        self._checked(src_dir, lambda: fsync_dir(src_dir))
        # From here a crash leaves the future log and the ``-delete`` dir: startup finishes.
        try:
            self._checked(dest_dir, lambda: dest.rename_dir(dest_dir / str(tp)))
        except KafkaError:
            # The destination dir failed (now offline, the future log dropped): the
            # current log goes back under its name and keeps serving.
            source.rename_dir(src_dir / str(tp))
            raise
        self._future_logs.pop(tp)
        self._future_dir_of.pop(tp)
        self._logs[tp] = dest
        self._log_dir_of[tp] = dest_dir
        self._checked(dest_dir, lambda: fsync_dir(dest_dir))
        dest.update_high_watermark(min(source.high_watermark, dest.log_end_offset))
        source.close()
        for log_dir in (src_dir, dest_dir):
            in_dir = self._logs_in_dir(log_dir)
            self._guard(log_dir, lambda d=log_dir, o=in_dir: write_offset_checkpoint(
                d / RECOVERY_POINT_CHECKPOINT, {t: lg.recovery_point for t, lg in o.items()}))
            self._guard(log_dir, lambda d=log_dir, o=in_dir: write_offset_checkpoint(
                d / LOG_START_OFFSET_CHECKPOINT, {t: lg.log_start_offset for t, lg in o.items()}))
        if self.cleaner is not None:  # the new log is cleaned from its start
            self._guard(src_dir, lambda: self.cleaner.forget(tp, src_dir))
        log.info("%s moved from %s to %s", tp, src_dir, dest_dir)

    def _checked(self, log_dir: Path, action: Callable[[], _T]) -> _T:
        """Run ``action``; on an I/O failure take ``log_dir`` offline and raise."""
        try:
            return action()
        except (OSError, KafkaError) as exc:
            if isinstance(exc, KafkaError) and exc.code != ErrorCode.kafka_storage_error:
                raise
            if log_dir not in self._offline:
                self._mark_offline(log_dir, str(exc))
            raise KafkaError(ErrorCode.kafka_storage_error,
                             f"log dir {log_dir} failed: {exc}") from exc

    def _finish_interrupted_swaps(self) -> None:
        """A future log without a current log, next to a ``-delete`` dir of the same
        partition, is what a crash between the swap's two renames leaves: the future log
        had caught up (the swap starts only then), so it becomes the current log."""
        if self._offline:
            return  # the current log may be in a failed dir: decide nothing
        for tp in sorted(set(self._future_logs) - set(self._logs)):
            if tp not in self._leftover_deletes:
                continue
            dest, dest_dir = self._future_logs.pop(tp), self._future_dir_of.pop(tp)
            log.warning("completing the interrupted move of %s: %s becomes its log", tp,
                        dest.dir)
            self._checked(dest_dir, lambda d=dest, dd=dest_dir, t=tp: d.rename_dir(dd / str(t)))
            self._checked(dest_dir, lambda dd=dest_dir: fsync_dir(dd))
            self._logs[tp] = dest
            self._log_dir_of[tp] = dest_dir

    def _delete_leftovers(self) -> None:
        """``-delete`` dirs (Kafka deletes them after ``file.delete.delay.ms``)."""
        for tp, dirs in sorted(self._leftover_deletes.items()):
            for path in dirs:
                log.info("deleting %s (left by a move or deletion of %s)", path, tp)
                shutil.rmtree(path, ignore_errors=True)
        self._leftover_deletes.clear()

    def logs_by_dir(self) -> dict[Path, list[tuple[Log, bool]]]:
        """Every loaded log (current and future, the flag) by the log dir holding it."""
        result: dict[Path, list[tuple[Log, bool]]] = {d: [] for d in self.log_dirs}
        for tp, lg in self._logs.items():
            result[self._log_dir_of[tp]].append((lg, False))
        for tp, lg in self._future_logs.items():
            result[self._future_dir_of[tp]].append((lg, True))
        return result

    def _logs_in_dir(self, log_dir: Path) -> dict[TopicPartition, Log]:
        """Current and future logs in ``log_dir`` (never both of one partition)."""
        found = {tp: lg for tp, lg in self._logs.items() if self._log_dir_of[tp] == log_dir}
        found.update((tp, lg) for tp, lg in self._future_logs.items()
                     if self._future_dir_of[tp] == log_dir)
        return found

    def _every_online_log(self) -> list[tuple[Path, Log]]:
        every = [(self._log_dir_of[tp], lg) for tp, lg in self._logs.items()]
        every += [(self._future_dir_of[tp], lg) for tp, lg in self._future_logs.items()]
        return [(d, lg) for d, lg in every if d not in self._offline]

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic's new config to its existing and future logs."""
        self._topic_configs[topic] = config
        for tp, lg in [*self._logs.items(), *self._future_logs.items()]:
            if tp.topic == topic:
                lg.update_config(config)

    # -- checkpoints -------------------------------------------------------------------
    def checkpoint_writes(self, file_name: str) -> list[tuple[Path, Callable[[], None]]]:
        """One offset checkpoint file's writes, one per online log dir, with the offsets
        read now on the caller's thread: (log dir, a call that writes the file, fsynced,
        on any thread).  The broker runs the periodic ones on its scheduler's I/O thread,
        as Kafka's ``KafkaScheduler`` threads do, and reports a failure with
        :meth:`mark_dir_failed`; ``checkpoint_*`` below run them here."""
        return [(log_dir, functools.partial(
                    write_offset_checkpoint, log_dir / file_name,
                    checkpoint_offsets(file_name, self._logs_in_dir(log_dir))))
                for log_dir in self.online_dirs]

    def _write_per_dir(self, file_name: str) -> None:
        for log_dir, write in self.checkpoint_writes(file_name):
            self._guard(log_dir, write)

    def checkpoint_recovery_points(self) -> None:
        self._write_per_dir(RECOVERY_POINT_CHECKPOINT)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_per_dir(LOG_START_OFFSET_CHECKPOINT)

    def checkpoint_high_watermarks(self) -> None:
        """Write every log's own high watermark to ``replication-offset-checkpoint``."""
        self._write_per_dir(REPLICATION_OFFSET_CHECKPOINT)

    # -- periodic work -----------------------------------------------------------------
    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every online log; returns segments deleted."""
        self._now_ms = now_ms
        deleted = 0
        for tp, lg in list(self.all_logs().items()):
            deleted += (
                self._guard(self._log_dir_of[tp], lambda lg=lg: lg.apply_retention(now_ms)) or 0
            )
        return deleted

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's PeriodicProducerExpirationCheck over every log; producers removed."""
        return sum(lg.remove_expired_producers(now_ms, expiration_ms)
                   for lg in list(self.all_logs().values()))

    def flush_due(self, now_ms: int) -> None:
        """Flush logs whose ``flush.ms`` has elapsed (asked of every log each second, so
        the test is a cheap attribute check, not a call through the I/O guard)."""
        self._now_ms = now_ms
        due = [(tp, lg) for tp, lg in self._logs.items() if lg.flush_is_due(now_ms)]
        for tp, lg in due:
            if self._log_dir_of[tp] not in self._offline:
                self._guard(self._log_dir_of[tp], lambda lg=lg: lg.maybe_flush(now_ms))


def _raise(exc: BaseException) -> None:
    raise exc

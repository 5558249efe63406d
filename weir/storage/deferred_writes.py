"""The storage thread: small checkpoint files written off the event loop, in batches.

A LeaderAndIsr that makes a broker leader of thousands of partitions changes one
``leader-epoch-checkpoint`` per partition, and creating a topic writes one
``partition.metadata`` per new replica.  Each is an fsync'd temp file, a rename and a
directory fsync (about a millisecond on a fast disk, several on a slow one), so writing
them inline stalls the broker's event loop for seconds.  Kafka writes
``partition.metadata`` from its scheduler (``UnifiedLog.maybeFlushMetadataFile``) and
flushes leader-epoch truncations asynchronously; Weir sends both kinds here.

:class:`DeferredWriter` keeps a set of pending jobs (anything with a ``flush()`` method; a
job queued twice is written once) and one worker thread that writes them, oldest first.
Ordering with the log is the callers' concern (see :mod:`weir.storage.epoch_cache`): a
job's ``flush()`` writes the newest state of its file, so a late write is never stale.
:meth:`DeferredWriter.drain` writes everything pending on the caller's thread too (clean
shutdown, before ``.kafka_cleanshutdown``).

Both write a batch with :func:`write_batch`: each file stays atomic (Kafka's checkpoint
files are each a temp file, fsynced, renamed), but the syncs are shared by the batch, not
paid per file: (1) every job's temp file is written, unsynced (``prepare()``); (2) one
``syncfs()`` of each filesystem holding them makes them all durable; (3) every temp file is
renamed over its target; (4) one more ``syncfs()`` makes the renames durable.  A crash at
any point leaves each file with its old or its new content (a rename happens only after its
temp file is durable), and every file is durable when the batch returns.  ``syncfs()``
(:func:`weir.storage.checkpoints.sync_filesystems`; returns once the writes are done) is
one call for thousands of files, where an fsync per file and per directory costs a disk
flush each; it flushes the log dirs' filesystems only, not every filesystem of the machine
as ``sync()`` did (still every dirty page of those filesystems, segments included, which
Kafka's per-file fsyncs do not).  A one-file batch uses the per-file fsyncs instead
(:func:`atomic_write` path), so a lone write does not flush a filesystem's dirty pages.  No lock is held
across a batch: an epoch cache's rename is skipped when its file was written again since
its ``prepare()`` (e.g. ``Log.flush`` on the event loop), so older content never lands
over newer.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from weir.storage.checkpoints import (
    PARTITION_METADATA_FILE,
    PreparedWrite,
    fsync_dir,
    partition_metadata_text,
    sync_filesystems,
    write_partition_metadata,
    write_temp,
)

__all__ = ["DeferredWriter", "PartitionMetadataWrite", "write_batch"]

log = logging.getLogger(__name__)

LOGGED_BATCH = 1000  # a batch of at least this many files logs its time, step by step


class Flushable(Protocol):
    """A job: ``flush()`` writes its file (fsync'd, atomic).  Jobs may also have
    ``prepare(if_dir_exists=...) -> PreparedWrite | None`` for batched writes."""

    def flush(self, *, if_dir_exists: bool = False) -> None: ...


class PartitionMetadataWrite:
    """A pending ``partition.metadata`` (the topic id of a new replica)."""

    def __init__(self, partition_dir: Path, topic_id: str) -> None:
        self.partition_dir = partition_dir
        self.topic_id = topic_id

    def flush(self, *, if_dir_exists: bool = False) -> None:
        if if_dir_exists and not self.partition_dir.is_dir():
            return
        write_partition_metadata(self.partition_dir, self.topic_id)

    def prepare(self, *, if_dir_exists: bool = False) -> PreparedWrite | None:
        if if_dir_exists and not self.partition_dir.is_dir():
            return None
        target = self.partition_dir / PARTITION_METADATA_FILE
        return PreparedWrite(write_temp(target, partition_metadata_text(self.topic_id)), target)

    def __repr__(self) -> str:
        return f"PartitionMetadataWrite({self.partition_dir})"


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _commit_one(p: PreparedWrite) -> None:
    """A one-file batch: fsync the file, rename, fsync its directory."""
    _fsync_file(p.tmp)
    if p.rename():
        fsync_dir(p.target.parent)


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError as exc:
        log.debug("could not remove %s: %s", path, exc)


def write_batch(jobs: Iterable[Flushable], *, if_dir_exists: bool = True) -> int:
    """Write ``jobs`` as one batch (see the module docstring); returns how many failed.

    A job whose write fails (OSError) is logged and counted and stays dirty; the others
    are still written.  Jobs without ``prepare()`` are flushed one by one."""
    failures = 0
    prepared: list[tuple[Flushable, PreparedWrite]] = []
    t0 = time.perf_counter()
    for job in jobs:  # phase 1: temp files, unsynced
        try:
            prepare = getattr(job, "prepare", None)
            if prepare is None:
                job.flush(if_dir_exists=if_dir_exists)
                continue
            p = prepare(if_dir_exists=if_dir_exists)
        except OSError as exc:
            failures += 1
            log.error("deferred write failed (%s): %s", job, exc)
            continue
        if p is not None:
            prepared.append((job, p))
    if len(prepared) == 1:
        job, p = prepared[0]
        try:
            _commit_one(p)
        except OSError as exc:
            failures += _renamed_or_failed(job, p, exc, if_dir_exists=if_dir_exists)
        else:
            p.durable()
        return failures
    if not prepared:
        return failures
    t1 = time.perf_counter()
    try:
        sync_filesystems(_dirs(prepared))  # phase 2: every temp file durable
    except OSError as exc:  # none of them is known durable: no rename, every job stays dirty
        log.error("deferred writes: sync of %d files failed: %s", len(prepared), exc)
        for _job, p in prepared:
            _remove_quietly(p.tmp)
        return failures + len(prepared)
    t2 = time.perf_counter()
    renamed = []
    for job, p in prepared:  # phase 3: renames
        try:
            if not p.rename():
                continue  # superseded by a newer write of the same file
        except OSError as exc:
            failures += _renamed_or_failed(job, p, exc, if_dir_exists=if_dir_exists)
            continue
        renamed.append(p)
    t3 = time.perf_counter()
    if renamed:
        try:
            sync_filesystems(_dirs(prepared))  # phase 4: the renames durable
        except OSError as exc:  # renamed, but not known durable: the jobs stay dirty
            log.error("deferred writes: sync of %d renames failed: %s", len(renamed), exc)
            return failures + len(renamed)
    for p in renamed:
        p.durable()
    t4 = time.perf_counter()
    if len(prepared) >= LOGGED_BATCH:
        log.info("deferred writes: %d files in %.0f ms (temp files %.0f ms, sync %.0f ms, "
                 "renames %.0f ms, sync %.0f ms)", len(prepared), (t4 - t0) * 1000,
                 (t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000, (t4 - t3) * 1000)
    return failures


def _dirs(prepared: list[tuple[Flushable, PreparedWrite]]) -> set[Path]:
    """The directories of a batch's files (their filesystems are what to sync)."""
    return {p.target.parent for _job, p in prepared}


def _renamed_or_failed(job: Flushable, p: PreparedWrite, exc: OSError, *,
                       if_dir_exists: bool) -> int:
    """A failed commit: 0 if the partition dir went away meanwhile (the log was deleted:
    not an error, as Kafka's ``writeIfDirExists``), else 1, logged."""
    if if_dir_exists and not p.target.parent.is_dir():
        return 0
    if p.replace is None:  # (a job's own rename removes its temp file)
        _remove_quietly(p.tmp)
    log.error("deferred write failed (%s): %s", job, exc)
    return 1


class DeferredWrites(Protocol):
    """What the log manager asks of its storage thread (:class:`DeferredWriter`; the
    simulation's writer is deterministic and dies with its process)."""

    def submit(self, jobs: list[Flushable] | tuple[Flushable, ...]) -> None: ...

    def discard(self, jobs: list[Flushable]) -> None: ...

    @property
    def pending(self) -> int: ...

    def drain(self, timeout_s: float | None = None) -> bool: ...

    def close(self, timeout_s: float = 30.0) -> None: ...


class DeferredWriter:
    """Pending small-file writes and the one thread that performs them."""

    def __init__(self, name: str = "weir-storage") -> None:
        self._name = name
        self._pending: dict[int, Flushable] = {}  # insertion-ordered, keyed by id()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = 0
        self._dropped: set[int] = set()  # discarded jobs of the batch being written
        # One batch at a time (the worker's or drain()'s), so each file's writes stay in
        # the order they were prepared in.
        self._batch_lock = threading.Lock()
        self._closed = False
        self.failures = 0

    def submit(self, jobs: list[Flushable] | tuple[Flushable, ...]) -> None:
        """Queue ``jobs`` (cheap: no I/O on the caller's thread)."""
        if not jobs:
            return
        with self._cond:
            for job in jobs:
                self._pending.setdefault(id(job), job)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name=self._name,
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._pending) + self._busy

    def _take(self) -> list[Flushable] | None:
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            if not self._pending:
                return None
            jobs = list(self._pending.values())
            self._pending.clear()
            self._busy = len(jobs)
            return jobs

    def _run(self) -> None:
        while (jobs := self._take()) is not None:
            self._write_batch(jobs, skip_dropped=True)
            with self._cond:
                self._busy = 0
                self._dropped.clear()
                self._cond.notify_all()

    def _write_batch(self, jobs: list[Flushable], *, skip_dropped: bool = False) -> None:
        # A failed job's state stays dirty; the log's next flush or close writes it (or
        # takes the log dir offline there).
        def live() -> Iterable[Flushable]:
            for job in jobs:
                if skip_dropped:
                    with self._cond:
                        if id(job) in self._dropped:
                            continue
                yield job

        with self._batch_lock:
            failed = write_batch(live(), if_dir_exists=True)
        if failed:
            with self._cond:
                self.failures += failed

    def discard(self, jobs: list[Flushable]) -> None:
        """Forget ``jobs`` if not written yet (their write is not needed any more), also
        those of the batch the thread is writing."""
        with self._cond:
            for job in jobs:
                self._pending.pop(id(job), None)
                if self._busy:
                    self._dropped.add(id(job))

    def drain(self, timeout_s: float | None = None) -> bool:
        """Wait until every queued job is written; True if nothing is left.  Jobs still
        queued are written on the calling thread (so a stopped worker cannot block it)."""
        with self._cond:
            jobs = list(self._pending.values())
            self._pending.clear()
        if jobs:
            self._write_batch(jobs)
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0, timeout_s)

    def close(self, timeout_s: float = 30.0) -> None:
        """Write what is pending and stop the thread."""
        self.drain(timeout_s)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

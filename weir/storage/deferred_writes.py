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
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Protocol

from weir.storage.checkpoints import write_partition_metadata

__all__ = ["DeferredWriter", "PartitionMetadataWrite"]

log = logging.getLogger(__name__)


class Flushable(Protocol):
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


class DeferredWriter:
    """Pending small-file writes and the one thread that performs them."""

    def __init__(self, name: str = "weir-storage") -> None:
        self._name = name
        self._pending: dict[int, Flushable] = {}  # insertion-ordered, keyed by id()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = 0
        self._dropped: set[int] = set()  # discarded jobs of the batch being written
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
            for job in jobs:
                with self._cond:
                    if id(job) in self._dropped:
                        continue
                self._write(job, if_dir_exists=True)
            with self._cond:
                self._busy = 0
                self._dropped.clear()
                self._cond.notify_all()

    def _write(self, job: Flushable, *, if_dir_exists: bool) -> None:
        try:
            job.flush(if_dir_exists=if_dir_exists)
        except OSError as exc:
            # The job's state stays dirty; the log's next flush or close writes it (or
            # takes the log dir offline there).
            self.failures += 1
            log.error("deferred write failed (%s): %s", job, exc)

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
        for job in jobs:
            self._write(job, if_dir_exists=True)
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

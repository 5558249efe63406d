"""The log cleaner's threads — Kafka's ``LogCleaner`` / ``CleanerThread`` — as asyncio tasks
that hand each cleaning to a pool of worker processes.

``log.cleaner.threads`` tasks each loop: choose the filthiest compacted log
(:class:`LogCleanerManager`, on the event loop), snapshot it into a job, run the
:class:`Cleaner` in a worker process (``log.cleaner.threads`` of them, started with
``spawn``: reading and writing files and decoding records hold the GIL, so a thread would
stall the event loop; the worker gets the job's paths and plain values, never a ``Log``),
open its ``.cleaned`` segments on a thread, swap them into the log's segment list on the
event loop (with the truncation-generation check), do the swap's renames, unlinks and
directory fsyncs on the cleaner's storage thread (:mod:`weir.storage.swap`; the log waits
for them before any structural change, as Kafka's log lock) and then advance the
``cleaner-offset-checkpoint``.  An abort reaches a worker through a file in a scratch
directory (:meth:`CleanJob.abort`).  With nothing to clean a task waits
``log.cleaner.backoff.ms``.  The dedupe buffer (``log.cleaner.dedupe.buffer.size``) is split
between the threads, as Kafka.  An I/O error takes the log's dir offline (Kafka marks the
dir offline too); any other error marks the partition uncleanable (Kafka's
``uncleanablePartitions``) and the cleaner goes on with other logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.config.keys import default_value
from weir.protocol.errors import ErrorCode, KafkaError
from weir.storage.cleaner import (
    Cleaner,
    CleanerStats,
    CleaningAborted,
    CleanResult,
    clean_in_worker,
    delete_cleaned,
    open_result,
)
from weir.storage.cleaner_manager import LogCleanerManager, write_cleaner_checkpoint
from weir.storage.log import Log

if TYPE_CHECKING:
    from weir.config import BrokerConfig

__all__ = ["CleanerConfig", "CleanerMetrics", "LogCleaner"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` keys (Kafka's ``CleanerConfig``); the field defaults
    are the key table's, :meth:`from_config` reads a broker config."""

    num_threads: int = default_value("log.cleaner.threads")
    dedupe_buffer_size: int = default_value("log.cleaner.dedupe.buffer.size")
    io_buffer_load_factor: float = default_value("log.cleaner.io.buffer.load.factor")
    max_io_bytes_per_second: float = default_value("log.cleaner.io.max.bytes.per.second")
    backoff_ms: int = default_value("log.cleaner.backoff.ms")
    enable_cleaner: bool = default_value("log.cleaner.enable")

    @classmethod
    def from_config(cls, config: BrokerConfig) -> CleanerConfig:
        """The cleaner runs when ``log.cleaner.enable`` and ``log.cleaner.threads`` > 0."""
        return cls(
            num_threads=config.log_cleaner_threads,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
            max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
            backoff_ms=config.log_cleaner_backoff_ms,
            enable_cleaner=config.log_cleaner_enable and config.log_cleaner_threads > 0,
        )


@dataclass(slots=True)
class CleanerMetrics:
    """Kafka's LogCleaner / LogCleanerManager gauges."""

    max_buffer_utilization_percent: float = 0.0
    cleaner_recopy_percent: float = 0.0
    max_clean_time_secs: float = 0.0
    max_compaction_delay_secs: float = 0.0
    dead_thread_count: int = 0
    time_since_last_run_ms: float = 0.0
    uncleanable_partitions_count: int = 0
    max_dirty_percent: float = 0.0
    cleanings: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    last_run_monotonic: float = field(default_factory=time.monotonic)


def _now_ms() -> int:
    return int(time.time() * 1000)


class LogCleaner:
    """Owns the manager, the worker threads and the loops; see the module docstring."""

    def __init__(self, log_manager, config: CleanerConfig) -> None:
        self.log_manager = log_manager
        self.config = config
        self.manager = LogCleanerManager(log_manager.log_dirs)
        self.metrics = CleanerMetrics()
        self._executor: ProcessPoolExecutor | None = None
        self._storage: ThreadPoolExecutor | None = None  # the swaps' file work, in order
        self._scratch: str | None = None  # abort files of jobs in worker processes
        self._job_ids = itertools.count()
        self._tasks: list[asyncio.Task] = []
        self._wake = asyncio.Event()
        self._stopping = False
        log_manager.cleaner = self.manager  # pause / forget hooks (Kafka's LogManager)

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        if not self.config.enable_cleaner or self._tasks:
            return
        n = max(1, self.config.num_threads)
        self._executor = self._new_executor()
        self._storage = ThreadPoolExecutor(1, thread_name_prefix="log-cleaner-swap")
        self._scratch = tempfile.mkdtemp(prefix="weir-log-cleaner-")
        per_thread = max(self.config.dedupe_buffer_size // n, 24)
        self._tasks = [asyncio.create_task(self._run(i, per_thread), name=f"log-cleaner-{i}")
                       for i in range(n)]
        log.info("log cleaner started with %d thread(s)", n)

    def _new_executor(self) -> ProcessPoolExecutor:
        return new_worker_pool(max(1, self.config.num_threads))

    async def stop(self) -> None:
        self._stopping = True
        self.manager.abort_all()
        self._wake.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._executor is not None:  # workers see their abort files and stop soon
            await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)
            self._executor = None
        if self._storage is not None:  # a swap's file work is finished, never dropped
            await asyncio.to_thread(self._storage.shutdown, wait=True)
            self._storage = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    async def reconfigure(self, config: CleanerConfig) -> None:
        """New ``log.cleaner.*`` values (dynamic broker configs): the threads are stopped
        (a cleaning in progress is aborted, its work redone later) and started again with
        them, as Kafka's ``LogCleaner.reconfigure``."""
        if config == self.config:
            return
        running = bool(self._tasks)
        await self.stop()
        self.config = config
        self._stopping = False
        if running or config.enable_cleaner:
            self.start()

    def wake(self) -> None:
        """Look for work now (tests, config changes)."""
        self._wake.set()

    # -- the loop ----------------------------------------------------------------------
    async def _run(self, index: int, buffer_bytes: int) -> None:
        try:
            while not self._stopping:
                cleaned = await self._clean_one(buffer_bytes)
                if not cleaned:
                    self._wake.clear()
                    try:
                        async with asyncio.timeout(self.config.backoff_ms / 1000):
                            await self._wake.wait()
                    except TimeoutError:
                        pass
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: Kafka counts the dead thread
            log.exception("log cleaner thread %d died", index)
            self.metrics.dead_thread_count += 1

    def _candidates(self) -> dict[TopicPartition, tuple[Log, Path]]:
        lm = self.log_manager
        out = {}
        for tp, lg in lm.all_logs().items():
            log_dir = lm.log_dir_of(tp)
            if log_dir is not None:
                out[tp] = (lg, log_dir)
        return out

    async def _clean_one(self, buffer_bytes: int) -> bool:
        now = _now_ms()
        self.metrics.time_since_last_run_ms = (time.monotonic()
                                               - self.metrics.last_run_monotonic) * 1000
        chosen = self.manager.grab_filthiest(self._candidates(), now)
        if chosen is None:
            return False
        self.metrics.max_dirty_percent = 100 * chosen.ratio
        self.metrics.max_compaction_delay_secs = chosen.compaction_delay_ms / 1000
        tp, log_dir = chosen.tp, chosen.log_dir
        job = self.manager.make_job(chosen, now)
        if self._scratch is not None:
            job.abort_path = f"{self._scratch}/{next(self._job_ids)}"
        loop = asyncio.get_running_loop()
        try:
            if self._executor is None:
                raise CleaningAborted("the log cleaner is stopped")
            files = await loop.run_in_executor(
                self._executor, clean_in_worker, job.portable(), buffer_bytes,
                self.config.io_buffer_load_factor, self.config.max_io_bytes_per_second)
            if job.aborted:
                for base, _first, _stop in files.groups:
                    delete_cleaned(job.directory, base)
                return True
            result: CleanResult = await asyncio.to_thread(open_result, job, files)
            if job.aborted:
                for new, _old in result.groups:
                    new.delete()
                return True
            if not result.groups:
                return False  # nothing could be cleaned: back off
            swapped = self._swap_in(chosen.log, log_dir, tp, result, job.generation)
            if swapped is not None:  # the files, then the checkpoint, off the event loop
                write = asyncio.ensure_future(self._finish_swap(log_dir, *swapped))
                try:
                    await asyncio.shield(write)
                except asyncio.CancelledError:  # shutdown: a swapped-in cleaning is recorded
                    await write
                    raise
        except CleaningAborted:
            log.info("cleaning of %s aborted", tp)
        except BrokenProcessPool:  # a worker died (killed, out of memory): a fresh pool
            log.error("a log cleaner worker process died while cleaning %s", tp)
            self.metrics.dead_thread_count += 1
            if self._executor is not None and not self._stopping:
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = self._new_executor()
        except OSError as exc:
            if not job.aborted:  # an aborted job's files may vanish under it (deletion)
                log.error("log cleaner I/O error on %s: %s", tp, exc)
                self.log_manager.mark_dir_failed(log_dir, f"log cleaner: {exc}")
        except KafkaError as exc:
            if exc.code == ErrorCode.kafka_storage_error:
                self.log_manager.mark_dir_failed(log_dir, exc.message)
            elif not job.aborted:
                log.error("cannot clean %s: %s; it is marked uncleanable", tp, exc.message)
                self.manager.uncleanable.add(tp)
        except Exception:
            if not job.aborted:
                log.exception("cannot clean %s; it is marked uncleanable", tp)
                self.manager.uncleanable.add(tp)
        finally:
            if job.abort_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(job.abort_path)
            self.manager.done_cleaning(tp)
            self.metrics.uncleanable_partitions_count = len(self.manager.uncleanable)
            self.metrics.last_run_monotonic = time.monotonic()
        return True

    def _swap_in(self, lg: Log, log_dir: Path, tp: TopicPartition, result: CleanResult,
                 generation: int) -> tuple[Future[None], dict[TopicPartition, int]] | None:
        """The segment list now; the file work handed to the storage thread."""
        work = lg.swap_in_cleaned([([new], old) for new, old in result.groups], generation,
                                  self._storage)
        if work is None:
            log.info("cleaning of %s dropped: the log changed meanwhile", tp)
            return None
        offsets = self.manager.update_checkpoint(log_dir, tp, result.end_offset, write=False)
        self._record(tp, result.stats)
        return work, offsets

    @staticmethod
    async def _finish_swap(log_dir: Path, work: Future[None],
                           offsets: dict[TopicPartition, int]) -> None:
        """The cleaner checkpoint is written once the swapped segments' names are final."""
        await asyncio.wrap_future(work)
        await asyncio.to_thread(write_cleaner_checkpoint, log_dir, offsets)

    def _record(self, tp: TopicPartition, stats: CleanerStats) -> None:
        m = self.metrics
        m.cleanings += 1
        m.bytes_read += stats.bytes_read
        m.bytes_written += stats.bytes_written
        m.cleaner_recopy_percent = stats.recopy_percent
        m.max_clean_time_secs = max(m.max_clean_time_secs, stats.elapsed_s)
        m.max_buffer_utilization_percent = 100 * stats.buffer_utilization
        log.info("cleaned %s: %d of %d records kept, %.1f%% of %d bytes recopied in %.3f s",
                 tp, stats.records_kept, stats.records_read, stats.recopy_percent,
                 stats.bytes_read, stats.elapsed_s)


def clean_now(manager: LogCleanerManager, cleaner: Cleaner,
              logs: dict[TopicPartition, tuple[Log, Path]], now_ms: int,
              force: bool = False) -> CleanResult | None:
    """One cleaning on the calling thread (tests, benchmarks, tools): the filthiest log of
    ``logs`` (with ``force``, any compacted log with a dirty section), swapped in and
    checkpointed; None if there was nothing to clean."""
    if force:
        logs = {tp: (lg, d) for tp, (lg, d) in logs.items()
                if lg.config.compact}
        saved = {tp: lg.config for tp, (lg, _d) in logs.items()}
        for lg, _d in logs.values():
            lg.config = _with_ratio_zero(lg.config)
        try:
            chosen = manager.grab_filthiest(logs, now_ms)
        finally:
            for tp, (lg, _d) in logs.items():
                lg.config = saved[tp]
    else:
        chosen = manager.grab_filthiest(logs, now_ms)
    if chosen is None:
        return None
    try:
        job = manager.make_job(chosen, now_ms)
        result = cleaner.clean(job)
        if not result.groups:
            return None
        for new, old in result.groups:
            if not chosen.log.replace_segments([new], old, job.generation):
                raise CleaningAborted(f"{chosen.tp} changed during the cleaning")
        manager.update_checkpoint(chosen.log_dir, chosen.tp, result.end_offset)
        return result
    finally:
        manager.done_cleaning(chosen.tp)


def _with_ratio_zero(config):
    from dataclasses import replace

    return replace(config, min_cleanable_dirty_ratio=0.0)


def new_worker_pool(workers: int) -> ProcessPoolExecutor:
    """The cleaner's worker processes. ``spawn``: never fork a process with running threads
    and an event loop. Each worker exits when its broker is gone, even after a SIGKILL that
    left the broker no chance to shut the pool down."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=exit_with_broker, initargs=(os.getpid(),))


def exit_with_broker(broker_pid: int, poll_s: float = 0.5) -> None:
    """Pool initializer: watch the parent process and exit as soon as it is not the broker
    any more (an orphan is re-parented). A cleaning cut short leaves only ``.cleaned``
    files, which the next load of the log deletes."""
    def watch() -> None:
        while os.getppid() == broker_pid:
            time.sleep(poll_s)
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-broker", daemon=True).start()

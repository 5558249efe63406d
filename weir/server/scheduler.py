"""The broker's periodic jobs (Kafka's KafkaScheduler): checkpoints, ISR shrinking, retention,
flushes, producer-id expiry.  Each job runs on the event loop every interval; a failure is
logged and the job runs again at its next interval.  Every task is kept and cancelled by
:meth:`Scheduler.stop`.

A job may be a coroutine function; it hands blocking file work (a checkpoint's write and
fsyncs) to :meth:`Scheduler.off_loop`, the scheduler's one I/O thread (Kafka's scheduler
runs its jobs on threads of its own, never on a request's).  One thread keeps each file's
writes in the order they were taken; :meth:`Scheduler.stop` waits for the write under way,
so nothing the scheduler started lands after the broker's final checkpoints."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from weir.asyncutil import cancel_and_wait

log = logging.getLogger(__name__)

MIN_INTERVAL_MS = 10
_T = TypeVar("_T")


class Scheduler:
    def __init__(self) -> None:
        self._jobs: list[tuple[str, int, Callable[[], object]]] = []
        self._tasks: list[asyncio.Task] = []
        self._io: ThreadPoolExecutor | None = None

    def schedule(self, name: str, interval_ms: int, job: Callable[[], object]) -> None:
        """Run ``job`` every ``interval_ms`` (at least 10 ms) once started; a job that
        returns an awaitable is awaited before its next interval starts."""
        if self._tasks:
            raise RuntimeError("jobs are scheduled before the scheduler starts")
        self._jobs.append((name, interval_ms, job))

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._every(name, interval, job),
                                           name=f"scheduler-{name}")
                       for name, interval, job in self._jobs]

    async def off_loop(self, work: Callable[[], _T]) -> _T:
        """``work()`` on the scheduler's I/O thread; its result, or what it raised."""
        if self._io is None:
            self._io = ThreadPoolExecutor(1, thread_name_prefix="weir-scheduler-io")
        return await asyncio.get_running_loop().run_in_executor(self._io, work)

    async def write_each(self, writes: list[tuple[Path, Callable[[], None]]],
                         failed: Callable[[Path, str], None]) -> None:
        """Each ``(log dir, write)`` of ``writes`` on the I/O thread, in turn; a write
        that raises OSError is ``failed(log dir, reason)`` (the dir goes offline, as
        Kafka's ``LogDirFailureChannel`` takes it on a checkpoint's IOException)."""
        for log_dir, write in writes:
            try:
                await self.off_loop(write)
            except OSError as exc:
                failed(log_dir, str(exc))

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        io, self._io = self._io, None
        if io is not None:  # a cancelled job's write may still be under way: let it end
            await asyncio.to_thread(io.shutdown, wait=True)

    @property
    def job_names(self) -> list[str]:
        return [name for name, _interval, _job in self._jobs]

    @staticmethod
    async def _every(name: str, interval_ms: int, job: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, MIN_INTERVAL_MS) / 1000)
            try:
                result = job()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("periodic job %s failed", name)

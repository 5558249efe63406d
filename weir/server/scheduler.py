"""The broker's periodic jobs (Kafka's KafkaScheduler): checkpoints, ISR shrinking, retention,
flushes, producer-id expiry.  Each job runs on the event loop every interval; a failure is
logged and the job runs again at its next interval.  Every task is kept and cancelled by
:meth:`Scheduler.stop`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from weir.asyncutil import cancel_and_wait

log = logging.getLogger(__name__)

MIN_INTERVAL_MS = 10


class Scheduler:
    def __init__(self) -> None:
        self._jobs: list[tuple[str, int, Callable[[], object]]] = []
        self._tasks: list[asyncio.Task] = []

    def schedule(self, name: str, interval_ms: int, job: Callable[[], object]) -> None:
        """Run ``job`` every ``interval_ms`` (at least 10 ms) once started."""
        if self._tasks:
            raise RuntimeError("jobs are scheduled before the scheduler starts")
        self._jobs.append((name, interval_ms, job))

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._every(name, interval, job),
                                           name=f"scheduler-{name}")
                       for name, interval, job in self._jobs]

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)
        self._tasks = []

    @property
    def job_names(self) -> list[str]:
        return [name for name, _interval, _job in self._jobs]

    @staticmethod
    async def _every(name: str, interval_ms: int, job: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, MIN_INTERVAL_MS) / 1000)
            try:
                job()
            except Exception:
                log.exception("periodic job %s failed", name)

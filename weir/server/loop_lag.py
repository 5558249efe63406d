"""``weir_event_loop_lag_ms``: how late the broker's event loop wakes a sleeping task.

A broker is one asyncio event loop; anything that blocks it (a long synchronous read, a
large batch decoded inline, a slow callback) delays every connection at once.  Kafka's
closest gauges are the network processors' idle percentages; Weir measures the stall
directly: a small task asks to sleep ``interval_s`` and records, in milliseconds, how much
later than asked it was woken.  On an idle, healthy loop the values stay near 0; a stall of
N ms shows up as an observation of about N ms.

The sample arithmetic is a pure function (:func:`lateness_ms`); :class:`EventLoopLagMonitor`
is the asyncio shell around a prometheus_client ``Histogram``.  A stall of
``STALL_LOG_MS`` or more is also logged (WARNING, with its length), so a stall can be matched
with what the broker was doing at that moment (the control-plane benchmark reads these lines).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Histogram

from weir.asyncutil import cancel_and_wait

METRIC = "weir_event_loop_lag_ms"
BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
INTERVAL_S = 0.1
STALL_LOG_MS = 100.0

log = logging.getLogger(__name__)


def lateness_ms(asked_s: float, started: float, woke: float) -> float:
    """Milliseconds between when a sleep of ``asked_s`` from ``started`` should have ended
    and ``woke`` (monotonic seconds); never negative (timers may fire a hair early)."""
    return max(0.0, (woke - started - asked_s) * 1000.0)


class EventLoopLagMonitor:
    """Samples the running loop's lag every ``interval_s`` into a histogram registered in
    ``registry``."""

    def __init__(self, registry: CollectorRegistry, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.histogram = Histogram(
            METRIC, "How late the broker's event loop woke a task sleeping for "
            f"{interval_s * 1000:g} ms, in milliseconds.",
            buckets=BUCKETS_MS, registry=registry)
        self.interval_s = interval_s
        self._clock = clock
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="event-loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            started = self._clock()
            await asyncio.sleep(self.interval_s)
            late = lateness_ms(self.interval_s, started, self._clock())
            self.histogram.observe(late)
            if late >= STALL_LOG_MS:
                log.warning("event loop stalled: a %g ms sleep woke %.0f ms late",
                            self.interval_s * 1000, late)

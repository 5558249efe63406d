"""The broker's cyclic garbage collector settings: full collections off the startup heap.

A broker is one event loop, so a collection is a stall of every connection at once (the
JVM's stop-the-world pauses are what Kafka's G1 tuning keeps short).  CPython's full
(generation 2) collection walks every tracked container, and most of a broker's containers
are built at startup and live until it stops: imported modules, kio's schema classes, the
configuration, the partitions and segments it loaded.  Measured on a 3-broker cluster under
load (bench/latency.py), full collections took 100-400 ms of wall time and showed up as
latency spikes of the same size.

:func:`freeze_startup_heap` runs one full collection and then
``gc.freeze()``\\ s what survives: those objects move to the permanent generation, which no
later collection walks, so a full collection only sees what was allocated since.  Nothing is
leaked: a frozen object that becomes unreachable is freed by reference counting as before;
only reference cycles among frozen objects are no longer collected (startup data has none
that die).  A broker process calls it before loading its logs (the imports' heap, ~46,000
objects) and once it has started (only what was allocated since is walked).

:func:`paused` turns the collector off while a start-up phase builds only long-lived
objects: loading 10,000 logs allocates ~350,000 tracked containers, each allocation
counted toward the next collection, and the collections it triggers walk the growing heap
again and again for no garbage — measured in-process at 10,000 idle logs: 0.99-1.02 s of
CPU with the collector on, 0.61-0.64 s paused.  What the load built is then frozen without
a collection (:func:`freeze_built_while_paused`): a full collection right after loading
10,000 logs finds no unreachable object, and walking them took 0.15 s of CPU (0.4-0.5 s of
wall time on the loaded machine) before the broker could register; the 10,000 logs are
most of a large broker's heap.
:data:`YOUNG_THRESHOLD` makes young collections rarer: a broker allocates and
frees many short-lived containers per request (decoded requests, dicts of partitions),
nearly all freed by reference counting, so the default 700 allocations start a young
collection every few requests for nothing.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

YOUNG_THRESHOLD = 10_000  # generation 0: allocations minus deallocations before a collection


def tune_thresholds() -> tuple[int, int, int]:
    """Raise the young-generation threshold (the older two keep their defaults); returns
    the thresholds now in force."""
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, gc.get_threshold()[0]), gen1, gen2)
    return gc.get_threshold()


def freeze_startup_heap() -> int:
    """Collect once, then move every surviving tracked object to the permanent generation;
    returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@contextmanager
def paused() -> Iterator[None]:
    """The cyclic collector off for the block (restored as it was, even on an error);
    reference counting frees objects as usual."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def freeze_built_while_paused() -> int:
    """Freeze, without a collection, the objects allocated since the last one (inside
    :func:`paused`, after :func:`freeze_startup_heap`: what that phase built, long-lived
    by construction); returns how many objects are frozen in all.  A reference cycle that
    phase left behind would stay allocated: log loading leaves none."""
    gc.freeze()
    return gc.get_freeze_count()


FREEZE_AFTER_NEW_REPLICAS = 1000
"""A LeaderAndIsr that gives the broker at least this many new replicas is followed by
:func:`freeze_new_replicas`."""


def freeze_new_replicas(count: int, logger: Any) -> int:
    """After a LeaderAndIsr made ``count`` new replicas (a topic created, or the first
    requests after a start): one full collection, then what survives frozen, as at
    start-up.  Those replicas' partitions, logs and segments live until they are deleted;
    left in the collected generations, every later full collection walked them again —
    0.5-0.7 s at 10,000 replicas, at whatever moment it fell, a controlled shutdown's
    LeaderAndIsr included.  The collection here is the one their allocation would have
    started anyway.  Returns how many objects are frozen."""
    started = time.perf_counter()
    frozen = freeze_startup_heap()
    logger.info("froze %d objects out of the cyclic GC after %d new replicas (%.0f ms)",
                frozen, count, (time.perf_counter() - started) * 1000)
    return frozen


SLOW_COLLECTION_MS = 50.0
"""A collection of at least this long is logged (:func:`log_slow_collections`)."""


class _CollectionLog:
    """``gc.callbacks`` hook: times each collection and logs the slow ones with their
    generation and what they freed, so an event-loop stall can be matched with a
    collection (the JVM's GC log is Kafka's)."""

    def __init__(self, logger: Any, threshold_ms: float) -> None:
        self._log = logger
        self._threshold_ms = threshold_ms
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        took_ms = (time.perf_counter() - self._started) * 1000
        if took_ms >= self._threshold_ms:
            self._log.info("gc: generation %d collection took %.0f ms (%d collected, "
                           "%d uncollectable)", info.get("generation", -1), took_ms,
                           info.get("collected", 0), info.get("uncollectable", 0))


def log_slow_collections(logger: Any, threshold_ms: float = SLOW_COLLECTION_MS
                         ) -> Callable[[str, dict[str, int]], None]:
    """Log every collection of at least ``threshold_ms`` on ``logger`` (installed once per
    process; returns the callback, for :func:`stop_logging_collections`)."""
    for cb in gc.callbacks:
        if isinstance(cb, _CollectionLog):
            return cb
    cb = _CollectionLog(logger, threshold_ms)
    gc.callbacks.append(cb)
    return cb


def stop_logging_collections(cb: Callable[[str, dict[str, int]], None]) -> None:
    with contextlib.suppress(ValueError):
        gc.callbacks.remove(cb)

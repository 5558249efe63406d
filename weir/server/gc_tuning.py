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

import gc
from collections.abc import Iterator
from contextlib import contextmanager

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

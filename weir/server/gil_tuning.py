"""The interpreter's thread switch interval in a broker process: helper threads keep moving
while the event loop is busy.

Besides its event loop, a broker runs threads that spend their time in short system calls:
the storage thread (:mod:`weir.storage.deferred_writes`: ``partition.metadata`` and
leader-epoch checkpoints, thousands at a time after a LeaderAndIsr), the worker that creates
a new topic's logs, ``asyncio.to_thread`` calls, and the ZooKeeper client's connection
thread (a controller's writes of thousands of partition states).  Each system call lets go
of the GIL.  Taking it back while the event loop runs Python waits until the loop drops
it: at its next blocking call, or once CPython's switch interval (5 ms by default) has run
out and the loop is asked to.  So while the loop is busy (applying a LeaderAndIsr of
thousands of partitions, answering Metadata for every topic, a cyclic collection) a helper
thread gets one system call per switch interval: the "convoy effect" of CPython's GIL.

Measured with ``bench/gil_convoy.py`` (a thread writing small files, four system calls
each, beside a thread running Python): alone it writes about 8,000 files/s; beside busy
Python 83/s at 5 ms, 394/s at 1 ms, 705/s at 0.5 ms, while the Python thread lost 1-4 % at
any of them.  In a broker the same showed as a batch of 10,000 ``partition.metadata``
files taking 5-7.6 s to write after a topic's creation, and still pending (3-4.8 s more)
when a controlled shutdown began a few seconds later.

:func:`shorten` sets :data:`SWITCH_INTERVAL_S`; a thread that waits for the GIL then waits
at most that long.  Only a thread that waits costs anything: with the helpers idle (a
broker's steady state) no forced switch happens at all.  Kafka's JVM has no such lock.
``WEIR_SWITCH_INTERVAL_MS`` in the environment overrides the value (to compare settings in
a benchmark); CPython's default is 5.
"""

from __future__ import annotations

import math
import os
import sys

SWITCH_INTERVAL_S = 0.0005
ENV = "WEIR_SWITCH_INTERVAL_MS"


def shorten(environ: dict[str, str] | None = None) -> float:
    """Set the switch interval (:data:`SWITCH_INTERVAL_S`, or ``WEIR_SWITCH_INTERVAL_MS``
    milliseconds from ``environ``); returns the interval now in force, in seconds.  A value
    that is not a positive number is refused with ValueError naming it."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV, "").strip()
    interval = SWITCH_INTERVAL_S
    if raw:
        try:
            interval = float(raw) / 1000
        except ValueError:
            raise ValueError(f"{ENV}={raw!r} is not a number of milliseconds") from None
        if not (interval > 0 and math.isfinite(interval)):
            raise ValueError(f"{ENV}={raw!r} must be a positive number of milliseconds")
    sys.setswitchinterval(interval)
    return sys.getswitchinterval()

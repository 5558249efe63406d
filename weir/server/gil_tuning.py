"""The interpreter's thread switch interval in a broker process: left at CPython's 5 ms
unless ``WEIR_SWITCH_INTERVAL_MS`` sets it, and why.

Besides its event loop, a broker runs threads that spend their time in short system calls:
the storage thread (:mod:`weir.storage.deferred_writes`: ``partition.metadata`` and
leader-epoch checkpoints, thousands at a time after a LeaderAndIsr), the worker that creates
a new topic's logs, ``asyncio.to_thread`` calls, and the ZooKeeper client's connection
thread.  Each system call lets go of the GIL.  Taking it back while the event loop runs
Python waits until the loop drops it: at its next blocking call, or once the switch
interval has run out and the loop is asked to (CPython's "convoy effect").  So while the
loop is busy a helper thread makes about one system call per interval.

``bench/gil_convoy.py`` shows the trade in one process (a thread writing small files, four
system calls each, beside a thread running Python): alone the writer manages about 8,000
files/s; beside busy Python 76-83/s at 5 ms, about 400/s at 1 ms, about 700/s at 0.5 ms,
and the Python thread does 1-7 % less work.  The price is the loop's: every
forced switch hands the GIL over and waits for the other thread to be scheduled.

In the broker benchmarks a 0.5 ms interval (alternated runs, docs/perf-history.md) left RF 3
throughput as it was, made the creation of 10,000 new logs steadier (2.4-2.9 s per broker
against 2.5-6.3 s), and did not improve what users see: produce p99.9 at 5,000 records/s
was 9-20 × p50 (median of four runs 16.4 ×) against 12-20 × (13.3 ×) at 5 ms, in
alternated runs, and a controlled shutdown's new leaders reached
the controller's Metadata no sooner (its loop shared the GIL with a batch of 3,333
leader-epoch checkpoints).  So the default stays CPython's; the variable is there to
compare settings.  The lasting fix was on the helper's side: a checkpoint's temp file is
written with three system calls, not the seven of ``open(path, "w")``
(:func:`weir.storage.checkpoints.write_temp`).
"""

from __future__ import annotations

import math
import os
import sys

ENV = "WEIR_SWITCH_INTERVAL_MS"


def apply(environ: dict[str, str] | None = None) -> float:
    """Set the switch interval from ``WEIR_SWITCH_INTERVAL_MS`` (milliseconds) in
    ``environ`` if it is there; returns the interval in force, in seconds.  A value that is
    not a positive number is refused with ValueError naming it (nothing changed)."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV, "").strip()
    if raw:
        try:
            interval = float(raw) / 1000
        except ValueError:
            raise ValueError(f"{ENV}={raw!r} is not a number of milliseconds") from None
        if not (interval > 0 and math.isfinite(interval)):
            raise ValueError(f"{ENV}={raw!r} must be a positive number of milliseconds")
        sys.setswitchinterval(interval)
    return sys.getswitchinterval()

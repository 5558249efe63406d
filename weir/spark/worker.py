"""Set-up of the Python worker that runs a read or write task, once per worker process.

PySpark runs data source tasks in Python workers forked from its daemon
(``pyspark/daemon.py``) and, with ``spark.python.worker.reuse`` (the default), keeps each
worker for the next task.  Between two tasks the daemon calls ``gc.collect()``: a full
collection of every object the worker tracks.  A worker that has imported pyarrow,
pandas, numba and weir tracks about 125 000 objects, and collecting them takes about
0.16 s of CPU after *every* task, on that task's core; the next task given to that worker
waits for it (Spark counts it as the task's Python "boot" time).  On a count over
1 000 000 records in 4 tasks on 2 cores, that is about a third of the Spark query.

:func:`prepare` imports what a task needs (the decoder, pyarrow) and then calls
``gc.freeze()``: the objects alive at that moment (modules, classes, functions, the
compiled kernel) move into a permanent generation that collections skip, so the daemon's
collection between tasks costs microseconds.  Objects created later, by this task or the
next ones, are collected as usual.  Only processes that run a Spark task are frozen (a
test or a driver that calls a reader directly is left alone), and only once.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)

_prepared: set[str] = set()


def in_spark_task() -> bool:
    """Whether this process is running a Spark task (a Python worker)."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is a dependency of the spark extra
        return False
    return TaskContext.get() is not None


def prepare(kind: str) -> bool:
    """Import what a ``kind`` task ("read" or "write") needs, then freeze the heap.

    Returns whether the heap was frozen now (False when this process is not a Spark task
    or was prepared for ``kind`` already)."""
    if kind in _prepared:
        return False
    if kind == "read":
        import pyarrow  # noqa: F401 - loaded before the freeze on purpose

        import weir.spark.decode  # the compiled kernel, loaded from its cache
        import weir.spark.fetch
    elif kind == "write":
        import confluent_kafka  # noqa: F401

        import weir.spark.produce  # noqa: F401
    else:
        raise ValueError(f"unknown task kind {kind!r}")
    if not in_spark_task():
        return False
    _prepared.add(kind)
    gc.freeze()
    log.debug("weir: Python worker prepared for %s tasks; %d objects frozen", kind,
              gc.get_freeze_count())
    return True

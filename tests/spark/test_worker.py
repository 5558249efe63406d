"""weir.spark.worker: a Python worker running a Spark task freezes its heap once, so
PySpark's gc.collect() between reused-worker tasks does not walk every imported object."""

from __future__ import annotations

import gc

import pytest
from pyspark import TaskContext

from weir.spark import worker


@pytest.fixture
def fresh_worker_state():
    """Undo what prepare() does to this (test) process."""
    saved = set(worker._prepared)
    worker._prepared.clear()
    yield
    gc.unfreeze()
    worker._prepared.clear()
    worker._prepared.update(saved)
    TaskContext._setTaskContext(None)


def test_outside_a_spark_task_nothing_is_frozen(fresh_worker_state):
    assert TaskContext.get() is None
    before = gc.get_freeze_count()
    assert worker.prepare("read") is False
    assert gc.get_freeze_count() == before
    assert not worker._prepared


def test_in_a_task_the_heap_is_frozen_once_per_kind(fresh_worker_state):
    gc.unfreeze()
    TaskContext._setTaskContext(TaskContext())
    assert worker.prepare("read") is True
    frozen = gc.get_freeze_count()
    assert frozen > 10_000  # pyarrow, numpy, numba, weir: modules, classes, functions
    assert worker.prepare("read") is False  # the next task on this worker: nothing to do
    # Nothing frozen again: the count may only fall (a frozen object freed meanwhile, e.g.
    # by another thread of the test process), never grow by a second freeze.
    assert gc.get_freeze_count() <= frozen
    assert worker.prepare("write") is True  # a write task brings confluent-kafka along


def test_a_full_collection_skips_the_frozen_objects(fresh_worker_state):
    """The daemon's per-task gc.collect() walks the objects the collector tracks; after
    prepare() the imported modules are no longer among them (a count, not a duration)."""
    gc.unfreeze()
    TaskContext._setTaskContext(TaskContext())
    import weir.spark.decode  # noqa: F401

    tracked_before = len(gc.get_objects())
    worker.prepare("read")
    assert len(gc.get_objects()) < tracked_before // 10


def test_unknown_kind_is_refused(fresh_worker_state):
    with pytest.raises(ValueError, match="unknown task kind"):
        worker.prepare("scan")

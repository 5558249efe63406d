"""weir.server.gc_tuning: the startup heap frozen, the young threshold raised."""

from __future__ import annotations

import gc

import pytest

from weir.server import gc_tuning


@pytest.fixture
def restore_gc():
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_freeze_moves_live_objects_out_of_collections(restore_gc):
    gc.unfreeze()
    survivors = [[i] for i in range(1000)]  # tracked containers that stay alive
    frozen = gc_tuning.freeze_startup_heap()
    assert frozen >= len(survivors)  # (frozen objects freed since by refcount leave the count)
    # Frozen objects are outside every generation: a full collection no longer walks them.
    assert not any(o is survivors[0] for o in gc.get_objects())
    # Garbage made afterwards is still collected, cycles included.
    cycle: list = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1


def test_young_threshold_raised_older_kept(restore_gc):
    gc.set_threshold(700, 10, 10)
    assert gc_tuning.tune_thresholds() == (gc_tuning.YOUNG_THRESHOLD, 10, 10)
    gc.set_threshold(50_000, 5, 5)  # a higher setting already in force is kept
    assert gc_tuning.tune_thresholds() == (50_000, 5, 5)

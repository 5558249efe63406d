"""The broker's start-up GC settings (weir.server.gc_tuning)."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

import pytest

from weir.server import gc_tuning


def test_paused_turns_the_collector_off_and_back_on() -> None:
    assert gc.isenabled()
    with gc_tuning.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_paused_restores_the_collector_after_an_error() -> None:
    with pytest.raises(RuntimeError), gc_tuning.paused():
        raise RuntimeError("log load failed")
    assert gc.isenabled()


def test_paused_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with gc_tuning.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_allocations_while_paused_start_no_collection_and_garbage_is_freed_after() -> None:
    gc.collect()
    before = gc.get_stats()[0]["collections"]
    with gc_tuning.paused():
        cycle = weakref.ref(_Node())
        for _ in range(20_000):  # well past every generation's threshold
            _Node()
        assert gc.get_stats()[0]["collections"] == before
        assert cycle() is not None
    gc.collect()
    assert cycle() is None


def test_what_a_paused_phase_built_is_frozen_without_a_collection() -> None:
    gc.collect()
    collections = [g["collections"] for g in gc.get_stats()]
    try:
        with gc_tuning.paused():
            built = [[i] for i in range(5_000)]  # long-lived containers, as loaded logs
            frozen = gc_tuning.freeze_built_while_paused()
        assert frozen >= len(built)
        assert [g["collections"] for g in gc.get_stats()] == collections
    finally:
        gc.unfreeze()


def test_new_replicas_are_frozen_after_a_collection(caplog) -> None:
    """What a large LeaderAndIsr built (its replicas) leaves the collected generations;
    garbage made before is collected first, not frozen."""
    import logging

    before = gc.get_freeze_count()
    cycle = weakref.ref(_Node())
    built = [[i] for i in range(5_000)]
    try:
        with caplog.at_level(logging.INFO):
            frozen = gc_tuning.freeze_new_replicas(5_000, logging.getLogger("t"))
        assert cycle() is None  # collected, not frozen
        assert frozen >= before + len(built)
        assert "after 5000 new replicas" in caplog.text
    finally:
        gc.unfreeze()


def test_slow_collections_are_logged_with_their_generation() -> None:
    lines: list[str] = []
    sink = SimpleNamespace(info=lambda fmt, *args: lines.append(fmt % args))
    cb = gc_tuning.log_slow_collections(sink, threshold_ms=0.0)
    try:
        assert gc_tuning.log_slow_collections(sink) is cb  # installed once
        gc.collect()
    finally:
        gc_tuning.stop_logging_collections(cb)
    assert any(line.startswith("gc: generation 2 collection took") for line in lines)
    gc.collect()
    assert len([x for x in lines if "generation 2" in x]) == 1  # no longer installed

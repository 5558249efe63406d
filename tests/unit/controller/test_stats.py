"""Kafka's controller timers (EventQueueTimeMs, EventQueueProcessingTimeMs, per-state
RateAndTimeMs) and the slow-event breakdown the shell logs; their /metrics rendering."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from weir.controller import service as service_module
from weir.controller.effects import ZkDeleteTopic
from weir.controller.events import ControlledShutdown, TopicDeletion
from weir.controller.service import ControllerService, _Watched
from weir.controller.stats import (
    BUCKETS_MS,
    ControllerStats,
    EventTiming,
    TimerHistogram,
    controller_state,
    rate_and_time_metric,
)
from weir.server import metrics
from weir.server.metrics import ControllerSnapshot, MetricsSnapshot


def test_histogram_buckets_are_cumulative_with_inf_last() -> None:
    h = TimerHistogram()
    for ms in (0.5, 1, 3, 150, 10**6):
        h.observe(ms)
    buckets = dict(h.cumulative())
    assert buckets["1"] == 2 and buckets["5"] == 3 and buckets["250"] == 4
    assert buckets[str(BUCKETS_MS[-1])] == 4 and buckets["+Inf"] == 5
    assert h.count == 5 and h.sum_ms == pytest.approx(0.5 + 1 + 3 + 150 + 10**6)


@pytest.mark.parametrize(("event", "metric"), [
    ("BrokerChange", "LeaderElectionRateAndTimeMs"),
    ("ControlledShutdown", "ControlledShutdownRateAndTimeMs"),
    ("Startup", "ControllerChangeRateAndTimeMs"),
    ("AlterPartition", "IsrChangeRateAndTimeMs"),
    ("AlterReassignments", "PartitionReassignmentRateAndTimeMs"),
    ("ElectLeaders", "ManualLeaderBalanceRateAndTimeMs"),
    ("TopicChange", "TopicChangeRateAndTimeMs"),
])
def test_events_map_to_kafka_controller_states(event: str, metric: str) -> None:
    assert rate_and_time_metric(controller_state(event)) == metric


def test_stats_record_queue_processing_and_state_timers() -> None:
    stats = ControllerStats()
    stats.record(EventTiming("BrokerChange", queue_ms=7, processing_ms=120))
    stats.record(EventTiming("BrokerChange", queue_ms=1, processing_ms=30))
    assert stats.event_queue_time.count == 2 and stats.event_queue_time.sum_ms == 8
    assert stats.event_queue_processing_time.sum_ms == 150
    assert set(stats.rate_and_time) == {"LeaderElectionRateAndTimeMs"}
    assert stats.rate_and_time["LeaderElectionRateAndTimeMs"].count == 2


def test_summary_names_every_part() -> None:
    timing = EventTiming("ControlledShutdown", queue_ms=3, processing_ms=900, core_ms=200,
                         zk_ms=650, zk_ops=2, zk_znodes=10000, send_ms=40,
                         sends=[(310.0, 5), (880.0, 6)])
    line = timing.summary()
    assert line.startswith("ControlledShutdown took 900 ms after 3 ms queued")
    assert "core 200 ms, ZooKeeper 650 ms (2 ops, 10000 znodes), send 40 ms, other 10 ms" in line
    assert line.endswith("request batches 5 at +310 ms, 6 at +880 ms")


class _Core:
    """Yields one ZooKeeper operation, then finishes (a scripted ControllerCore)."""

    active = True

    def __init__(self) -> None:
        self.awaiting_result = False

    def handle(self, event, now_ms):
        self.awaiting_result = True
        return [ZkDeleteTopic("t", 3)]

    def complete(self, result, now_ms):
        self.awaiting_result = False
        return []


class _Store:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        time.sleep(0.001)
        self.deleted.append(topic)


def test_the_shell_times_each_event_and_logs_a_slow_ones_breakdown(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(service_module, "SLOW_EVENT_MS", 0.0)  # every event is "slow"
    store = _Store()
    service = ControllerService(1, zk=store)
    service.core = _Core()

    async def scenario() -> None:
        handled = asyncio.Event()
        finish = service._finish_timing

        def finished(started: float) -> None:
            finish(started)
            handled.set()
        service._finish_timing = finished  # type: ignore[method-assign]
        consumer = asyncio.create_task(service._run())
        service._queue.put_nowait((time.perf_counter(),
                                   _Watched(service._generation, TopicDeletion(frozenset()))))
        await asyncio.wait_for(handled.wait(), 10)
        consumer.cancel()

    with caplog.at_level(logging.INFO, logger="weir.controller.service"):
        asyncio.run(scenario())
    assert store.deleted == ["t"]
    stats = service.stats
    assert stats.event_queue_time.count == 1 and stats.event_queue_processing_time.count == 1
    assert stats.rate_and_time["TopicDeletionRateAndTimeMs"].count == 1
    (line,) = [r.getMessage() for r in caplog.records if " took " in r.getMessage()]
    assert line.startswith("controller 1: TopicDeletion took ")
    assert "(1 ops, 1 znodes)" in line and "request batches none" in line


def test_metrics_render_the_timers_as_histograms() -> None:
    stats = ControllerStats()
    stats.record(EventTiming("ControlledShutdown", queue_ms=2, processing_ms=700))
    controller = type("C", (), {"is_active": False, "stats": stats})()
    snap = MetricsSnapshot(controller=metrics.controller_snapshot(controller))
    samples = metrics.parse(metrics.render(snap))
    manager = "kafka_controller_controllereventmanager_"
    assert samples[(manager + "eventqueuetimems_count", ())] == 1
    assert samples[(manager + "eventqueueprocessingtimems_sum", ())] == 700
    name = "kafka_controller_controllerstats_controlledshutdownrateandtimems"
    assert samples[(name + "_bucket", (("le", "500"),))] == 0
    assert samples[(name + "_bucket", (("le", "1000"),))] == 1
    # no controller, no timers
    assert metrics.controller_snapshot(None) == ControllerSnapshot()


def test_controlled_shutdown_event_type_is_timed_under_its_state() -> None:
    stats = ControllerStats()
    stats.record(EventTiming(type(ControlledShutdown(1, 1, None)).__name__, processing_ms=5))
    assert "ControlledShutdownRateAndTimeMs" in stats.rate_and_time

"""bench/controller_timeline.py reads the lines the controller logs (its slow-event breakdown,
the channels' request lines) and the brokers' LeaderAndIsr lines: the formats must agree."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path

from weir.controller.stats import EventTiming

_PATH = Path(__file__).resolve().parents[3] / "bench" / "controller_timeline.py"
_spec = importlib.util.spec_from_file_location("controller_timeline", _PATH)
assert _spec is not None and _spec.loader is not None
timeline_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(timeline_module)


def _line(stamp: str, logger: str, message: str) -> str:
    return f"[2026-11-23 {stamp}] INFO {logger}: {message}"


def test_timeline_reads_the_controllers_own_lines() -> None:
    wall0 = datetime(2026, 11, 23, 8, 0, 0).timestamp()
    event = EventTiming("ControlledShutdown", queue_ms=1, processing_ms=2000, core_ms=300,
                        zk_ms=1650, zk_ops=2, zk_znodes=10000, send_ms=10,
                        sends=[(500.0, 4), (1990.0, 8)])
    controller = "\n".join([
        _line("08:00:00,100", "weir.controller.service",
              "controller 1: Broker 3 is shutting down; shutting down brokers [3]"),
        _line("08:00:02,100", "weir.controller.service", f"controller 1: {event.summary()}"),
        _line("08:00:02,300", "weir.controller.channel",
              "controller channel to broker 2: LeaderAndIsrRequest (3333 partitions) queued "
              "5 ms, encoded 40 ms, answered 700 ms after it was sent"),
    ])
    broker = _line("08:00:01,000", "weir.server.handlers.leader_and_isr",
                   "LeaderAndIsr from controller epoch 1: 3333 partitions applied in 120 ms "
                   "(new logs created off the event loop first: 0 ms)")
    rows = timeline_module.timeline({1: controller, 2: broker}, wall0)
    assert [(t, b) for t, b, _ in rows] == [
        (0.1, 1), (0.1, 1), (0.6, 1), (1.0, 2), (2.09, 1), (2.1, 1), (2.3, 1)]
    what = [w for _, _, w in rows]
    assert what[0] == "ControlledShutdown of broker 3 reaches the controller's event"
    assert what[1] == "controller dequeues ControlledShutdown (queued 1 ms)"
    assert what[2] == "controller hands ControlledShutdown's batch of 4 requests to the channels"
    assert what[3] == "applied LeaderAndIsr of 3333 partitions (120 ms on its loop)"
    assert "ZooKeeper 1650 ms (2 ops, 10000 znodes)" in what[5]
    assert what[6].startswith("broker 2 answered LeaderAndIsr (3333 partitions)")
    assert timeline_module.timeline_lines(rows)[2].startswith("| 0.100 | 1 |")

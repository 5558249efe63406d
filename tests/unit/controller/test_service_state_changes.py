"""The controller shell keeps its newest state-change log lines in a bounded ring, names
the event it is handling and reports its event queue (read by /controller and /metrics)."""

from __future__ import annotations

import asyncio
import logging

from weir.controller.effects import Log
from weir.controller.events import TopicDeletion
from weir.controller.service import STATE_CHANGE_HISTORY, ControllerService


class ScriptedCore:
    """Answers every event with the given log lines; notes which event the shell named."""

    def __init__(self, service: ControllerService, lines: list[Log]) -> None:
        self.service, self.lines, self.seen_current = service, lines, []
        self.active = True

    def handle(self, event, now_ms):
        self.seen_current.append(self.service.current_event)
        return list(self.lines)


def test_log_lines_are_kept_with_their_event_and_level() -> None:
    service = ControllerService(1, zk=None, now_ms=lambda: 1234)
    core = ScriptedCore(service, [Log.info("Partition t-0 state changed from Online to Offline"),
                                  Log.error("Giving up updating leader/ISR of t-1")])
    service.core = core
    asyncio.run(service._process(TopicDeletion(frozenset({"t"}))))
    assert core.seen_current == ["TopicDeletion"]
    assert service.current_event is None and service.events_processed == 1
    assert [c.to_json() for c in service.state_changes] == [
        {"time_ms": 1234, "event": "TopicDeletion", "level": "INFO",
         "message": "Partition t-0 state changed from Online to Offline"},
        {"time_ms": 1234, "event": "TopicDeletion", "level": "ERROR",
         "message": "Giving up updating leader/ISR of t-1"}]


def test_the_ring_is_bounded_and_keeps_the_newest() -> None:
    service = ControllerService(1, zk=None)
    service.core = ScriptedCore(service, [Log(logging.INFO, f"line {i}")
                                          for i in range(STATE_CHANGE_HISTORY + 50)])
    asyncio.run(service._process(TopicDeletion(frozenset({"t"}))))
    kept = [c.message for c in service.state_changes]
    assert len(kept) == STATE_CHANGE_HISTORY
    assert kept[0] == "line 50" and kept[-1] == f"line {STATE_CHANGE_HISTORY + 49}"


def test_event_queue_size_counts_waiting_events() -> None:
    service = ControllerService(1, zk=None)
    assert service.event_queue_size == 0
    service._queue.put_nowait(object())
    service._queue.put_nowait(object())
    assert service.event_queue_size == 2

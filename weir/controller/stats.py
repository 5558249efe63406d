"""Where the controller's time goes: Kafka's controller timers, and one event's breakdown.

Kafka's ZooKeeper-mode controller exposes, per broker:

* ``kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs`` — how long each
  event waited in the queue;
* ``...,name=EventQueueProcessingTimeMs`` — how long each event took once dequeued;
* ``kafka.controller:type=ControllerStats,name=<state>RateAndTimeMs`` — the processing time
  per ``ControllerState`` (``BrokerChange`` is ``LeaderElectionRateAndTimeMs``,
  ``AlterPartitionReassignment`` ``PartitionReassignmentRateAndTimeMs``, the others
  ``<ControllerState>RateAndTimeMs``).

:class:`ControllerStats` keeps them as plain bucket counts (:class:`TimerHistogram`); the
broker's ``/metrics`` renders them as Prometheus histograms (``weir.server.metrics``).
:class:`EventTiming` splits one event's processing into queue wait, the core's compute
(state machines and request building), ZooKeeper (time, operations, znodes written) and
handing the requests to the channels; :meth:`EventTiming.summary` is the INFO line the shell
logs for an event slower than :data:`SLOW_EVENT_MS`.  Pure bookkeeping: the shell passes
the times in.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

__all__ = ["BUCKETS_MS", "SLOW_EVENT_MS", "ControllerStats", "EventTiming", "TimerHistogram",
           "controller_state"]

BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
"""Upper bounds of the histogram buckets, in milliseconds (then +Inf)."""

SLOW_EVENT_MS = 100.0
"""An event whose queue wait plus processing reaches this is logged with its breakdown."""

# Kafka's ControllerState for each event type (kafka.controller.ControllerState); the
# names double as the ``<state>RateAndTimeMs`` metric names but for the two Kafka renamed.
_STATES = {
    "Startup": "ControllerChange",
    "ControllerResigned": "ControllerChange",
    "BrokerChange": "BrokerChange",
    "TopicChange": "TopicChange",
    "PartitionModifications": "TopicChange",
    "TopicDeletion": "TopicDeletion",
    "StopReplicaResult": "TopicDeletion",
    "AlterReassignments": "AlterPartitionReassignment",
    "ZkReassignmentChange": "AlterPartitionReassignment",
    "AutoLeaderRebalance": "AutoLeaderBalance",
    "ElectLeaders": "ManualLeaderBalance",
    "PreferredReplicaElection": "ManualLeaderBalance",
    "ControlledShutdown": "ControlledShutdown",
    "AlterPartition": "IsrChange",
    "IsrChange": "IsrChange",
    "LeaderAndIsrResult": "LeaderAndIsrResponseReceived",
    "LogDirEventNotification": "LogDirChange",
    "UncleanLeaderElectionEnable": "UncleanLeaderElectionEnable",
    "TopicConfigChange": "TopicUncleanLeaderElectionEnable",
    "ListReassignments": "ListPartitionReassignment",
}
_METRIC_NAMES = {
    "BrokerChange": "LeaderElectionRateAndTimeMs",
    "AlterPartitionReassignment": "PartitionReassignmentRateAndTimeMs",
}


def controller_state(event_type: str) -> str:
    """Kafka's ControllerState name for an event type name (unknown ones: the type name)."""
    return _STATES.get(event_type, event_type)


def rate_and_time_metric(state: str) -> str:
    """Kafka's ControllerStats metric name of a ControllerState."""
    return _METRIC_NAMES.get(state, f"{state}RateAndTimeMs")


@dataclass
class TimerHistogram:
    """Observations in milliseconds: per-bucket counts (cumulative on export), sum, count."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_MS) + 1))
    sum_ms: float = 0.0
    count: int = 0

    def observe(self, ms: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS_MS, ms)] += 1
        self.sum_ms += ms
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, cumulative count)`` pairs, ``+Inf`` last (Prometheus' histogram buckets)."""
        out, total = [], 0
        for bound, n in zip((*map(str, BUCKETS_MS), "+Inf"), self.counts, strict=True):
            total += n
            out.append((bound, total))
        return out


@dataclass
class ControllerStats:
    """Kafka's controller timers on this broker (kept across elections, as Kafka's)."""

    event_queue_time: TimerHistogram = field(default_factory=TimerHistogram)
    event_queue_processing_time: TimerHistogram = field(default_factory=TimerHistogram)
    rate_and_time: dict[str, TimerHistogram] = field(default_factory=dict)
    """Per ``<state>RateAndTimeMs`` metric name."""

    def record(self, timing: EventTiming) -> None:
        self.event_queue_time.observe(timing.queue_ms)
        self.event_queue_processing_time.observe(timing.processing_ms)
        name = rate_and_time_metric(controller_state(timing.event))
        self.rate_and_time.setdefault(name, TimerHistogram()).observe(timing.processing_ms)


@dataclass
class EventTiming:
    """One event's processing, split by where the time went (milliseconds)."""

    event: str
    queue_ms: float = 0.0
    started: float = 0.0
    """When it was dequeued (the shell's clock, seconds)."""
    processing_ms: float = 0.0
    core_ms: float = 0.0
    """In the sans-I/O core: state machines, elections, building the requests."""
    zk_ms: float = 0.0
    zk_ops: int = 0
    zk_znodes: int = 0
    """Partition states (or other znodes) the ZooKeeper operations named."""
    send_ms: float = 0.0
    """Handing request batches to the channels (their encoding happens in the senders), and
    waiting for them to be written where the event pauses for it (``FlushRequests``)."""
    sends: list[tuple[float, int]] = field(default_factory=list)
    """(ms since dequeued, requests) for each batch handed to the channels."""

    def elapsed_ms(self, now: float) -> float:
        """Milliseconds from dequeue to ``now`` (the shell's clock, seconds)."""
        return (now - self.started) * 1000

    def summary(self) -> str:
        sends = ", ".join(f"{n} at +{at:.0f} ms" for at, n in self.sends) or "none"
        other = max(0.0, self.processing_ms - self.core_ms - self.zk_ms - self.send_ms)
        return (f"{self.event} took {self.processing_ms:.0f} ms after {self.queue_ms:.0f} ms "
                f"queued: core {self.core_ms:.0f} ms, ZooKeeper {self.zk_ms:.0f} ms "
                f"({self.zk_ops} ops, {self.zk_znodes} znodes), send {self.send_ms:.0f} ms, "
                f"other {other:.0f} ms; request batches {sends}")

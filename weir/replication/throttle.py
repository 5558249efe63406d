"""Replication throttling (Kafka's ReplicationQuotaManager, KIP-73), sans-I/O.

Two broker configs bound the replication traffic of *throttled* replicas, in bytes/s:
``leader.replication.throttled.rate`` (what this broker serves to followers) and
``follower.replication.throttled.rate`` (what its fetchers ask for).  Which replicas are
throttled is per topic: ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` hold ``partition:broker`` pairs (or ``*``); a
pair applies on the broker it names.  As in Kafka, only replicas *out of* the ISR are ever
throttled (a move's new replicas), so in-sync followers — and acks=all producers — never
wait on the quota.

The rate is measured over a sliding window of ``samples`` windows of ``window_ms``; when
it is above the bound, throttled partitions get no data (leader side) or are left out of
the next fetch (follower side) until it falls again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from weir.common import TopicPartition

__all__ = [
    "FOLLOWER_REPLICAS",
    "LEADER_REPLICAS",
    "RateQuota",
    "ReplicationThrottles",
    "ThrottledReplicas",
    "parse_throttled_replicas",
]

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
UNLIMITED = float("inf")
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """A parsed ``*.replication.throttled.replicas`` value."""

    everything: bool = False
    pairs: frozenset[tuple[int, int]] = frozenset()

    def covers(self, partition: int, broker_id: int) -> bool:
        return self.everything or (partition, broker_id) in self.pairs


def parse_throttled_replicas(value: str | Iterable[str] | None) -> ThrottledReplicas:
    """``"*"``, ``"0:1,1:2"`` or a list of such items; malformed items are ignored."""
    if value is None:
        return ThrottledReplicas()
    items = value.split(",") if isinstance(value, str) else list(value)
    items = [str(i).strip() for i in items if str(i).strip()]
    if "*" in items:
        return ThrottledReplicas(everything=True)
    pairs = set()
    for item in items:
        partition, sep, broker = item.partition(":")
        if sep and partition.strip().isdigit() and broker.strip().isdigit():
            pairs.add((int(partition), int(broker)))
    return ThrottledReplicas(pairs=frozenset(pairs))


class RateQuota:
    """Bytes/s over a sliding window; ``rate`` infinite (or Kafka's Long.MAX) = unbounded."""

    def __init__(self, rate: float = UNLIMITED, window_ms: int = 1000, samples: int = 2) -> None:
        self.window_ms = window_ms
        self.samples = samples
        self._samples: deque[list[int]] = deque()  # [window start ms, bytes]
        self.rate = UNLIMITED
        self.set_rate(rate)

    def set_rate(self, rate: float | None) -> None:
        self.rate = UNLIMITED if rate is None or rate < 0 or rate >= _LONG_MAX else float(rate)

    @property
    def bounded(self) -> bool:
        return self.rate != UNLIMITED

    def _expire(self, now_ms: int) -> None:
        horizon = now_ms - self.window_ms * self.samples
        while self._samples and self._samples[0][0] <= horizon:
            self._samples.popleft()

    def record(self, size: int, now_ms: int) -> None:
        """Account ``size`` bytes sent or received at ``now_ms``."""
        if size <= 0 or not self.bounded:
            return
        start = now_ms - now_ms % self.window_ms
        if self._samples and self._samples[-1][0] == start:
            self._samples[-1][1] += size
        else:
            self._samples.append([start, size])
        self._expire(now_ms)

    def measured(self, now_ms: int) -> float:
        """Bytes/s over the retained samples (the elapsed time is at least one window)."""
        self._expire(now_ms)
        if not self._samples:
            return 0.0
        elapsed = max(now_ms - self._samples[0][0], self.window_ms)
        return sum(b for _, b in self._samples) * 1000 / elapsed

    def exceeded(self, now_ms: int) -> bool:
        return self.bounded and self.measured(now_ms) > self.rate


TopicConfigs = Callable[[str], Mapping[str, Any]]


class ReplicationThrottles:
    """This broker's two quotas and the topic configs that say which replicas they cover."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.leader = RateQuota()
        self.follower = RateQuota()
        self._topic_config: TopicConfigs | None = None
        self._parsed: dict[tuple[str, str], tuple[Any, ThrottledReplicas]] = {}

    def configure(self, leader_rate: float | None, follower_rate: float | None,
                  topic_config: TopicConfigs | None = None) -> None:
        """Set the rates (bytes/s; None or Long.MAX: unbounded) and the topic config source."""
        self.leader.set_rate(leader_rate)
        self.follower.set_rate(follower_rate)
        if topic_config is not None:
            self._topic_config = topic_config

    def _covers(self, key: str, tp: TopicPartition) -> bool:
        if self._topic_config is None:
            return False
        try:
            raw = self._topic_config(tp.topic).get(key)
        except Exception:  # noqa: BLE001 - an unknown topic is simply not throttled
            return False
        cached = self._parsed.get((tp.topic, key))
        if cached is None or cached[0] is not raw:
            cached = (raw, parse_throttled_replicas(raw))
            self._parsed[(tp.topic, key)] = cached
        return cached[1].covers(tp.partition, self.broker_id)

    def leader_throttled(self, tp: TopicPartition, follower_in_sync: bool, now_ms: int) -> bool:
        """Serve no data now to this out-of-sync follower (leader quota exceeded)?"""
        return (self.leader.bounded and not follower_in_sync
                and self._covers(LEADER_REPLICAS, tp) and self.leader.exceeded(now_ms))

    def follower_throttled(self, tp: TopicPartition, in_sync: bool, now_ms: int) -> bool:
        """Leave this partition out of the next fetch (follower quota exceeded)?"""
        return (self.follower.bounded and not in_sync
                and self._covers(FOLLOWER_REPLICAS, tp) and self.follower.exceeded(now_ms))

    def record_leader(self, tp: TopicPartition, follower_in_sync: bool, size: int,
                      now_ms: int) -> None:
        if self.leader.bounded and not follower_in_sync and self._covers(LEADER_REPLICAS, tp):
            self.leader.record(size, now_ms)

    def record_follower(self, tp: TopicPartition, in_sync: bool, size: int, now_ms: int) -> None:
        if self.follower.bounded and not in_sync and self._covers(FOLLOWER_REPLICAS, tp):
            self.follower.record(size, now_ms)

"""Fetch from follower (KIP-392): which replica a consumer should read from (pure).

With ``replica.selector.class`` set to Kafka's ``RackAwareReplicaSelector``, a consumer that
sends its ``client.rack`` is pointed at a replica in its rack (the leader when the leader is
in that rack, or when no candidate is).  The candidates are the leader's view of its in-sync
followers that hold the fetch offset (Kafka's ``ReplicaManager.findPreferredReadReplica``):
their log covers it, so the consumer is never sent to a replica without the data.  Among
them the most caught-up wins (``ReplicaView.comparator``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    broker_id: int
    log_end_offset: int
    time_since_caught_up_ms: int


def rack_aware_enabled(selector_class: str | None) -> bool:
    return bool(selector_class) and selector_class.rsplit(".", 1)[-1] == "RackAwareReplicaSelector"


def preferred_read_replica(leader: ReplicaView, candidates: Collection[ReplicaView],
                           racks: Mapping[int, str | None], client_rack: str | None) -> int:
    """The replica to read from: -1 means "the leader" (no preference)."""
    if not client_rack or racks.get(leader.broker_id) == client_rack:
        return -1
    same_rack = [c for c in candidates
                 if c.broker_id != leader.broker_id and racks.get(c.broker_id) == client_rack]
    if not same_rack:
        return -1
    best = max(same_rack, key=lambda v: (v.log_end_offset, -v.time_since_caught_up_ms,
                                         v.broker_id))
    return best.broker_id

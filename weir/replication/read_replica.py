"""Fetch from follower (KIP-392): which replica a consumer should read from (pure).

With ``replica.selector.class`` set to Kafka's ``RackAwareReplicaSelector``, a consumer that
sends its ``client.rack`` is pointed at an in-sync replica in its rack (the leader when the
leader is in that rack); otherwise consumers read from the leader.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def rack_aware_enabled(selector_class: str | None) -> bool:
    return bool(selector_class) and selector_class.rsplit(".", 1)[-1] == "RackAwareReplicaSelector"


def preferred_read_replica(leader: int, replicas: Collection[int], isr: Collection[int],
                           racks: Mapping[int, str | None], client_rack: str | None) -> int:
    """The replica to read from: -1 means "the leader" (no preference)."""
    if not client_rack:
        return -1
    if racks.get(leader) == client_rack:
        return -1
    for replica in replicas:  # assignment order, as Kafka
        if replica in isr and racks.get(replica) == client_rack:
            return replica
    return -1

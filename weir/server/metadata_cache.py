"""Every broker's view of the cluster, kept current by the controller's UpdateMetadata.

Metadata requests from clients are answered from here.  A partition state whose leader is
-2 (Kafka's ``LeaderDuringDelete``) removes the partition: that is how the controller tells
brokers that a topic was deleted.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition

LEADER_DURING_DELETE = -2


@dataclass(frozen=True, slots=True)
class BrokerMeta:
    """A live broker; ``host``/``port`` are its inter-broker listener's endpoint and
    ``endpoints`` (listener, host, port) all of its listeners, from UpdateMetadata."""

    id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def on(self, listener: str) -> BrokerMeta | None:
        """This broker as a client connected on ``listener`` must see it (Kafka answers
        with the endpoint of the listener the request came in on); None: it has none."""
        if not self.endpoints:
            return self
        for name, host, port in self.endpoints:
            if name == listener:
                return BrokerMeta(self.id, host, port, self.rack, self.endpoints)
        return None


@dataclass(frozen=True, slots=True)
class PartitionMeta:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    partition_epoch: int = 0


@dataclass
class MetadataCache:
    controller_id: int = -1
    controller_epoch: int = -1
    brokers: dict[int, BrokerMeta] = field(default_factory=dict)
    topics: dict[str, dict[int, PartitionMeta]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    # The same, by id: Fetch v13+ names topics by id, in every request of every consumer
    # and follower (Kafka's MetadataCache keeps both directions too).
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)
    # Memo of the Metadata handler: (topic, response class) → that topic's partition
    # entities, valid until the next update (a 10,000-partition Metadata is otherwise
    # rebuilt from scratch for every client poll).
    described: dict[tuple[str, type], tuple[Any, ...]] = field(default_factory=dict)
    # Memo of whole encoded Metadata response bodies (see the Metadata handler), also
    # valid until the next update: a 10,000-partition answer costs ~0.1 s to encode, and
    # every client and the admin tools poll it.
    encoded: dict[tuple[Any, ...], bytes] = field(default_factory=dict)
    # Each partition entity of a Metadata answer, encoded, by (entity class, whether it
    # depends on the replicas' liveness: v0's REPLICA_NOT_AVAILABLE), topic and partition
    # (weir.server.metadata_encoding).  Unlike the two memos above it outlives an update:
    # only the partitions the update names, and those whose leader (or, for v0, a
    # replica) is among the brokers that came or went, are dropped (Kafka's MetadataCache
    # changes only the updated partitions' states too).
    partition_bytes: dict[tuple[type, bool], dict[str, dict[int, bytes]]] = field(
        default_factory=dict)

    def update(self, controller_id: int, controller_epoch: int, brokers: list[BrokerMeta],
               partitions: list[tuple[str, uuid.UUID | None, int, PartitionMeta]]) -> set[str]:
        """Apply one UpdateMetadata; returns the topics that were deleted by it."""
        self.described.clear()
        self.encoded.clear()
        self.controller_id = controller_id
        self.controller_epoch = controller_epoch
        came_or_went = set(self.brokers).symmetric_difference(b.id for b in brokers)
        self.brokers = {b.id: b for b in brokers}
        deleted: set[str] = set()
        if self.partition_bytes:
            self._forget_encoded(partitions, came_or_went)
        for topic, topic_id, index, meta in partitions:
            if meta.leader == LEADER_DURING_DELETE:
                parts = self.topics.get(topic)
                if parts is not None:
                    parts.pop(index, None)
                    if not parts:
                        del self.topics[topic]
                        gone = self.topic_ids.pop(topic, None)
                        if gone is not None and self.topic_names.get(gone) == topic:
                            del self.topic_names[gone]
                        deleted.add(topic)
                continue
            self.topics.setdefault(topic, {})[index] = meta
            if topic_id is not None and topic_id.int != 0:
                old = self.topic_ids.get(topic)
                if old != topic_id:
                    if old is not None and self.topic_names.get(old) == topic:
                        del self.topic_names[old]
                    self.topic_ids[topic] = topic_id
                    self.topic_names[topic_id] = topic
        return deleted

    def _forget_encoded(self, partitions: list[tuple[str, uuid.UUID | None, int, PartitionMeta]],
                        came_or_went: set[int]) -> None:
        """Drop the kept encodings an update makes stale (see ``partition_bytes``): the
        partitions it names, and with a change of live brokers every partition whose
        leader (or, where it matters, a replica) is one of them (its error code may
        change)."""
        for (_cls, by_replicas), by_topic in self.partition_bytes.items():
            for topic, _tid, index, _meta in partitions:
                kept = by_topic.get(topic)
                if kept is not None:
                    kept.pop(index, None)
            if came_or_went:
                for topic, kept in by_topic.items():
                    parts = self.topics.get(topic, {})
                    for index in [i for i in kept if (p := parts.get(i)) is None
                                  or p.leader in came_or_went
                                  or (by_replicas and not came_or_went.isdisjoint(p.replicas))]:
                        del kept[index]

    def brokers_on(self, listener: str) -> list[BrokerMeta]:
        """The live brokers with an endpoint on ``listener``, by id, at that endpoint."""
        found = (b.on(listener) for _, b in sorted(self.brokers.items()))
        return [b for b in found if b is not None]

    def broker_on(self, broker_id: int, listener: str) -> BrokerMeta | None:
        b = self.brokers.get(broker_id)
        return None if b is None else b.on(listener)

    def partition(self, tp: TopicPartition) -> PartitionMeta | None:
        return self.topics.get(tp.topic, {}).get(tp.partition)

    def has_topic(self, topic: str) -> bool:
        return topic in self.topics

    def topic_by_id(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_names.get(topic_id)

    def alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def partitions_ready(self, topic: str, count: int | None = None) -> bool:
        """True when the topic has ``count`` partitions (or any) and each one has a leader."""
        parts = self.topics.get(topic)
        if not parts or (count is not None and len(parts) < count):
            return False
        return all(p.leader >= 0 for p in parts.values())

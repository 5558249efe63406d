"""The controller's in-memory view of the cluster (Kafka's ``ControllerContext``).

Plain mutable data, owned by the core and changed only while it handles one event:
live brokers with their epochs, topic ids and replica assignments, each partition's
leader/ISR as last written to ZooKeeper, the two state machines' states, and the topic
deletion bookkeeping.  No I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from weir.common import TopicPartition
from weir.controller.states import PartitionReplica, PartitionState, ReplicaState
from weir.coordination.codecs import BrokerInfo, LeaderIsr

__all__ = ["LEADER_DURING_DELETE", "NO_LEADER", "ControllerContext", "ReplicaAssignment"]

NO_LEADER = -1
"""Leader id of a partition whose leader died and has no successor yet."""
LEADER_DURING_DELETE = -2
"""Leader id that UpdateMetadata carries for a partition of a topic being deleted."""


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's full replica set with the moves in progress (KIP-455).

    ``replicas`` is RS (origin plus target while a reassignment runs), ``adding`` the
    target replicas not in the origin, ``removing`` the origin replicas not in the target.
    """

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        """The replicas before the reassignment (ORS)."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas after the reassignment (TRS)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving from this one's origin to ``target`` (target first)."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


@dataclass
class ControllerContext:
    """Everything the active controller knows. See the module docstring."""

    controller_epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    assignments: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionReplica, ReplicaState] = field(default_factory=dict)
    topic_configs: dict[str, Mapping[str, str]] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    brokers_sent_full_leader_and_isr: set[int] = field(default_factory=set)
    reassignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    """Partitions being reassigned, with their full assignment (RS = ``replicas(tp)``)."""
    zk_reassignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    """What ``/admin/reassign_partitions`` holds, as this controller last read or wrote it."""
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    """Per live broker, the partitions it answered LeaderAndIsr with KAFKA_STORAGE_ERROR
    for (Kafka's ``replicasOnOfflineDirs``): their log directory failed."""

    # -- brokers ---------------------------------------------------------------------------

    @property
    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(self.live_brokers)

    def is_replica_online(self, broker_id: int, tp: TopicPartition | None = None) -> bool:
        """Whether ``broker_id`` is alive (shutting-down brokers still count) and, with
        ``tp``, its replica of ``tp`` is not on a failed log directory."""
        if broker_id not in self.live_brokers:
            return False
        if tp is None:
            return True
        offline = self.replicas_on_offline_dirs.get(broker_id)
        return not offline or tp not in offline

    def eligible_leaders(self, tp: TopicPartition) -> frozenset[int]:
        """Brokers that may lead ``tp``: alive, not shutting down, its replica's log
        directory not failed (Kafka's ``isReplicaOnline(replica, partition)``)."""
        eligible = self.live_broker_ids - self.shutting_down
        offline = [b for b, tps in self.replicas_on_offline_dirs.items() if tp in tps]
        return eligible.difference(offline) if offline else eligible

    def broker_epoch(self, broker_id: int) -> int:
        info = self.live_brokers.get(broker_id)
        return info.epoch if info is not None else -1

    # -- topics and assignments ------------------------------------------------------------

    def add_topic(self, name: str, topic_id: uuid.UUID,
                  partitions: Mapping[int, Sequence[int]]) -> None:
        """Record a topic's id and (all or additional) partition assignments."""
        self.topic_ids[name] = topic_id
        current = self.assignments.setdefault(name, {})
        for index, replicas in partitions.items():
            current[index] = tuple(replicas)

    def remove_topic(self, name: str) -> None:
        """Forget a topic and every partition/replica state that belongs to it."""
        for index, replicas in self.assignments.pop(name, {}).items():
            tp = TopicPartition(name, index)
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            for replica in replicas:
                self.replica_states.pop(PartitionReplica(tp, replica), None)
            self.reassignments.pop(tp, None)
        self.topic_ids.pop(name, None)
        self.topic_configs.pop(name, None)
        self.topics_to_delete.discard(name)
        self.topics_ineligible_for_deletion.discard(name)
        self.topics_with_deletion_started.discard(name)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """The assigned replicas of ``tp`` in assignment order (empty if unknown)."""
        parts = self.assignments.get(tp.topic)
        return () if parts is None else parts.get(tp.partition, ())

    def full_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """``tp``'s replicas with the reassignment in progress, if any."""
        return self.reassignments.get(tp) or ReplicaAssignment(self.replicas(tp))

    def set_replicas(self, tp: TopicPartition, replicas: Sequence[int]) -> None:
        self.assignments.setdefault(tp.topic, {})[tp.partition] = tuple(replicas)

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.assignments.get(topic, {}))]

    def all_partitions(self) -> Iterator[TopicPartition]:
        for topic, parts in self.assignments.items():
            for index in parts:
                yield TopicPartition(topic, index)

    def all_replicas(self) -> Iterator[PartitionReplica]:
        for topic, parts in self.assignments.items():
            for index, replicas in parts.items():
                tp = TopicPartition(topic, index)
                for replica in replicas:
                    yield PartitionReplica(tp, replica)

    def live_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return tuple(r for r in self.replicas(tp) if r in self.live_brokers)

    def online_replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        """Assigned replicas that may lead or join the ISR of a new partition (Kafka's
        initializeLeaderAndIsrForPartitions): see :meth:`eligible_leaders`."""
        eligible = self.eligible_leaders(tp)
        return tuple(r for r in self.replicas(tp) if r in eligible)

    def replicas_on_brokers(self, brokers: Iterable[int]) -> list[PartitionReplica]:
        """Replicas hosted by ``brokers``, in :meth:`all_replicas` order."""
        wanted = set(brokers)
        found = []
        for topic, parts in self.assignments.items():
            for index, replicas in parts.items():
                if wanted.isdisjoint(replicas):
                    continue
                tp = TopicPartition(topic, index)
                for r in replicas:
                    if r in wanted:
                        found.append(PartitionReplica(tp, r))
        return found

    def replicas_of_topic(self, topic: str) -> list[PartitionReplica]:
        return [
            PartitionReplica(TopicPartition(topic, index), replica)
            for index, replicas in self.assignments.get(topic, {}).items()
            for replica in replicas
        ]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        """Partitions with a replica on ``broker_id``, in :meth:`all_replicas` order."""
        return [TopicPartition(topic, index) for topic, parts in self.assignments.items()
                for index, replicas in parts.items() if broker_id in replicas]

    def unclean_allowed(self, topic: str, broker_default: bool) -> bool:
        """``unclean.leader.election.enable`` of ``topic``: its override or the default."""
        raw = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        if raw is None:
            return broker_default
        return str(raw).strip().lower() == "true"

    # -- states ----------------------------------------------------------------------------

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states.get(tp, PartitionState.NON_EXISTENT)

    def replica_state(self, replica: PartitionReplica) -> ReplicaState:
        return self.replica_states.get(replica, ReplicaState.NON_EXISTENT)

    def partitions_in_states(self, *states: PartitionState) -> list[TopicPartition]:
        wanted = set(states)
        return [tp for tp, st in self.partition_states.items() if st in wanted]

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionReplica]:
        return [r for r in self.replicas_of_topic(topic) if self.replica_state(r) is state]

    def offline_partition_count(self) -> int:
        """Kafka's ``OfflinePartitionsCount`` (topics being deleted excluded)."""
        return sum(
            1 for tp, st in self.partition_states.items()
            if st is PartitionState.OFFLINE and tp.topic not in self.topics_to_delete
        )

    # -- deletion --------------------------------------------------------------------------

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_delete

    def clear(self) -> None:
        """Forget everything (on resignation)."""
        fresh = ControllerContext()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))

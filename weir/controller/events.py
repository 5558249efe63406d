"""Controller events: what happened, as plain values (Kafka's ControllerEvent types).

The shell turns ZooKeeper watches, broker responses and broker RPCs into these and feeds
them, one at a time, to :meth:`ControllerCore.handle <weir.controller.core.ControllerCore.handle>`.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition
from weir.coordination.codecs import BrokerInfo, LeaderIsr, TopicAssignment
from weir.protocol.errors import ErrorCode

__all__ = [
    "AlterPartition",
    "AlterReassignments",
    "AutoLeaderRebalance",
    "BrokerChange",
    "ControlledShutdown",
    "ControllerEvent",
    "ControllerResigned",
    "ElectLeaders",
    "ElectionType",
    "IsrChange",
    "LeaderAndIsrResult",
    "ListReassignments",
    "PartitionModifications",
    "PreferredReplicaElection",
    "Startup",
    "StopReplicaResult",
    "TopicChange",
    "TopicConfigChange",
    "TopicDeletion",
    "UncleanLeaderElectionEnable",
    "ZkReassignmentChange",
]


@dataclass(frozen=True, slots=True)
class Startup:
    """This broker won the election; a snapshot of ZooKeeper read right after winning."""

    controller_epoch: int
    epoch_zk_version: int
    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicAssignment]
    partition_states: Mapping[TopicPartition, LeaderIsr]
    topics_to_delete: frozenset[str] = frozenset()
    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    zk_reassignments: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    """The content of ``/admin/reassign_partitions`` (empty if absent)."""


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """The registered brokers (``/brokers/ids`` children with their data) changed."""

    brokers: Mapping[int, BrokerInfo]


@dataclass(frozen=True, slots=True)
class TopicChange:
    """The children of ``/brokers/topics`` changed: the full set of topic names."""

    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class PartitionModifications:
    """``/brokers/topics/<topic>`` changed (partitions may have been added)."""

    topic: str


@dataclass(frozen=True, slots=True)
class TopicConfigChange:
    """Topic config overrides changed (a ``/config/changes`` notification): the current
    overrides of each topic named by the new notifications."""

    configs: Mapping[str, Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class UncleanLeaderElectionEnable:
    """The broker default of ``unclean.leader.election.enable`` changed (a dynamic broker
    config, Kafka's UncleanLeaderElectionEnable event): the new value.  Handled even while
    inactive, so that a later failover starts with it."""

    enabled: bool


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """The children of ``/admin/delete_topics``: topics whose deletion was requested."""

    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class ControllerResigned:
    """This broker is no longer the controller (lost ``/controller`` or was fenced)."""


@dataclass(frozen=True, slots=True)
class StopReplicaResult:
    """A StopReplica answer (a request-level error is repeated for each partition).

    ``errors`` maps each partition of the request to its error code (``none`` on success).
    """

    broker_id: int
    errors: Mapping[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResult:
    """A LeaderAndIsr answer: per-partition error codes."""

    broker_id: int
    errors: Mapping[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True)
class ControlledShutdown:
    """A broker asked to shut down in a controlled way (Kafka's ControlledShutdown RPC).

    Replied with ``list[TopicPartition]`` (the partitions it still leads) or an
    :class:`~weir.protocol.errors.ErrorCode` (``stale_broker_epoch``, ...).
    """

    broker_id: int
    broker_epoch: int
    reply_to: Any = None


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One partition of an AlterPartition request (KIP-497).

    ``isr_broker_epochs`` holds the broker epoch of each ``new_isr`` member (v3), or is
    ``None`` (v2: no epoch check); an epoch of -1 is not checked either.
    """

    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    isr_broker_epochs: tuple[int, ...] | None = None
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True)
class AlterPartition:
    """A partition leader asks to change ISRs: ``topics`` maps topic id → partition → change.

    Replied with ``dict[UUID, dict[int, LeaderIsr | ErrorCode]]`` (the state now in
    ZooKeeper, or the partition's error; same keys as the request), or a request-level
    :class:`~weir.protocol.errors.ErrorCode`.
    """

    broker_id: int
    broker_epoch: int
    topics: Mapping[uuid.UUID, Mapping[int, IsrChange]]
    reply_to: Any = None


class ElectionType(enum.IntEnum):
    """ElectLeaders' ``election_type``."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectLeaders:
    """ElectLeaders RPC (``partitions`` None: every partition).

    Replied with ``dict[TopicPartition, tuple[ErrorCode, str | None]]``.
    """

    election_type: ElectionType
    partitions: frozenset[TopicPartition] | None
    reply_to: Any = None


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """``/admin/preferred_replica_election`` holds these partitions (deleted when done)."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class AutoLeaderRebalance:
    """The periodic ``leader.imbalance.check.interval.seconds`` tick."""


@dataclass(frozen=True, slots=True)
class AlterReassignments:
    """AlterPartitionReassignments (KIP-455): target replicas per partition, None cancels.

    Replied with ``dict[TopicPartition, tuple[ErrorCode, str | None]]``.
    """

    targets: Mapping[TopicPartition, tuple[int, ...] | None]
    reply_to: Any = None


@dataclass(frozen=True, slots=True)
class ListReassignments:
    """ListPartitionReassignments (``partitions`` None: all).

    Replied with ``dict[TopicPartition, ReplicaAssignment]`` (only moving partitions).
    """

    partitions: frozenset[TopicPartition] | None
    reply_to: Any = None


@dataclass(frozen=True, slots=True)
class ZkReassignmentChange:
    """``/admin/reassign_partitions`` was created or changed: its content."""

    partitions: Mapping[TopicPartition, tuple[int, ...]]


ControllerEvent = (
    Startup | BrokerChange | TopicChange | PartitionModifications | TopicDeletion
    | ControllerResigned | StopReplicaResult | LeaderAndIsrResult | ControlledShutdown
    | AlterPartition | ElectLeaders | PreferredReplicaElection | AutoLeaderRebalance
    | AlterReassignments | ListReassignments | ZkReassignmentChange | TopicConfigChange
    | UncleanLeaderElectionEnable
)

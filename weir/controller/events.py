"""Controller events: what happened, as plain values (Kafka's ControllerEvent types).

The shell turns ZooKeeper watches, broker responses and broker RPCs into these and feeds
them, one at a time, to :meth:`ControllerCore.handle <weir.controller.core.ControllerCore.handle>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from weir.common import TopicPartition
from weir.coordination.codecs import BrokerInfo, LeaderIsr, TopicAssignment
from weir.protocol.errors import ErrorCode

__all__ = [
    "BrokerChange",
    "ControlledShutdown",
    "ControllerEvent",
    "ControllerResigned",
    "LeaderAndIsrResult",
    "PartitionModifications",
    "Startup",
    "StopReplicaResult",
    "TopicChange",
    "TopicDeletion",
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
    """A broker asked to shut down in a controlled way (not handled yet)."""

    broker_id: int
    broker_epoch: int


ControllerEvent = (
    Startup | BrokerChange | TopicChange | PartitionModifications | TopicDeletion
    | ControllerResigned | StopReplicaResult | LeaderAndIsrResult | ControlledShutdown
)

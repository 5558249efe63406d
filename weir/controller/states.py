"""Closed state sets of the controller's two state machines, transitions as data.

Each target state lists the states it may be entered from (Kafka's ``validPreviousStates``).
A transition that the table does not allow raises :class:`IllegalStateTransition`, which
names the partition (or replica), the current state and the target state.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TypeVar

from weir.common import TopicPartition

__all__ = [
    "VALID_PREVIOUS_PARTITION_STATES",
    "VALID_PREVIOUS_REPLICA_STATES",
    "IllegalStateTransition",
    "PartitionReplica",
    "PartitionState",
    "ReplicaState",
    "check_partition_transition",
    "check_replica_transition",
    "split_by_transition",
]


class PartitionState(enum.Enum):
    """States of a partition, as the controller sees it."""

    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"

    def __str__(self) -> str:
        return self.value


class ReplicaState(enum.Enum):
    """States of one replica (a partition on one broker)."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    def __str__(self) -> str:
        return self.value


P = PartitionState
R = ReplicaState

VALID_PREVIOUS_PARTITION_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}

VALID_PREVIOUS_REPLICA_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}


class PartitionReplica(NamedTuple):
    """One replica: a partition and the broker that hosts it."""

    partition: TopicPartition
    replica: int

    def __str__(self) -> str:
        return f"[{self.partition}, replica {self.replica}]"


class IllegalStateTransition(Exception):
    """A state machine was asked for a transition its table does not allow."""

    def __init__(self, subject: object, current: enum.Enum,
                 target: enum.Enum) -> None:
        kind = "partition" if isinstance(subject, TopicPartition) else "replica"
        super().__init__(
            f"{kind} {subject}: illegal state transition from {current} to {target}"
        )
        self.subject = subject
        self.current = current
        self.target = target


def check_partition_transition(tp: TopicPartition, current: PartitionState,
                               target: PartitionState) -> None:
    """Raise :class:`IllegalStateTransition` unless ``current -> target`` is valid."""
    if current not in VALID_PREVIOUS_PARTITION_STATES[target]:
        raise IllegalStateTransition(tp, current, target)


def check_replica_transition(replica: PartitionReplica, current: ReplicaState,
                             target: ReplicaState) -> None:
    """Raise :class:`IllegalStateTransition` unless ``current -> target`` is valid."""
    if current not in VALID_PREVIOUS_REPLICA_STATES[target]:
        raise IllegalStateTransition(replica, current, target)


_S = TypeVar("_S")
_E = TypeVar("_E", bound=enum.Enum)


def split_by_transition(subjects: Iterable[_S], states: Mapping[_S, _E], absent: _E,
                        target: _E, allowed: frozenset[_E]
                        ) -> tuple[list[_S], list[IllegalStateTransition]]:
    """The subjects (partitions or replicas) whose current state (``absent`` when they have
    none) may move to ``target``, in order, and the refusals of the others (the common step
    of Kafka's two state machines' ``handleStateChanges``)."""
    valid: list[_S] = []
    illegal: list[IllegalStateTransition] = []
    for subject in subjects:
        current = states.get(subject, absent)
        if current in allowed:
            valid.append(subject)
        else:
            illegal.append(IllegalStateTransition(subject, current, target))
    return valid, illegal

"""What the core asks its shell to do.

Plain effects (:class:`Log`, :class:`SendRequests`, :class:`WatchTopics`,
:class:`UnwatchTopics`) are fire-and-forget.  A :class:`ZkOperation` is always the *last*
effect of a step: the shell must execute it and hand its result back with
``ControllerCore.complete(result, now_ms)`` before it feeds the next event.  Each
operation's docstring names the result type the core expects.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition
from weir.controller.context import ReplicaAssignment
from weir.controller.requests import OutboundRequest
from weir.coordination.codecs import LeaderIsr, TopicAssignment

__all__ = [
    "Effect",
    "FlushRequests",
    "Log",
    "Reply",
    "SendRequests",
    "TopicsRead",
    "UnwatchTopics",
    "WatchTopics",
    "ZkCreatePartitionStates",
    "ZkDeletePreferredElection",
    "ZkDeleteTopic",
    "ZkOperation",
    "ZkReadPartitionStates",
    "ZkReadTopics",
    "ZkSetReassignments",
    "ZkUpdatePartitionStates",
    "ZkUpdateTopicAssignments",
]


@dataclass(frozen=True, slots=True)
class Log:
    """A line for the controller / state-change log (``level`` is a :mod:`logging` level)."""

    level: int
    message: str

    @classmethod
    def info(cls, message: str) -> Log:
        return cls(logging.INFO, message)

    @classmethod
    def warning(cls, message: str) -> Log:
        return cls(logging.WARNING, message)

    @classmethod
    def error(cls, message: str) -> Log:
        return cls(logging.ERROR, message)


@dataclass(frozen=True, slots=True)
class SendRequests:
    """Requests to queue on the brokers' channels, in order."""

    requests: tuple[OutboundRequest, ...]


@dataclass(frozen=True, slots=True)
class WatchTopics:
    """Register data watches on ``/brokers/topics/<t>`` (partition modifications)."""

    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class UnwatchTopics:
    """Stop reacting to data changes of these topics' znodes."""

    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to an RPC event: hand ``value`` to whoever waits on ``reply_to``."""

    reply_to: Any
    value: Any


class ZkOperation:
    """Base of the ZooKeeper operations whose result the core waits for."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class FlushRequests(ZkOperation):
    """Not a ZooKeeper operation but a pause of the event, driven the same way: the shell
    hands the requests sent so far (the step's :class:`SendRequests`) to the brokers'
    connections before the core goes on, so that the CPU work of the event's next step
    (the core's and the ZooKeeper client's) does not delay them.  Kafka's controller
    thread hands its batches to the ``RequestSendThread`` of each broker, which send them
    while the controller goes on; on a broker's single event loop the next step would
    run first.  Result: ignored (``None``).
    """


@dataclass(frozen=True, slots=True)
class ZkCreatePartitionStates(ZkOperation):
    """Create ``.../partitions/<p>/state`` znodes, fenced by the controller epoch's version.

    Result: ``dict[TopicPartition, LeaderIsr | Exception]`` (the stored state, with its
    zk version, or the per-partition error).
    """

    states: Mapping[TopicPartition, LeaderIsr]
    epoch_zk_version: int


@dataclass(frozen=True, slots=True)
class ZkUpdatePartitionStates(ZkOperation):
    """Conditionally update state znodes (each state carries the *expected* zk version).

    ``pipelined``: the writes the core yields next, in this order, whatever this one's
    result (other partitions, states computed already): a shell may send them now, each
    fenced on its own, and answer those operations when they come with the results it got
    (Kafka's controller sends a state machine's whole batch of ``setData`` requests
    asynchronously, ``KafkaZkClient.retryRequestsUntilConnected``).  A shell that ignores
    it runs them one after the other.  Result: ``dict[TopicPartition, LeaderIsr |
    Exception]``.
    """

    states: Mapping[TopicPartition, LeaderIsr]
    epoch_zk_version: int
    pipelined: tuple[Mapping[TopicPartition, LeaderIsr], ...] = ()


@dataclass(frozen=True, slots=True)
class ZkReadPartitionStates(ZkOperation):
    """Read state znodes. Result: ``dict[TopicPartition, LeaderIsr]`` (missing ones absent)."""

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TopicsRead:
    """Result of :class:`ZkReadTopics`."""

    assignments: Mapping[str, TopicAssignment]
    configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ZkReadTopics(ZkOperation):
    """Read ``/brokers/topics/<t>`` and ``/config/topics/<t>``. Result: :class:`TopicsRead`."""

    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class ZkDeleteTopic(ZkOperation):
    """Remove a deleted topic's znodes and its ``/admin/delete_topics`` marker.

    Result: ignored (``None``).
    """

    topic: str
    epoch_zk_version: int


@dataclass(frozen=True, slots=True)
class ZkDeletePreferredElection(ZkOperation):
    """Delete ``/admin/preferred_replica_election``, fenced. Result: ignored."""

    epoch_zk_version: int


@dataclass(frozen=True, slots=True)
class ZkUpdateTopicAssignments(ZkOperation):
    """Rewrite some partitions of ``/brokers/topics/<t>`` (replicas, adding, removing).

    Read-modify-write conditional on the znode's version (other partitions and topic ids are
    kept), fenced by the controller epoch's version.  Result: ``dict[str, Exception | None]``
    per topic (``None``: written).
    """

    changes: Mapping[str, Mapping[int, ReplicaAssignment]]
    epoch_zk_version: int


@dataclass(frozen=True, slots=True)
class ZkSetReassignments(ZkOperation):
    """Rewrite ``/admin/reassign_partitions`` (empty: delete it), fenced. Result: ignored."""

    partitions: Mapping[TopicPartition, tuple[int, ...]]
    epoch_zk_version: int


Effect = Log | Reply | SendRequests | WatchTopics | UnwatchTopics | ZkOperation

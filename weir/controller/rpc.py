"""Translation between wire requests and the core's RPC events/replies (no I/O).

AlterPartition v2/v3 requests become :class:`~weir.controller.events.AlterPartition`
events and the core's reply becomes an ``AlterPartitionResponse`` of the request's version;
ElectLeaders' partition lists become sets of :class:`TopicPartition`.
"""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema

from weir.common import TopicPartition
from weir.controller.alter_partition import AlterPartitionResult
from weir.controller.events import AlterPartition, IsrChange
from weir.coordination.codecs import LeaderIsr
from weir.protocol import codec
from weir.protocol.errors import ErrorCode

__all__ = ["alter_partition_event", "alter_partition_response", "elect_leaders_partitions"]

ALTER_PARTITION_KEY = 56


def _isr_change(partition: Any) -> IsrChange:
    with_epochs = getattr(partition, "new_isr_with_epochs", None)
    if with_epochs is not None:  # v3
        isr = tuple(int(b.broker_id) for b in with_epochs)
        epochs: tuple[int, ...] | None = tuple(int(b.broker_epoch) for b in with_epochs)
    else:
        isr, epochs = tuple(int(b) for b in partition.new_isr), None
    return IsrChange(leader_epoch=int(partition.leader_epoch),
                     partition_epoch=int(partition.partition_epoch), new_isr=isr,
                     isr_broker_epochs=epochs,
                     leader_recovery_state=int(partition.leader_recovery_state))


def alter_partition_event(request: Any, reply_to: Any = None) -> AlterPartition:
    """The core event for an ``AlterPartitionRequest`` (v2 or v3)."""
    topics = {
        topic.topic_id: {int(p.partition_index): _isr_change(p) for p in topic.partitions}
        for topic in request.topics
    }
    return AlterPartition(int(request.broker_id), int(request.broker_epoch), topics, reply_to)


def alter_partition_response(version: int, result: AlterPartitionResult) -> Any:
    """An ``AlterPartitionResponse`` at ``version`` from the core's reply."""
    cls = load_response_schema(ALTER_PARTITION_KEY, version)
    if isinstance(result, ErrorCode):
        return codec.build(cls, error_code=result, topics=[])
    topics = []
    for topic_id, parts in result.items():
        entries = []
        for index, outcome in sorted(parts.items()):
            if isinstance(outcome, LeaderIsr):
                entries.append({"partition_index": index, "error_code": ErrorCode.none,
                                "leader_id": outcome.leader,
                                "leader_epoch": outcome.leader_epoch, "isr": outcome.isr,
                                "leader_recovery_state": outcome.leader_recovery_state,
                                "partition_epoch": outcome.zk_version})
            else:
                entries.append({"partition_index": index, "error_code": outcome,
                                "leader_id": -1, "leader_epoch": -1, "partition_epoch": -1})
        topics.append({"topic_id": topic_id, "partitions": entries})
    return codec.build(cls, error_code=ErrorCode.none, topics=topics)


def elect_leaders_partitions(request: Any) -> frozenset[TopicPartition] | None:
    """The partitions an ElectLeaders request names (None: all partitions)."""
    if request.topic_partitions is None:
        return None
    return frozenset(TopicPartition(t.topic, int(p))
                     for t in request.topic_partitions for p in t.partitions)

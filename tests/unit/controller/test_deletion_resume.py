"""Topic deletion halted by the death of a broker whose replicas were already deleted.

When a broker dies, its replicas of a topic being deleted mark the topic ineligible, even
those whose deletion already succeeded (as Kafka does).  When the broker starts again the
topic must become eligible again - Kafka resumes deletion for the topics of *all* the
replicas on the new broker, including the deleted ones - or a replica that still has to be
deleted elsewhere waits for ever.
"""

from __future__ import annotations

from weir.common import TopicPartition
from weir.controller.events import StopReplicaResult, TopicDeletion
from weir.controller.states import PartitionReplica, ReplicaState
from weir.protocol.errors import ErrorCode

from .helpers import brokers, change_brokers, drive, started, stop_replica

T0 = TopicPartition("t", 0)


def _stop_ok(broker_id: int) -> StopReplicaResult:
    return StopReplicaResult(broker_id, {T0: ErrorCode.none})


def test_deleted_replica_on_a_bounced_broker_does_not_halt_deletion_for_ever() -> None:
    core, zk = started(live=(1, 2, 3), topics={"t": {0: [1, 2, 3]}})
    drive(core, zk, TopicDeletion(frozenset({"t"})))
    change_brokers(core, zk, brokers(2, 3))  # 1 dies before it answers: halted
    change_brokers(core, zk, brokers(1, 2, 3))  # 1 is back; 2's and 3's still under way
    assert core.ctx.replica_state(PartitionReplica(T0, 1)) is ReplicaState.ONLINE
    drive(core, zk, _stop_ok(3))
    change_brokers(core, zk, brokers(1, 2))  # 3 (already deleted) dies: halted...
    assert "t" in core.ctx.topics_ineligible_for_deletion
    change_brokers(core, zk, brokers(1, 2, 3))  # ...and comes back: eligible again
    assert "t" not in core.ctx.topics_ineligible_for_deletion

    effects = drive(core, zk, _stop_ok(2))  # the last deletion in flight completes
    assert set(stop_replica(effects)) == {1}  # so replica 1's deletion starts
    drive(core, zk, _stop_ok(1))
    assert zk.deleted == ["t"]

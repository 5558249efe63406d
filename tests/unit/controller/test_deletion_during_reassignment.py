"""A topic deleted while one of its partitions is being reassigned (Kafka's controller
deletes it: processTopicDeletion halts only topics already queued).  Its entry in
``/admin/reassign_partitions`` must go with it, or it moves the partition of a topic
re-created under the same name (found by the group simulation: the re-created topic's
replicas ended with different logs)."""

from __future__ import annotations

from weir.controller.events import StopReplicaResult, TopicDeletion, ZkReassignmentChange
from weir.protocol.errors import ErrorCode

from .helpers import drive, partition_states, stop_replica
from .test_reassignment import T0, T1, alter, isr_join, setup


def _stopped_everywhere(core, zk, effects) -> None:
    """Every broker sent a StopReplica with delete answers that it deleted them."""
    for broker, request in stop_replica(effects).items():
        deleted = [tp for tp, s in partition_states(request).items() if s.delete_partition]
        drive(core, zk, StopReplicaResult(broker, {tp: ErrorCode.none for tp in deleted}))


def test_a_deleted_topic_takes_its_admin_reassignment_entries_with_it() -> None:
    core, zk = setup()
    zk.znode = {T0: (2, 3, 4)}
    drive(core, zk, ZkReassignmentChange(dict(zk.znode)))
    assert T0 in core.ctx.reassignments
    effects = drive(core, zk, TopicDeletion(frozenset({"t"})))
    _stopped_everywhere(core, zk, effects)
    assert zk.deleted == ["t"]
    assert zk.znode is None  # no entry left for a topic re-created under "t"
    assert not core.ctx.zk_reassignments and not core.ctx.reassignments


def test_an_api_move_of_a_deleted_topic_ends_with_it() -> None:
    core, zk = setup()
    alter(core, zk, {T0: (2, 3, 4), T1: (2, 3, 4)})
    effects = drive(core, zk, TopicDeletion(frozenset({"t"})))
    _stopped_everywhere(core, zk, effects)
    assert zk.deleted == ["t"] and not core.reassignment.list(None)


def test_a_move_caught_up_during_the_deletion_is_not_completed() -> None:
    # The leader still reports ISR changes while the deletion waits for StopReplica
    # answers; completing the move then would turn replicas in ReplicaDeletionStarted
    # into NonExistent (and move others back online) and stall the deletion for good
    # (found by the group simulation, seed 2, after a controller failover resumed the move).
    core, zk = setup()
    alter(core, zk, {T0: (2, 3, 4)})
    effects = drive(core, zk, TopicDeletion(frozenset({"t"})))
    isr_join(core, zk, T0, [1, 2, 3, 4])
    assert core.ctx.full_assignment(T0).is_being_reassigned  # not completed
    _stopped_everywhere(core, zk, effects)
    assert zk.deleted == ["t"] and not core.reassignment.list(None)

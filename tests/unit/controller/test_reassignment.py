"""Partition reassignment in the controller core (KIP-455 and /admin/reassign_partitions)."""

from __future__ import annotations

from typing import Any

from weir.common import TopicPartition
from weir.controller.context import ReplicaAssignment
from weir.controller.effects import (
    Reply,
    ZkSetReassignments,
    ZkUpdatePartitionStates,
    ZkUpdateTopicAssignments,
)
from weir.controller.events import (
    AlterPartition,
    AlterReassignments,
    IsrChange,
    ListReassignments,
    ZkReassignmentChange,
)
from weir.controller.reassignment import merge_topic_assignment
from weir.controller.states import PartitionReplica, ReplicaState
from weir.coordination.codecs import TopicAssignment
from weir.protocol.errors import ErrorCode

from .helpers import (
    FakeZk,
    brokers,
    change_brokers,
    drive,
    leader_and_isr,
    new_core,
    partition_states,
    stop_replica,
    update_metadata,
    zk_ops,
)

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
E = ErrorCode


class ReassigningZk(FakeZk):
    """FakeZk that also runs the reassignment operations."""

    def __init__(self) -> None:
        super().__init__()
        self.znode: dict[TopicPartition, tuple[int, ...]] | None = None

    def execute(self, op: Any) -> Any:
        if isinstance(op, ZkUpdateTopicAssignments):
            self.ops.append(op)
            out: dict[str, Any] = {}
            for topic, changes in op.changes.items():
                current = self.topics.get(topic)
                if current is None:
                    out[topic] = KeyError(topic)
                    continue
                self.topics[topic] = merge_topic_assignment(current, changes)
                out[topic] = None
            return out
        if isinstance(op, ZkSetReassignments):
            self.ops.append(op)
            self.znode = dict(op.partitions) or None
            return None
        return super().execute(op)


def setup(live=(1, 2, 3, 4), parts=None) -> tuple[Any, ReassigningZk]:
    core, zk = new_core(), ReassigningZk()
    zk.add_topic("t", parts or {0: [1, 2, 3], 1: [2, 3, 1]})
    drive(core, zk, zk.startup_event(brokers(*live)))
    return core, zk


def reply(effects) -> Any:
    (found,) = [e for e in effects if isinstance(e, Reply)]
    return found.value


def alter(core, zk, targets) -> tuple[dict, list]:
    effects = drive(core, zk, AlterReassignments(targets, reply_to="r"))
    return reply(effects), effects


def isr_join(core, zk, tp, isr) -> list:
    """The partition's leader adds followers to the ISR through AlterPartition."""
    cur = zk.states[tp]
    change = IsrChange(cur.leader_epoch, cur.zk_version, tuple(isr))
    event = AlterPartition(cur.leader, 100 + cur.leader, {zk.topics["t"].topic_id: {tp.partition: change}},
                           reply_to="a")
    return drive(core, zk, event)


def assert_started_1_2_3_to_2_3_4(core, zk, effects) -> None:
    znode = zk.topics["t"]
    assert znode.partitions[0] == [2, 3, 4, 1]
    assert znode.adding == {0: [4]} and znode.removing == {0: [1]}
    assert core.ctx.reassignments[T0] == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    lai = leader_and_isr(effects)
    assert set(lai) == {1, 2, 3, 4}
    state = partition_states(lai[4])[T0]
    assert state.is_new and state.leader == 1 and state.leader_epoch == 1
    assert state.adding_replicas == (4,) and state.removing_replicas == (1,)
    assert core.ctx.replica_state(PartitionReplica(T0, 4)) is ReplicaState.NEW
    assert not stop_replica(effects)


def test_replica_assignment_arithmetic() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to((2, 3, 4))
    assert moving == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert moving.origin == (2, 3, 1) and moving.target == (2, 3, 4)
    again = moving.reassign_to((5, 6))  # re-targeting keeps the original replicas as origin
    assert again.origin == (2, 3, 1) and again.adding == (5, 6)
    assert not ReplicaAssignment((1,)).is_being_reassigned


def test_merge_topic_assignment_keeps_other_partitions() -> None:
    current = TopicAssignment("t", None, {0: [1, 2], 1: [2, 3]}, adding={1: [3]},
                              removing={}, zk_version=4)
    merged = merge_topic_assignment(current, {0: ReplicaAssignment((3, 1, 2), (3,), (2,)),
                                              1: ReplicaAssignment((2, 3))})
    assert merged.partitions == {0: [3, 1, 2], 1: [2, 3]}
    assert merged.adding == {0: [3]} and merged.removing == {0: [2]}


def test_full_move_to_new_brokers_moves_leader_and_deletes_old_replica() -> None:
    core, zk = setup()
    result, effects = alter(core, zk, {T0: (2, 3, 4)})
    assert result == {T0: (E.none, None)}
    assert_started_1_2_3_to_2_3_4(core, zk, effects)
    # Broker 4 catches up; the leader adds it to the ISR: phase B runs in that event.
    effects = isr_join(core, zk, T0, [1, 2, 3, 4])
    state = zk.states[T0]
    assert state.leader == 2 and state.isr == [2, 3, 4]
    znode = zk.topics["t"]
    assert znode.partitions[0] == [2, 3, 4] and not znode.adding and not znode.removing
    assert T0 not in core.ctx.reassignments and core.ctx.replicas(T0) == (2, 3, 4)
    # The topic znode is written last, after the leader/ISR writes.
    kinds = [type(op) for op in zk.ops]
    assert kinds[-1] is ZkUpdateTopicAssignments and ZkUpdatePartitionStates in kinds[-3:]
    stops = stop_replica(effects)
    assert set(stops) == {1}
    assert partition_states(stops[1])[T0].delete_partition
    assert PartitionReplica(T0, 1) not in core.ctx.replica_states
    lai = leader_and_isr(effects)
    assert set(lai) == {2, 3, 4} and partition_states(lai[2])[T0].leader == 2
    um = update_metadata(effects)
    assert set(um) == {1, 2, 3, 4}
    assert partition_states(um[3])[T0].replicas == (2, 3, 4)
    assert not core.reassignment.list(None)


def test_leader_kept_when_in_target() -> None:
    core, zk = setup()
    alter(core, zk, {T1: (2, 4)})  # leader 2 stays
    effects = isr_join(core, zk, T1, [2, 3, 1, 4])
    state = zk.states[T1]
    assert state.leader == 2 and sorted(state.isr) == [2, 4]
    assert set(stop_replica(effects)) == {1, 3}


def test_invalid_requests_are_refused() -> None:
    core, zk = setup(live=(1, 2, 3))
    result, _ = alter(core, zk, {
        T0: (2, 3, 9),
        T1: (),
        TopicPartition("t", 7): (1, 2),
        TopicPartition("nope", 0): (1,),
    })
    assert result[T0][0] is E.invalid_replica_assignment
    assert result[T1][0] is E.invalid_replica_assignment
    assert result[TopicPartition("t", 7)][0] is E.unknown_topic_or_partition
    assert result[TopicPartition("nope", 0)][0] is E.unknown_topic_or_partition
    result, _ = alter(core, zk, {T0: (2, 2, 3)})
    assert result[T0][0] is E.invalid_replica_assignment and "Duplicate" in result[T0][1]
    result, _ = alter(core, zk, {T0: None})
    assert result[T0][0] is E.no_reassignment_in_progress
    assert not zk_ops(zk.ops, ZkUpdateTopicAssignments)


def test_cancel_reverts_and_deletes_the_added_replica() -> None:
    core, zk = setup()
    alter(core, zk, {T0: (2, 3, 4)})
    result, effects = alter(core, zk, {T0: None})
    assert result == {T0: (E.none, None)}
    znode = zk.topics["t"]
    assert znode.partitions[0] == [2, 3, 1] and not znode.adding and not znode.removing
    assert set(core.ctx.replicas(T0)) == {1, 2, 3} and T0 not in core.ctx.reassignments
    stops = stop_replica(effects)
    assert set(stops) == {4} and partition_states(stops[4])[T0].delete_partition
    assert zk.states[T0].leader == 1


def test_cancel_keeps_an_adding_replica_that_is_the_whole_isr_until_the_origin_catches_up(
        ) -> None:
    """Kafka's cancel (updateCurrentReassignment -> stopRemovedReplicasOfReassignedPartition)
    stops and deletes the adding replicas at once; when one of them is the only ISR member,
    removeReplicasFromIsr keeps it in the ISR with no leader, and no replica of the reverted
    assignment can ever be elected (the acknowledged writes are only on the deleted one).
    Here it stays, as a replica being removed, until the origin is back in the ISR."""
    core, zk = setup(parts={0: [1, 2]})
    alter(core, zk, {T0: (3, 4)})
    isr_join(core, zk, T0, [1, 2, 3])
    change_brokers(core, zk, brokers(3, 4))  # 1 and 2 die: 3 leads, the whole ISR
    assert (zk.states[T0].leader, zk.states[T0].isr) == (3, [3])
    result, effects = alter(core, zk, {T0: None})
    assert result == {T0: (E.none, None)}
    znode = zk.topics["t"]
    assert znode.partitions[0] == [1, 2, 3] and znode.removing == {0: [3]}
    assert not znode.adding
    assert core.ctx.reassignments[T0] == ReplicaAssignment((1, 2, 3), (), (3,))
    stops = stop_replica(effects)  # 4 (never in sync) goes at once, 3 stays
    assert set(stops) == {4} and partition_states(stops[4])[T0].delete_partition
    assert (zk.states[T0].leader, zk.states[T0].isr) == (3, [3])
    assert core.ctx.replica_state(PartitionReplica(T0, 3)) is ReplicaState.NEW  # as it was
    change_brokers(core, zk, brokers(1, 2, 3, 4))
    effects = isr_join(core, zk, T0, [3, 1, 2])
    znode = zk.topics["t"]
    assert znode.partitions[0] == [1, 2] and not znode.adding and not znode.removing
    assert T0 not in core.ctx.reassignments
    assert zk.states[T0].leader in (1, 2) and set(zk.states[T0].isr) == {1, 2}
    stops = stop_replica(effects)
    assert set(stops) == {3} and partition_states(stops[3])[T0].delete_partition


def test_new_controller_resumes_and_completes_the_move() -> None:
    core, zk = setup()
    alter(core, zk, {T0: (2, 3, 4)})
    successor = new_core()
    effects = drive(successor, zk, zk.startup_event(brokers(1, 2, 3, 4), epoch=2))
    assert successor.ctx.reassignments[T0] == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert partition_states(leader_and_isr(effects)[4])[T0].replicas == (2, 3, 4, 1)
    isr_join(successor, zk, T0, [1, 2, 3, 4])
    assert zk.topics["t"].partitions[0] == [2, 3, 4] and not zk.topics["t"].adding
    assert zk.states[T0].leader == 2


def test_controller_dying_after_isr_write_leaves_enough_to_finish() -> None:
    """The new controller finds RS and AR/RR in the topic znode and the target in sync."""
    core, zk = setup()
    alter(core, zk, {T0: (2, 3, 4)})
    zk.bump(T0, isr=[1, 2, 3, 4])  # the ISR grew, then the controller died
    successor = new_core()
    effects = drive(successor, zk, zk.startup_event(brokers(1, 2, 3, 4), epoch=2))
    assert zk.topics["t"].partitions[0] == [2, 3, 4]
    assert zk.states[T0].leader == 2 and set(stop_replica(effects)) == {1}


def test_move_waiting_on_dead_broker_resumes_when_it_starts() -> None:
    core, zk = setup()
    alter(core, zk, {T0: (2, 3, 4)})
    change_brokers(core, zk, brokers(1, 2, 3))
    assert T0 in core.ctx.reassignments
    effects = change_brokers(core, zk, brokers(1, 2, 3, 4))
    lai = leader_and_isr(effects)
    assert 4 in lai and partition_states(lai[4])[T0].replicas == (2, 3, 4, 1)
    isr_join(core, zk, T0, [1, 2, 3, 4])
    assert zk.topics["t"].partitions[0] == [2, 3, 4]


def test_admin_znode_starts_moves_and_is_emptied_when_done() -> None:
    core, zk = setup()
    zk.znode = {T0: (2, 3, 4), T1: (2, 9)}
    drive(core, zk, ZkReassignmentChange(dict(zk.znode)))
    assert zk.znode == {T0: (2, 3, 4)}  # the invalid entry is dropped at once
    assert T0 in core.ctx.reassignments
    isr_join(core, zk, T0, [1, 2, 3, 4])
    assert zk.znode is None  # deleted once empty
    assert zk.topics["t"].partitions[0] == [2, 3, 4]


def test_list_reassignments() -> None:
    core, zk = setup()
    alter(core, zk, {T0: (2, 3, 4)})
    effects = drive(core, zk, ListReassignments(None, reply_to="l"))
    assert reply(effects) == {T0: ReplicaAssignment((2, 3, 4, 1), (4,), (1,))}
    effects = drive(core, zk, ListReassignments(frozenset({T1}), reply_to="l"))
    assert reply(effects) == {}


def test_shrinking_the_replica_set_completes_at_once() -> None:
    core, zk = setup()
    _, effects = alter(core, zk, {T0: (1, 2)})
    assert zk.topics["t"].partitions[0] == [1, 2] and not zk.topics["t"].removing
    assert zk.states[T0].isr == [1, 2] and set(stop_replica(effects)) == {3}

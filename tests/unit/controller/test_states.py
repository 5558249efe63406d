"""Every valid and invalid transition of both state machines, as data and in the machines."""

from __future__ import annotations

import itertools
import logging

import pytest

from weir.common import TopicPartition
from weir.controller.context import ControllerContext
from weir.controller.partition_state_machine import PartitionStateMachine
from weir.controller.replica_state_machine import ReplicaStateMachine
from weir.controller.requests import RequestBatch
from weir.controller.scope import EventScope
from weir.controller.settings import ControllerSettings
from weir.controller.states import (
    VALID_PREVIOUS_PARTITION_STATES,
    VALID_PREVIOUS_REPLICA_STATES,
    IllegalStateTransition,
    PartitionReplica,
    PartitionState,
    ReplicaState,
    check_partition_transition,
    check_replica_transition,
)
from weir.coordination.codecs import LeaderIsr

from .helpers import broker

P, R = PartitionState, ReplicaState
TP = TopicPartition("t", 0)

PARTITION_VALID = {
    (P.NON_EXISTENT, P.NEW),
    (P.NEW, P.ONLINE), (P.ONLINE, P.ONLINE), (P.OFFLINE, P.ONLINE),
    (P.NEW, P.OFFLINE), (P.ONLINE, P.OFFLINE), (P.OFFLINE, P.OFFLINE),
    (P.OFFLINE, P.NON_EXISTENT),
}
REPLICA_VALID = {
    (R.NON_EXISTENT, R.NEW),
    *((s, R.ONLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    *((s, R.OFFLINE) for s in (R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE)),
    (R.OFFLINE, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.DELETION_INELIGIBLE), (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
}


def test_tables_match_the_documented_transitions() -> None:
    assert {(a, b) for b, prev in VALID_PREVIOUS_PARTITION_STATES.items()
            for a in prev} == PARTITION_VALID
    assert {(a, b) for b, prev in VALID_PREVIOUS_REPLICA_STATES.items()
            for a in prev} == REPLICA_VALID


@pytest.mark.parametrize(("current", "target"), list(itertools.product(P, P)))
def test_partition_transition_check(current: P, target: P) -> None:
    if (current, target) in PARTITION_VALID:
        check_partition_transition(TP, current, target)
        return
    with pytest.raises(IllegalStateTransition) as info:
        check_partition_transition(TP, current, target)
    assert info.value.subject == TP
    assert (info.value.current, info.value.target) == (current, target)
    assert "t-0" in str(info.value) and str(current) in str(info.value)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(R, R)))
def test_replica_transition_check(current: R, target: R) -> None:
    replica = PartitionReplica(TP, 2)
    if (current, target) in REPLICA_VALID:
        check_replica_transition(replica, current, target)
        return
    with pytest.raises(IllegalStateTransition) as info:
        check_replica_transition(replica, current, target)
    assert info.value.subject == replica
    assert "replica 2" in str(info.value) and str(target) in str(info.value)


def _machines() -> tuple[ControllerContext, PartitionStateMachine, ReplicaStateMachine,
                         EventScope]:
    ctx = ControllerContext(controller_epoch=3, epoch_zk_version=1)
    ctx.live_brokers.update({1: broker(1), 2: broker(2)})
    ctx.add_topic("t", __import__("uuid").uuid4(), {0: [1, 2]})
    ctx.leadership[TP] = LeaderIsr(leader=1, leader_epoch=4, isr=[1, 2], controller_epoch=3,
                                   zk_version=9)
    settings = ControllerSettings(broker_id=1)
    scope = EventScope(RequestBatch(1, ctx), now_ms=0)
    return ctx, PartitionStateMachine(ctx, settings), ReplicaStateMachine(ctx, settings), scope


def _run(gen) -> None:
    """Run a state machine step that must not need ZooKeeper."""
    with pytest.raises(StopIteration):
        op = next(gen)
        raise AssertionError(f"unexpected ZooKeeper operation {op!r}")


@pytest.mark.parametrize(("current", "target"),
                         [(c, t) for c, t in itertools.product(P, P)
                          if (c, t) not in PARTITION_VALID])
def test_partition_machine_rejects_illegal_transition(current: P, target: P) -> None:
    ctx, psm, _, scope = _machines()
    ctx.partition_states[TP] = current
    _run(psm.handle_state_changes(scope, [TP], target))
    assert ctx.partition_state(TP) is current
    errors = [e for e in scope.effects if e.level == logging.ERROR]
    assert len(errors) == 1 and "illegal state transition" in errors[0].message
    assert scope.batch.is_empty()


@pytest.mark.parametrize(("current", "target"),
                         [(c, t) for c, t in itertools.product(R, R)
                          if (c, t) not in REPLICA_VALID])
def test_replica_machine_rejects_illegal_transition(current: R, target: R) -> None:
    ctx, _, rsm, scope = _machines()
    replica = PartitionReplica(TP, 2)
    if current is not R.NON_EXISTENT:
        ctx.replica_states[replica] = current
    _run(rsm.handle_state_changes(scope, [replica], target))
    assert ctx.replica_state(replica) is current
    assert any("illegal state transition" in e.message for e in scope.effects)
    assert scope.batch.is_empty()


@pytest.mark.parametrize(("current", "target"),
                         [(P.NON_EXISTENT, P.NEW), (P.NEW, P.OFFLINE), (P.ONLINE, P.OFFLINE),
                          (P.OFFLINE, P.OFFLINE), (P.OFFLINE, P.NON_EXISTENT)])
def test_partition_machine_state_only_transitions(current: P, target: P) -> None:
    ctx, psm, _, scope = _machines()
    ctx.partition_states[TP] = current
    _run(psm.handle_state_changes(scope, [TP], target))
    assert ctx.partition_state(TP) is target


def test_new_replica_never_leader() -> None:
    ctx, _, rsm, scope = _machines()
    leader = PartitionReplica(TP, 1)
    follower = PartitionReplica(TP, 2)
    _run(rsm.handle_state_changes(scope, [leader, follower], R.NEW))
    assert ctx.replica_state(leader) is R.NON_EXISTENT
    assert ctx.replica_state(follower) is R.NEW
    assert any("cannot become NewReplica" in e.message for e in scope.effects)


@pytest.mark.parametrize(("current", "target"),
                         [(R.OFFLINE, R.DELETION_STARTED),
                          (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
                          (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
                          (R.OFFLINE, R.DELETION_INELIGIBLE),
                          (R.DELETION_INELIGIBLE, R.ONLINE),
                          (R.NEW, R.ONLINE), (R.ONLINE, R.ONLINE), (R.OFFLINE, R.ONLINE),
                          (R.DELETION_SUCCESSFUL, R.NON_EXISTENT)])
def test_replica_machine_transitions_without_zookeeper(current: R, target: R) -> None:
    ctx, _, rsm, scope = _machines()
    replica = PartitionReplica(TP, 2)
    ctx.replica_states[replica] = current
    _run(rsm.handle_state_changes(scope, [replica], target))
    expected = target if target is not R.NON_EXISTENT else R.NON_EXISTENT
    assert ctx.replica_state(replica) is expected
    if target is R.NON_EXISTENT:
        assert ctx.replicas(TP) == (1,)
    if target is R.DELETION_STARTED:
        assert not scope.batch.is_empty()

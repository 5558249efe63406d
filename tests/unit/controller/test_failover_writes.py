"""Broker failure and controller failover writes; batch building reuse.

A dead broker leaves the ISRs and the partitions it led get new leaders in the same
conditional writes (each partition written once, its leader epoch bumped once).  As in
Kafka's onReplicasBecomeOffline, the partitions that lost their leader are written first and
their LeaderAndIsr/UpdateMetadata sent before the other partitions' ISR shrinks are written.
"""

from __future__ import annotations

import logging

from weir.common import TopicPartition
from weir.controller.effects import ZkUpdatePartitionStates
from weir.controller.events import BrokerChange
from weir.controller.requests import RequestBatch
from weir.controller.states import PartitionReplica, PartitionState, ReplicaState
from weir.coordination.codecs import LeaderIsr

from .helpers import (
    FakeZk,
    brokers,
    change_brokers,
    drive,
    leader_and_isr_states,
    logs,
    new_core,
    partition_states,
    send_batches,
    started,
    update_metadata_all,
    zk_ops,
)

P, R = PartitionState, ReplicaState
T0, T1, T2 = (TopicPartition("t", p) for p in range(3))
TOPIC = {"t": {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}}


def _failover(live: tuple[int, ...], topics: dict = TOPIC, **settings):
    """Broker 1 was the controller; a new one starts with ``live`` brokers."""
    _, zk = started(live=(1, 2, 3), topics=topics, **settings)
    core = new_core(**settings)
    effects = drive(core, zk, zk.startup_event(brokers(*live), epoch=2))
    return core, zk, effects


def _new_leaders_sent_before_the_shrinks(effects, leaderless, shrunk) -> None:
    """Two write rounds (``leaderless`` then ``shrunk``), the first round's batch sent
    before the second round's write, naming the new leaders."""
    updates = [(i, e) for i, e in enumerate(effects) if isinstance(e, ZkUpdatePartitionStates)]
    assert [set(u.states) for _, u in updates] == [leaderless, shrunk]
    first_sent = [(i, e) for i, e in send_batches(effects) if updates[0][0] < i < updates[1][0]]
    assert len(first_sent) == 1
    lai = {r.broker_id: partition_states(r.request) for r in first_sent[0][1].requests
           if type(r.request).__name__ == "LeaderAndIsrRequest"}
    assert lai and all(set(states) >= leaderless for states in lai.values())


def test_failover_elects_first_and_writes_each_partition_once() -> None:
    core, zk, effects = _failover(live=(2, 3))
    _new_leaders_sent_before_the_shrinks(effects, {T0}, {T1, T2})
    # T0 was led by the dead broker 1: new leader, one epoch bump; the others shrink.
    assert (zk.states[T0].leader, zk.states[T0].isr, zk.states[T0].leader_epoch) == (2, [2, 3], 1)
    assert (zk.states[T1].leader, zk.states[T1].isr, zk.states[T1].leader_epoch) == (2, [2, 3], 1)
    assert (zk.states[T2].leader, zk.states[T2].isr) == (3, [3, 2])
    assert all(core.ctx.partition_state(tp) is P.ONLINE for tp in (T0, T1, T2))
    assert core.ctx.replica_state(PartitionReplica(T0, 1)) is R.OFFLINE
    lai = leader_and_isr_states(effects)
    assert set(lai) == {2, 3}
    for states in lai.values():
        assert states[T0].leader == 2 and states[T0].leader_epoch == 1
        assert states[T0].partition_epoch == zk.states[T0].zk_version
    for sent in update_metadata_all(effects).values():
        newest = {tp: st for r in sent for tp, st in partition_states(r).items()}
        assert newest[T0].leader == 2
    assert core.ctx.leadership[T0] == zk.states[T0]


def test_failover_first_batch_holds_no_state_the_shrinks_replace() -> None:
    """Failover's LeaderAndIsr to every replica would carry T1/T2's old leader epoch, which
    the brokers hold already (refused as stale): those states wait for their shrink."""
    _, zk = started(live=(1, 2, 3), topics=TOPIC)
    old = {tp: zk.states[tp].leader_epoch for tp in (T0, T1, T2)}
    core = new_core()
    effects = drive(core, zk, zk.startup_event(brokers(2, 3), epoch=2))
    (_, first), *_ = [(i, e) for i, e in send_batches(effects)
                      if any(type(r.request).__name__ == "LeaderAndIsrRequest"
                             for r in e.requests)]
    for r in first.requests:
        if type(r.request).__name__ == "LeaderAndIsrRequest":
            assert set(partition_states(r.request)) == {T0}
    for states in leader_and_isr_states(effects).values():
        assert all(st.leader_epoch > old[tp] for tp, st in states.items())


def test_failover_restores_the_state_of_a_partition_whose_shrink_failed() -> None:
    _, zk = started(live=(1, 2, 3), topics=TOPIC)
    core = new_core(max_zk_update_attempts=1)
    event = zk.startup_event(brokers(2, 3), epoch=2)
    zk.bump(T1)  # after the snapshot: T1's shrink loses its conditional write, no retry
    effects = drive(core, zk, event)
    assert T1 not in zk_ops(effects, ZkUpdatePartitionStates)[-1].states or \
        zk.states[T1].isr == event.partition_states[T1].isr  # not written
    state = leader_and_isr_states(effects)[2][T1]  # the state it had, as Kafka's failover
    assert state.leader_epoch == event.partition_states[T1].leader_epoch


def test_failover_without_eligible_leader_writes_no_leader_once() -> None:
    core, zk, effects = _failover(live=(2, 3), topics={"t": {0: [1]}})
    assert len(zk_ops(effects, ZkUpdatePartitionStates)) == 1
    assert zk.states[T0].leader == -1 and zk.states[T0].leader_epoch == 1
    assert core.ctx.partition_state(T0) is P.OFFLINE
    errors = [e for e in logs(effects, logging.ERROR) if "No eligible leader" in e.message]
    assert len(errors) == 1


def test_broker_failure_elections_sent_first_and_recipients() -> None:
    core, zk = started(live=(1, 2, 3), topics=TOPIC)
    effects = change_brokers(core, zk, brokers(2, 3))
    _new_leaders_sent_before_the_shrinks(effects, {T0}, {T1, T2})
    assert zk.states[T0].leader == 2 and zk.states[T0].leader_epoch == 1
    assert all(1 not in zk.states[tp].isr for tp in (T0, T1, T2))
    assert all(zk.states[tp].leader_epoch == 1 for tp in (T0, T1, T2))  # written once
    lai = leader_and_isr_states(effects)
    assert set(lai) == {2, 3}
    assert set(lai[2]) == {T0, T1, T2}
    assert core.ctx.partition_state(T0) is P.ONLINE
    # a small batch still logs each election
    assert any(f"Partition {T0} state changed from OfflinePartition to OnlinePartition"
               in e.message for e in logs(effects))


def test_broker_failure_lost_race_recomputes_the_election() -> None:
    core, zk = started(live=(1, 2, 3), topics=TOPIC)
    zk.bump(T0, isr=[1, 3])  # the leader dropped 2 from the ISR behind the controller's back
    effects = change_brokers(core, zk, brokers(2, 3))
    # T0's election, its retry after the lost race, then T1 and T2's shrinks.
    assert [set(u.states) for u in zk_ops(effects, ZkUpdatePartitionStates)] == [
        {T0}, {T0}, {T1, T2}]
    assert (zk.states[T0].leader, zk.states[T0].isr) == (3, [3])
    assert leader_and_isr_states(effects)[3][T0].leader == 3


def test_broker_failure_unclean_election_in_the_same_write() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}},
                       unclean_leader_election_enable=True)
    change_brokers(core, zk, brokers(1))      # 2 leaves the ISR
    change_brokers(core, zk, brokers(1, 2))   # 2 is back (out of sync)
    effects = drive(core, zk, BrokerChange(brokers(2)))  # the only ISR member dies
    assert len(zk_ops(effects, ZkUpdatePartitionStates)) == 1
    assert zk.states[T0].leader == 2 and zk.states[T0].isr == [2]
    assert any("potential data loss" in e.message for e in logs(effects, logging.WARNING))


def test_large_batches_log_summaries() -> None:
    n = 600  # 200 led by the broker that dies: over the per-partition logging limit
    topics = {"big": {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(n)}}
    core, zk = started(live=(1, 2, 3), topics=topics)
    effects = change_brokers(core, zk, brokers(2, 3))
    messages = [e.message for e in logs(effects)]
    assert len(messages) < 20
    assert any("partitions elected a leader" in m for m in messages)
    assert all(zk.states[tp].leader in (2, 3) for tp in zk.states)


def test_failover_at_scale_writes_each_partition_once() -> None:
    n = 3000
    zk = FakeZk()
    zk.add_topic("big", {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(n)})
    core = new_core()
    drive(core, zk, zk.startup_event(brokers(1, 2, 3)))
    core2 = new_core()
    effects = drive(core2, zk, zk.startup_event(brokers(2, 3), epoch=2))
    updates = zk_ops(effects, ZkUpdatePartitionStates)
    assert [len(u.states) for u in updates] == [n // 3, n - n // 3]  # led by 1, the rest
    assert all(zk.states[tp].leader_epoch == 1 for tp in zk.states)


# -- request batch reuse --------------------------------------------------------------------

def test_leader_and_isr_state_is_built_once_per_partition() -> None:
    core, _ = started(live=(1, 2, 3), topics=TOPIC)
    batch = RequestBatch(1, core.ctx)
    li = core.ctx.leadership[T0]
    for b in (1, 2, 3):
        batch.add_leader_and_isr([b], T0, li, (1, 2, 3))
    built = {r.broker_id: partition_states(r.request)[T0] for r in batch.build()
             if r.request.__class__.__name__ == "LeaderAndIsrRequest"}
    assert set(built) == {1, 2, 3}
    assert built[1] is built[2] is built[3]


def test_leader_and_isr_later_state_and_is_new_upgrade() -> None:
    core, _ = started(live=(1, 2, 3), topics=TOPIC)
    batch = RequestBatch(1, core.ctx)
    old = LeaderIsr(leader=1, leader_epoch=0, isr=[1, 2, 3], controller_epoch=1, zk_version=0)
    new = LeaderIsr(leader=2, leader_epoch=1, isr=[2, 3], controller_epoch=1, zk_version=1)
    batch.add_leader_and_isr([1], T0, old, (1, 2, 3), is_new=True)
    batch.add_leader_and_isr([1, 2], T0, new, (1, 2, 3))
    lai = {r.broker_id: partition_states(r.request)[T0] for r in batch.build()
           if r.request.__class__.__name__ == "LeaderAndIsrRequest"}
    assert lai[1].leader == 2 and lai[1].is_new       # a new replica stays new
    assert lai[2].leader == 2 and not lai[2].is_new


def test_update_metadata_topic_states_shared_only_for_equal_sets() -> None:
    core, _ = started(live=(1, 2, 3), topics=TOPIC)
    batch = RequestBatch(1, core.ctx)
    batch.add_update_metadata([1, 2], [T0, T1])
    batch.add_update_metadata([3], [T0])
    um = {r.broker_id: r.request for r in batch.build()}
    assert um[1].topic_states is um[2].topic_states
    assert set(partition_states(um[3])) == {T0}
    assert set(partition_states(um[1])) == {T0, T1}
    assert um[1].live_brokers == um[3].live_brokers


def test_replicas_on_brokers_keeps_assignment_order() -> None:
    core, _ = started(live=(1, 2, 3), topics=TOPIC)
    ctx = core.ctx
    expected = [r for r in ctx.all_replicas() if r.replica in (1, 3)]
    assert ctx.replicas_on_brokers([3, 1]) == expected
    assert ctx.replicas_on_brokers([9]) == []

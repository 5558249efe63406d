"""One write round for broker failure and controller failover; batch building reuse.

A dead broker leaves the ISRs and the partitions it led get new leaders in the same
conditional writes (each partition written once, its leader epoch bumped once).
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
    leader_and_isr,
    logs,
    new_core,
    partition_states,
    started,
    update_metadata,
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


def test_failover_elects_and_shrinks_in_one_write_per_partition() -> None:
    core, zk, effects = _failover(live=(2, 3))
    updates = zk_ops(effects, ZkUpdatePartitionStates)
    assert len(updates) == 1 and set(updates[0].states) == {T0, T1, T2}
    # T0 was led by the dead broker 1: new leader, one epoch bump; the others shrink.
    assert (zk.states[T0].leader, zk.states[T0].isr, zk.states[T0].leader_epoch) == (2, [2, 3], 1)
    assert (zk.states[T1].leader, zk.states[T1].isr, zk.states[T1].leader_epoch) == (2, [2, 3], 1)
    assert (zk.states[T2].leader, zk.states[T2].isr) == (3, [3, 2])
    assert all(core.ctx.partition_state(tp) is P.ONLINE for tp in (T0, T1, T2))
    assert core.ctx.replica_state(PartitionReplica(T0, 1)) is R.OFFLINE
    lai = leader_and_isr(effects)
    assert set(lai) == {2, 3}
    for request in lai.values():
        states = partition_states(request)
        assert states[T0].leader == 2 and states[T0].leader_epoch == 1
        assert states[T0].partition_epoch == zk.states[T0].zk_version
    um = update_metadata(effects)
    assert all(partition_states(r)[T0].leader == 2 for r in um.values())
    assert core.ctx.leadership[T0] == zk.states[T0]


def test_failover_without_eligible_leader_writes_no_leader_once() -> None:
    core, zk, effects = _failover(live=(2, 3), topics={"t": {0: [1]}})
    assert len(zk_ops(effects, ZkUpdatePartitionStates)) == 1
    assert zk.states[T0].leader == -1 and zk.states[T0].leader_epoch == 1
    assert core.ctx.partition_state(T0) is P.OFFLINE
    errors = [e for e in logs(effects, logging.ERROR) if "No eligible leader" in e.message]
    assert len(errors) == 1


def test_broker_failure_one_round_and_recipients() -> None:
    core, zk = started(live=(1, 2, 3), topics=TOPIC)
    effects = change_brokers(core, zk, brokers(2, 3))
    updates = zk_ops(effects, ZkUpdatePartitionStates)
    assert len(updates) == 1 and set(updates[0].states) == {T0, T1, T2}
    assert zk.states[T0].leader == 2 and zk.states[T0].leader_epoch == 1
    assert all(1 not in zk.states[tp].isr for tp in (T0, T1, T2))
    lai = leader_and_isr(effects)
    assert set(lai) == {2, 3}
    assert {tp for tp in partition_states(lai[2])} == {T0, T1, T2}
    assert core.ctx.partition_state(T0) is P.ONLINE
    # a small batch still logs each election
    assert any(f"Partition {T0} state changed from OfflinePartition to OnlinePartition"
               in e.message for e in logs(effects))


def test_broker_failure_lost_race_recomputes_the_election() -> None:
    core, zk = started(live=(1, 2, 3), topics=TOPIC)
    zk.bump(T0, isr=[1, 3])  # the leader dropped 2 from the ISR behind the controller's back
    effects = change_brokers(core, zk, brokers(2, 3))
    assert len(zk_ops(effects, ZkUpdatePartitionStates)) == 2  # the retry of T0
    assert (zk.states[T0].leader, zk.states[T0].isr) == (3, [3])
    assert partition_states(leader_and_isr(effects)[3])[T0].leader == 3


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


def test_core_cost_at_scale_is_one_round() -> None:
    n = 3000
    zk = FakeZk()
    zk.add_topic("big", {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(n)})
    core = new_core()
    drive(core, zk, zk.startup_event(brokers(1, 2, 3)))
    core2 = new_core()
    effects = drive(core2, zk, zk.startup_event(brokers(2, 3), epoch=2))
    updates = zk_ops(effects, ZkUpdatePartitionStates)
    assert len(updates) == 1 and len(updates[0].states) == n
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

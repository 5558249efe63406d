"""Ordering at the controller: what Kafka's KafkaController does first.

* KafkaController.onControllerFailover initializes the TopicDeletionManager (topics
  queued for deletion, and ineligible ones) before the replica and partition state
  machines start, so their start-up neither elects leaders for nor shrinks the ISRs of
  topics being deleted;
* onControllerFailover and onBrokerStartup send UpdateMetadata (the live brokers; all
  partitions to a new broker) before the state machines' LeaderAndIsr, so a broker knows
  the live brokers before it acts on LeaderAndIsr;
* PartitionStateMachine.initializeLeaderAndIsrForPartitions takes a new partition's
  leader and ISR among isReplicaOnline replicas, which leaves out brokers in controlled
  shutdown (ControllerContext.liveBrokerIds);
* processBrokerChange handles new brokers, then bounced ones, then dead ones (as Weir did
  already; pinned here).
"""

from __future__ import annotations

from tests.unit.controller.helpers import (
    FakeZk,
    brokers,
    change_brokers,
    drive,
    logs,
    new_core,
    partition_states,
    requests_of,
    started,
    zk_ops,
)
from weir.common import TopicPartition
from weir.controller.effects import ZkUpdatePartitionStates
from weir.controller.events import ControlledShutdown, TopicChange
from weir.protocol.interbroker import LeaderAndIsrRequest, UpdateMetadataRequest

T0 = TopicPartition("t", 0)
D0 = TopicPartition("d", 0)


def _kinds_per_broker(effects) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for r in requests_of(effects):
        out.setdefault(r.broker_id, []).append(type(r.request).__name__)
    return out


def test_failover_sends_update_metadata_before_leader_and_isr() -> None:
    zk = FakeZk()
    zk.add_topic("t", {0: [1, 2, 3]})
    first = new_core()
    drive(first, zk, zk.startup_event(brokers(1, 2, 3)))
    drive(first, zk, TopicChange(frozenset({"t"})))
    effects = drive(new_core(), zk, zk.startup_event(brokers(1, 2, 3), epoch=2))
    for broker_id, kinds in _kinds_per_broker(effects).items():
        assert kinds[0] == "UpdateMetadataRequest", (broker_id, kinds)
        assert "LeaderAndIsrRequest" in kinds


def test_broker_startup_sends_update_metadata_before_leader_and_isr() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2, 3]}})
    effects = change_brokers(core, zk, brokers(1, 2, 3))
    kinds = _kinds_per_broker(effects)
    assert kinds[3][0] == "UpdateMetadataRequest" and "LeaderAndIsrRequest" in kinds[3]
    first = next(r.request for r in requests_of(effects) if r.broker_id == 3)
    assert isinstance(first, UpdateMetadataRequest)
    assert {b.id for b in first.live_brokers} == {1, 2, 3}
    assert T0 in partition_states(first)  # a new broker gets every partition
    for broker_id in (1, 2):
        assert kinds[broker_id][0] == "UpdateMetadataRequest", kinds


def test_failover_does_not_elect_leaders_for_topics_being_deleted() -> None:
    zk = FakeZk()
    zk.add_topic("d", {0: [3, 1, 2]})
    first = new_core()
    drive(first, zk, zk.startup_event(brokers(1, 2, 3)))
    drive(first, zk, TopicChange(frozenset({"d"})))
    assert zk.states[D0].leader == 3
    # Broker 3 (the leader) died and the topic was marked for deletion; a new controller.
    effects = drive(new_core(), zk, zk.startup_event(brokers(1, 2), epoch=2,
                                                     to_delete={"d"}))
    writes = [op for op in zk_ops(effects, ZkUpdatePartitionStates) if D0 in op.states]
    assert not writes, writes
    lai = [r for r in requests_of(effects) if isinstance(r.request, LeaderAndIsrRequest)
           and D0 in partition_states(r.request)
           and partition_states(r.request)[D0].leader != 3]
    assert not lai


def test_new_partition_leader_is_not_a_broker_in_controlled_shutdown() -> None:
    core, zk = started(live=(1, 2, 3))
    drive(core, zk, ControlledShutdown(1, core.ctx.broker_epoch(1), reply_to="c"))
    zk.add_topic("n", {0: [1, 2, 3]})
    effects = drive(core, zk, TopicChange(frozenset(zk.topics)))
    state = zk.states[TopicPartition("n", 0)]
    assert state.leader == 2 and 1 not in state.isr, (state, logs(effects))


def test_broker_change_handles_new_brokers_before_dead_ones() -> None:
    """processBrokerChange: onBrokerStartup(new) runs before onBrokerFailure(dead)."""
    core, zk = started(live=(1, 2), topics={"t": {0: [2, 1]}})
    effects = change_brokers(core, zk, brokers(1, 3))
    messages = [e.message for e in logs(effects)]
    startup = next(i for i, m in enumerate(messages) if "[3]" in m and "Online" in m
                   or "new [3]" in m)
    assert "new [3], dead [2]" in messages[startup]
    assert zk.states[T0].leader == 1

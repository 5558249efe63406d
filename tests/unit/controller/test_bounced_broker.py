"""A broker that restarts between two broker-change notifications ("bounced").

The controller handles it as a failure of the old incarnation followed by the startup of
the new one.  Requests the failure half produces for the bounced broker were meant for the
dead process: Kafka sends each state machine's batch at once, while the broker is out of
the live set, so they are dropped.  Weir merges one event's requests into one batch built
at the end, so a StopReplica from the failure half must not reach the new incarnation -
it would arrive after the LeaderAndIsr of the startup half (StopReplica goes last) and
stop the replica it just started, at the same leader epoch, for good.
"""

from __future__ import annotations

from weir.common import TopicPartition

from .helpers import broker, change_brokers, leader_and_isr, partition_states, started, stop_replica

T0 = TopicPartition("t", 0)


def test_bounced_follower_gets_leader_and_isr_and_no_stop_replica() -> None:
    core, zk = started(live=(1, 2, 3), topics={"t": {0: [1, 2, 3]}})
    assert zk.states[T0].leader == 1
    effects = change_brokers(core, zk, {1: broker(1), 2: broker(2, epoch=999), 3: broker(3)})
    lai = leader_and_isr(effects)
    assert T0 in partition_states(lai[2]) and lai[2].broker_epoch == 999
    assert 2 not in stop_replica(effects)


def test_bounced_leader_gets_leader_and_isr_and_no_stop_replica() -> None:
    core, zk = started(live=(1, 2, 3), topics={"t": {0: [2, 3, 1]}})
    assert zk.states[T0].leader == 2
    effects = change_brokers(core, zk, {1: broker(1), 2: broker(2, epoch=999), 3: broker(3)})
    lai = leader_and_isr(effects)
    state = partition_states(lai[2])[T0]
    assert (state.leader, state.leader_epoch) == (zk.states[T0].leader,
                                                  zk.states[T0].leader_epoch)
    assert 2 not in stop_replica(effects)

"""A replica whose log directory failed goes offline (LeaderAndIsr answers KAFKA_STORAGE_ERROR).

Kafka's KafkaController.processLeaderAndIsrResponseReceived records the partitions a
broker answered with KAFKA_STORAGE_ERROR in ControllerContext.replicasOnOfflineDirs and
calls onReplicasBecomeOffline: partitions led there go OfflinePartition and get new
leaders, the replicas go OfflineReplica (ReplicaStateMachine: out of the ISRs,
StopReplica), and isReplicaOnline is false for them from then on.
"""

from __future__ import annotations

from tests.unit.controller.helpers import (
    broker,
    brokers,
    change_brokers,
    drive,
    leader_and_isr,
    partition_states,
    started,
    stop_replica,
    update_metadata,
)
from weir.common import TopicPartition
from weir.controller.events import LeaderAndIsrResult
from weir.controller.states import PartitionReplica, ReplicaState
from weir.protocol.errors import ErrorCode

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def _storage_error(broker_id: int, *tps: TopicPartition) -> LeaderAndIsrResult:
    return LeaderAndIsrResult(broker_id, {tp: ErrorCode.kafka_storage_error for tp in tps})


def test_leader_on_a_failed_log_dir_is_replaced() -> None:
    """onReplicasBecomeOffline: OfflinePartition, a new leader, the replica OfflineReplica."""
    core, zk = started(topics={"t": {0: [1, 2, 3], 1: [2, 1, 3]}})
    assert zk.states[T0].leader == 1
    effects = drive(core, zk, _storage_error(1, T0))
    state = zk.states[T0]
    assert state.leader == 2 and 1 not in state.isr
    assert state.leader_epoch == 1
    lai = leader_and_isr(effects)
    assert set(lai) == {2, 3}
    assert partition_states(lai[2])[T0].leader == 2
    assert T0 in partition_states(stop_replica(effects)[1])
    assert core.ctx.replica_state(PartitionReplica(T0, 1)) is ReplicaState.OFFLINE
    assert partition_states(update_metadata(effects)[3])[T0].offline_replicas == (1,)
    # Broker 1's other replica (T1, on a healthy directory) is untouched.
    assert zk.states[T1].isr == [2, 1, 3]


def test_follower_on_a_failed_log_dir_leaves_the_isr_and_is_not_elected() -> None:
    """isReplicaOnline(replica, partition) is false for a replica on an offline dir."""
    core, zk = started(topics={"t": {0: [1, 2, 3]}},
                       unclean_leader_election_enable=True)
    drive(core, zk, _storage_error(2, T0))
    assert zk.states[T0].leader == 1 and zk.states[T0].isr == [1, 3]
    # Broker 3 dies, then broker 1: the only live replica left (2) is on a failed
    # directory, so even an unclean election finds nobody.
    change_brokers(core, zk, brokers(1, 2))
    change_brokers(core, zk, brokers(2))
    assert zk.states[T0].leader != 2


def test_the_same_error_again_changes_nothing_and_a_restart_clears_it() -> None:
    """Only newly offline replicas are handled; onBrokerStartup forgets the broker's dirs."""
    core, zk = started(topics={"t": {0: [1, 2, 3]}})
    drive(core, zk, _storage_error(2, T0))
    writes = len(zk.ops)
    assert not leader_and_isr(drive(core, zk, _storage_error(2, T0)))
    assert len(zk.ops) == writes
    # Broker 2 restarts (new broker epoch): its replica is online again.
    change_brokers(core, zk, {1: broker(1), 2: broker(2, epoch=500), 3: broker(3)})
    assert core.ctx.replica_state(PartitionReplica(T0, 2)) is ReplicaState.ONLINE
    assert core.ctx.is_replica_online(2, T0)

"""A log dir event notification (KIP-112): Kafka's processLogDirEventNotification →
onBrokerLogDirFailure sends LeaderAndIsr (is_new false) for every replica on the named live
brokers, the KAFKA_STORAGE_ERROR answers mark the replicas in failed dirs offline (new
leaders from the rest of the ISR), and the processed notifications are deleted."""

from __future__ import annotations

from typing import Any

from tests.unit.controller.helpers import FakeZk, drive, leader_and_isr, partition_states, started
from weir.common import TopicPartition
from weir.controller.events import LeaderAndIsrResult
from weir.controller.log_dir_events import LogDirEventNotification, ZkDeleteLogDirEvents
from weir.controller.states import PartitionReplica, ReplicaState
from weir.protocol.errors import ErrorCode

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


class NotifyingZk(FakeZk):
    def __init__(self, base: FakeZk) -> None:
        self.__dict__.update(base.__dict__)
        self.deleted_events: list[tuple[str, ...]] = []

    def execute(self, op: Any) -> Any:
        if isinstance(op, ZkDeleteLogDirEvents):
            self.ops.append(op)
            self.deleted_events.append(op.names)
            return None
        return super().execute(op)


def test_notification_probes_the_broker_and_its_storage_errors_move_leadership() -> None:
    core, base = started(topics={"t": {0: [1, 2, 3], 1: [2, 1, 3], 2: [2, 3]}})
    zk = NotifyingZk(base)
    assert zk.states[T0].leader == 1 and zk.states[T1].leader == 2
    effects = drive(core, zk, LogDirEventNotification(
        {"log_dir_event_0000000003": 1, "log_dir_event_0000000004": 1}))
    lai = leader_and_isr(effects)
    # Only broker 1 is probed, for both its replicas, as not new, at the current epochs.
    assert set(lai) == {1}
    states = partition_states(lai[1])
    assert set(states) == {T0, T1}
    assert all(not s.is_new for s in states.values())
    assert states[T0].leader_epoch == zk.states[T0].leader_epoch
    assert zk.deleted_events == [("log_dir_event_0000000003", "log_dir_event_0000000004")]
    writes = len([op for op in zk.ops if not isinstance(op, ZkDeleteLogDirEvents)])
    # Broker 1 answers: t-0 is in its failed dir, t-1 is fine (a stale epoch answer).
    effects = drive(core, zk, LeaderAndIsrResult(
        1, {T0: ErrorCode.kafka_storage_error, T1: ErrorCode.stale_controller_epoch}))
    assert zk.states[T0].leader == 2 and 1 not in zk.states[T0].isr
    assert zk.states[T1].leader == 2 and 1 in zk.states[T1].isr
    assert core.ctx.replica_state(PartitionReplica(T0, 1)) is ReplicaState.OFFLINE
    assert core.ctx.replica_state(PartitionReplica(T1, 1)) is ReplicaState.ONLINE
    assert len(zk.ops) > writes


def test_notification_of_a_dead_or_unknown_broker_is_only_deleted() -> None:
    core, base = started(topics={"t": {0: [1, 2, 3]}})
    zk = NotifyingZk(base)
    effects = drive(core, zk, LogDirEventNotification({"log_dir_event_0000000007": 9}))
    assert not leader_and_isr(effects)
    assert zk.deleted_events == [("log_dir_event_0000000007",)]

"""Controller operations as event -> effects, against a fake ZooKeeper."""

from __future__ import annotations

import logging

from weir.common import TopicPartition
from weir.controller.effects import (
    SendRequests,
    UnwatchTopics,
    WatchTopics,
    ZkCreatePartitionStates,
    ZkDeleteTopic,
    ZkUpdatePartitionStates,
)
from weir.controller.events import (
    ControllerResigned,
    PartitionModifications,
    StopReplicaResult,
    TopicChange,
    TopicDeletion,
)
from weir.controller.requests import LEADER_AND_ISR_FULL, LEADER_AND_ISR_INCREMENTAL
from weir.controller.states import PartitionReplica, PartitionState, ReplicaState
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import LeaderAndIsrRequest

from .helpers import (
    CONTROLLER_ID,
    EPOCH_ZK_VERSION,
    broker,
    brokers,
    change_brokers,
    drive,
    leader_and_isr,
    leader_and_isr_states,
    logs,
    new_core,
    partition_states,
    started,
    stop_replica,
    update_metadata,
    update_metadata_all,
    zk_ops,
)

P, R = PartitionState, ReplicaState
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


# -- new topics -------------------------------------------------------------------------------

def test_new_topic_creates_states_and_informs_brokers() -> None:
    core, zk = started(live=(1, 2, 3))
    zk.add_topic("t", {0: [1, 2], 1: [2, 3]})
    effects = drive(core, zk, TopicChange(frozenset({"t"})))

    creates = zk_ops(effects, ZkCreatePartitionStates)
    assert len(creates) == 1 and creates[0].epoch_zk_version == EPOCH_ZK_VERSION
    assert zk.states[T0].leader == 1 and zk.states[T0].isr == [1, 2]
    assert zk.states[T1].leader == 2 and zk.states[T1].leader_epoch == 0
    assert WatchTopics(frozenset({"t"})) in effects

    lai = leader_and_isr(effects)
    assert set(lai) == {1, 2, 3}
    assert set(partition_states(lai[1])) == {T0}
    assert set(partition_states(lai[2])) == {T0, T1}
    state = partition_states(lai[2])[T0]
    assert (state.leader, list(state.isr), list(state.replicas)) == (1, [1, 2], [1, 2])
    assert state.is_new and state.partition_epoch == 0
    assert lai[2].controller_id == CONTROLLER_ID and lai[2].broker_epoch == 102
    assert lai[1].topic_states[0].topic_id == zk.topics["t"].topic_id

    um = update_metadata(effects)
    assert set(um) == {1, 2, 3}
    assert set(partition_states(um[3])) == {T0, T1}
    assert {b.id for b in um[3].live_brokers} == {1, 2, 3}
    endpoint = um[3].live_brokers[0].endpoints[0]
    assert (endpoint.listener, endpoint.host, endpoint.port) == ("PLAINTEXT", "localhost", 9091)

    assert core.ctx.partition_state(T0) is P.ONLINE
    assert all(core.ctx.replica_state(PartitionReplica(T0, r)) is R.ONLINE for r in (1, 2))


def test_new_partition_with_all_replicas_dead_stays_new() -> None:
    core, zk = started(live=(1,))
    zk.add_topic("t", {0: [2, 3]})
    effects = drive(core, zk, TopicChange(frozenset({"t"})))
    assert core.ctx.partition_state(T0) is P.NEW
    assert not zk_ops(effects, ZkCreatePartitionStates)
    assert any("none of its replicas" in e.message for e in logs(effects, logging.ERROR))


def test_partition_modifications_add_partitions() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    zk.topics["t"].partitions[1] = [2, 1]
    effects = drive(core, zk, PartitionModifications("t"))
    assert core.ctx.partition_state(T1) is P.ONLINE
    assert zk.states[T1].leader == 2
    assert set(partition_states(leader_and_isr(effects)[1])) == {T1}


def test_first_leader_and_isr_is_full_then_incremental() -> None:
    core, zk = started(live=(1, 2), topics={"a": {0: [1, 2]}})
    zk.add_topic("b", {0: [1, 2]})
    effects = drive(core, zk, TopicChange(frozenset({"a", "b"})))
    lai = leader_and_isr(effects)
    assert lai[1].type_ == LEADER_AND_ISR_INCREMENTAL
    # broker 2 bounces: its next LeaderAndIsr is FULL again, with all its partitions
    effects = change_brokers(core, zk, {1: broker(1), 2: broker(2, epoch=999)})
    lai = leader_and_isr(effects)
    assert lai[2].type_ == LEADER_AND_ISR_FULL and lai[2].broker_epoch == 999
    assert set(partition_states(lai[2])) == {TopicPartition("a", 0), TopicPartition("b", 0)}


# -- broker failure -------------------------------------------------------------------------

def test_leader_failure_rf1_goes_offline_without_unclean() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [2]}})
    effects = change_brokers(core, zk, brokers(1))
    assert core.ctx.partition_state(T0) is P.OFFLINE
    assert any("No eligible leader" in e.message for e in logs(effects, logging.ERROR))
    # the dead replica is removed from leadership: leader -1, ISR keeps its last member
    assert zk.states[T0].leader == -1 and zk.states[T0].isr == [2]
    assert core.ctx.offline_partition_count() == 1
    assert set(update_metadata(effects)) == {1}
    assert {b.id for b in update_metadata(effects)[1].live_brokers} == {1}


def test_leader_failure_rf3_elects_from_isr_with_epoch_bump() -> None:
    core, zk = started(live=(1, 2, 3), topics={"t": {0: [1, 2, 3]}})
    before = zk.states[T0]
    effects = change_brokers(core, zk, brokers(2, 3))

    updates = zk_ops(effects, ZkUpdatePartitionStates)
    assert len(updates) == 1
    written = updates[0].states[T0]
    assert written.zk_version == before.zk_version  # expected version of the conditional write
    assert written.leader == 2 and written.isr == [2, 3]
    assert written.leader_epoch == before.leader_epoch + 1
    assert zk.states[T0].zk_version == before.zk_version + 1

    lai = leader_and_isr(effects)
    assert set(lai) == {2, 3}
    state = partition_states(lai[3])[T0]
    assert state.leader == 2 and state.leader_epoch == 1 and not state.is_new
    assert state.partition_epoch == zk.states[T0].zk_version
    assert set(update_metadata(effects)) == {2, 3}
    assert partition_states(update_metadata(effects)[2])[T0].offline_replicas == (1,)
    assert core.ctx.partition_state(T0) is P.ONLINE
    assert core.ctx.replica_state(PartitionReplica(T0, 1)) is R.OFFLINE


def test_follower_failure_shrinks_isr() -> None:
    core, zk = started(live=(1, 2, 3), topics={"t": {0: [1, 2, 3]}})
    effects = change_brokers(core, zk, brokers(1, 2))
    assert zk.states[T0].leader == 1 and zk.states[T0].isr == [1, 2]
    assert zk.states[T0].leader_epoch == 1
    assert set(leader_and_isr(effects)) == {1, 2}
    assert core.ctx.partition_state(T0) is P.ONLINE


def test_unclean_election_honours_topic_override() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    zk.configs["t"] = {"unclean.leader.election.enable": "true"}
    core.ctx.topic_configs["t"] = dict(zk.configs["t"])
    change_brokers(core, zk, brokers(1))          # 2 leaves the ISR
    change_brokers(core, zk, {})                  # 1 dies: isr [1], offline
    assert core.ctx.partition_state(T0) is P.OFFLINE
    effects = change_brokers(core, zk, brokers(2))  # only the out-of-sync replica returns
    assert zk.states[T0].leader == 2 and zk.states[T0].isr == [2]
    assert any("potential data loss" in e.message for e in logs(effects, logging.WARNING))


def test_unclean_disabled_waits_for_isr_member() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    change_brokers(core, zk, brokers(1))
    change_brokers(core, zk, {})
    change_brokers(core, zk, brokers(2))
    assert core.ctx.partition_state(T0) is P.OFFLINE
    effects = change_brokers(core, zk, brokers(1, 2))
    assert core.ctx.partition_state(T0) is P.ONLINE
    assert zk.states[T0].leader == 1
    assert partition_states(leader_and_isr(effects)[1])[T0].leader == 1


def test_conditional_write_conflict_rereads_and_retries() -> None:
    core, zk = started(live=(1, 2, 3), topics={"t": {0: [1, 2, 3]}})
    zk.bump(T0, isr=[1, 2])  # the leader shrank the ISR behind the controller's back
    effects = change_brokers(core, zk, brokers(2, 3))
    assert len(zk_ops(effects, ZkUpdatePartitionStates)) == 2
    assert zk.states[T0].leader == 2 and zk.states[T0].isr == [2]
    assert zk.states[T0].leader_epoch == 1


# -- broker startup -------------------------------------------------------------------------

def test_broker_startup_brings_offline_partitions_online() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [2], 1: [1]}})
    change_brokers(core, zk, brokers(1))
    assert core.ctx.partition_state(T0) is P.OFFLINE
    effects = change_brokers(core, zk, brokers(1, 2))
    assert core.ctx.partition_state(T0) is P.ONLINE
    assert zk.states[T0].leader == 2 and zk.states[T0].leader_epoch == 2
    um = update_metadata(effects)
    assert set(um) == {1, 2}
    leading = update_metadata_all(effects)[2][0]  # sent before the LeaderAndIsr
    assert set(partition_states(leading)) == {T0, T1}  # the new broker learns everything
    assert partition_states(um[2])[T0].leader == 2
    assert partition_states(leader_and_isr(effects)[2])[T0].leader == 2
    assert core.ctx.replica_state(PartitionReplica(T0, 2)) is R.ONLINE


# -- failover -------------------------------------------------------------------------------

def test_failover_from_snapshot() -> None:
    _, zk = started(live=(1, 2, 3), topics={"t": {0: [1, 2], 1: [3, 2]}, "n": {0: [2]}})
    zk.add_topic("fresh", {0: [1, 2]})  # created while there was no controller
    del zk.states[TopicPartition("n", 0)]  # ... and a partition whose state write was lost

    core = new_core()
    effects = drive(core, zk, zk.startup_event(brokers(1, 2), epoch=2))
    ctx = core.ctx
    assert core.active and ctx.controller_epoch == 2
    assert ctx.partition_state(T0) is P.ONLINE
    assert ctx.partition_state(T1) is P.ONLINE and zk.states[T1].leader == 2
    assert ctx.partition_state(TopicPartition("fresh", 0)) is P.ONLINE
    assert ctx.partition_state(TopicPartition("n", 0)) is P.ONLINE
    assert ctx.replica_state(PartitionReplica(T1, 3)) is R.OFFLINE
    lai = leader_and_isr(effects)
    assert set(lai) == {1, 2}
    assert {tp for tp in partition_states(lai[2])} == {
        T0, T1, TopicPartition("n", 0), TopicPartition("fresh", 0)}
    assert all(r.type_ == LEADER_AND_ISR_FULL for r in lai.values())
    assert all(r.controller_epoch == 2 for r in lai.values())
    assert WatchTopics(frozenset({"t", "n", "fresh"})) in effects


def test_resign_clears_state_and_stops_sending() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    effects = drive(core, zk, ControllerResigned())
    assert not core.active and not core.ctx.topic_ids
    assert UnwatchTopics(frozenset({"t"})) in effects
    assert drive(core, zk, TopicChange(frozenset({"t", "u"}))) == []


# -- deletion -------------------------------------------------------------------------------

def _stop_ok(broker_id: int, *tps: TopicPartition) -> StopReplicaResult:
    return StopReplicaResult(broker_id, {tp: ErrorCode.none for tp in tps})


def test_topic_deletion_flow() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}, "keep": {0: [1]}})
    effects = drive(core, zk, TopicDeletion(frozenset({"t"})))
    assert core.ctx.partition_state(T0) is P.NON_EXISTENT
    stops = stop_replica(effects)
    assert set(stops) == {1, 2}
    assert partition_states(stops[1])[T0].delete_partition
    assert partition_states(stops[1])[T0].leader_epoch == -2
    assert partition_states(update_metadata(effects)[1])[T0].leader == -2
    assert core.ctx.replica_state(PartitionReplica(T0, 1)) is R.DELETION_STARTED

    drive(core, zk, _stop_ok(1, T0))
    assert core.ctx.replica_state(PartitionReplica(T0, 1)) is R.DELETION_SUCCESSFUL
    assert "t" in core.ctx.topic_ids
    effects = drive(core, zk, _stop_ok(2, T0))
    assert zk_ops(effects, ZkDeleteTopic) == [ZkDeleteTopic("t", EPOCH_ZK_VERSION)]
    assert "t" not in core.ctx.topic_ids and zk.deleted == ["t"]
    assert UnwatchTopics(frozenset({"t"})) in effects
    assert "keep" in core.ctx.topic_ids


def test_deletion_blocked_by_dead_broker_resumes_when_it_returns() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    change_brokers(core, zk, brokers(1))
    effects = drive(core, zk, TopicDeletion(frozenset({"t"})))
    assert "t" in core.ctx.topics_ineligible_for_deletion
    assert not stop_replica(effects)

    effects = change_brokers(core, zk, brokers(1, 2))
    assert "t" not in core.ctx.topics_ineligible_for_deletion
    assert set(stop_replica(effects)) == {1, 2}
    drive(core, zk, _stop_ok(1, T0))
    drive(core, zk, _stop_ok(2, T0))
    assert "t" not in core.ctx.topic_ids and zk.deleted == ["t"]


def test_broker_dying_during_deletion_then_returning() -> None:
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    drive(core, zk, TopicDeletion(frozenset({"t"})))
    drive(core, zk, _stop_ok(1, T0))
    change_brokers(core, zk, brokers(1))
    replica2 = PartitionReplica(T0, 2)
    assert core.ctx.replica_state(replica2) in (R.DELETION_INELIGIBLE, R.OFFLINE)
    assert "t" in core.ctx.topics_ineligible_for_deletion

    effects = change_brokers(core, zk, brokers(1, 2))
    assert set(stop_replica(effects)) == {2}
    assert core.ctx.replica_state(replica2) is R.DELETION_STARTED
    drive(core, zk, _stop_ok(2, T0))
    assert zk.deleted == ["t"]


def test_failed_replica_deletion_marks_ineligible() -> None:
    core, zk = started(live=(1,), topics={"t": {0: [1]}})
    drive(core, zk, TopicDeletion(frozenset({"t"})))
    effects = drive(core, zk, StopReplicaResult(1, {T0: ErrorCode.kafka_storage_error}))
    assert "t" in core.ctx.topics_ineligible_for_deletion
    assert any("kafka_storage_error" in e.message for e in logs(effects))
    assert "t" in core.ctx.topic_ids


def test_stale_broker_epoch_from_a_restarted_live_broker_retries_the_deletion() -> None:
    """KIP-380: a StopReplica built before the broker restarted is refused with
    STALE_BROKER_EPOCH by the new incarnation; the broker is live, so the deletion is
    retried at once instead of waiting for a broker startup that was already handled."""
    core, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    drive(core, zk, TopicDeletion(frozenset({"t"})))
    drive(core, zk, _stop_ok(1, T0))
    effects = drive(core, zk, StopReplicaResult(2, {T0: ErrorCode.stale_broker_epoch}))
    assert "t" not in core.ctx.topics_ineligible_for_deletion
    assert set(stop_replica(effects)) == {2}
    assert core.ctx.replica_state(PartitionReplica(T0, 2)) is R.DELETION_STARTED
    drive(core, zk, _stop_ok(2, T0))
    assert zk.deleted == ["t"]


def test_failover_resumes_queued_deletion() -> None:
    _, zk = started(live=(1, 2), topics={"t": {0: [1, 2]}})
    core = new_core()
    effects = drive(core, zk, zk.startup_event(brokers(1, 2), epoch=2, to_delete={"t", "gone"}))
    assert set(stop_replica(effects)) == {1, 2}
    assert ZkDeleteTopic("gone", EPOCH_ZK_VERSION) in effects


# -- batching -------------------------------------------------------------------------------

def test_one_request_per_broker_per_batch_for_1000_partitions() -> None:
    n = 1000
    core, zk = started(live=(1, 2, 3))
    zk.add_topic("big", {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(n)})
    effects = drive(core, zk, TopicChange(frozenset({"big"})))
    assert len(zk_ops(effects, ZkCreatePartitionStates)) == 1
    lai = leader_and_isr(effects)  # asserts one per broker
    assert set(lai) == {1, 2, 3}
    assert all(len(partition_states(r)) == n for r in lai.values())

    effects = change_brokers(core, zk, brokers(2, 3))
    # Kafka's order: the elections (partitions led by 1) are written and sent, then the
    # ISR shrinks; each partition is written once, one request per broker per batch.
    updates = zk_ops(effects, ZkUpdatePartitionStates)
    led = {tp for tp in zk.states if tp.partition % 3 == 0}
    assert [set(u.states) for u in updates] == [led, set(zk.states) - led]
    assert sum(1 for tp in zk.states if zk.states[tp].leader_epoch == 1) == n
    batches = [e for e in effects if isinstance(e, SendRequests)]
    assert len(batches) == 2
    for batch in batches:
        assert len({(type(r.request), r.broker_id) for r in batch.requests}) == len(
            batch.requests)
    first = {r.broker_id: partition_states(r.request) for r in batches[0].requests
             if isinstance(r.request, LeaderAndIsrRequest)}
    assert set(first) == {2, 3} and all(set(s) == led for s in first.values())
    lai = leader_and_isr_states(effects)
    assert set(lai) == {2, 3}
    assert all(len(states) == n for states in lai.values())
    assert len(update_metadata(effects)) == 2
    assert all(tp.topic == "big" and zk.states[tp].leader in (2, 3) for tp in zk.states)
    assert all(1 not in zk.states[tp].isr for tp in zk.states)


def test_a_full_leader_and_isr_names_every_partition_of_its_broker() -> None:
    """A broker deletes the logs a FULL LeaderAndIsr does not name (stray partitions), so
    a FULL one must name all its replicas.  At failover with a dead broker, the partitions
    it led get their new leaders in a first batch and the others (it only followed) their
    ISR shrink in a later one: the first request to a surviving broker that hosts both
    kinds is then not complete and must go out as INCREMENTAL."""
    led, followed = TopicPartition("t", 0), TopicPartition("t", 1)
    _, zk = started(live=(1, 3), topics={"t": {0: [1, 3], 1: [3, 1]}})
    core = new_core()
    effects = drive(core, zk, zk.startup_event(brokers(3), epoch=2))
    requests = [r.request for e in effects if isinstance(e, SendRequests)
                for r in e.requests if r.broker_id == 3
                and isinstance(r.request, LeaderAndIsrRequest)]
    assert requests, "no LeaderAndIsr to broker 3"
    named: set[TopicPartition] = set()
    for request in requests:
        partitions = set(partition_states(request))
        if request.type_ == LEADER_AND_ISR_FULL:
            assert {led, followed} <= partitions, f"FULL LeaderAndIsr names only {partitions}"
        named |= partitions
    assert {led, followed} <= named

"""AlterPartition, controlled shutdown, ElectLeaders, admin and automatic preferred election."""

from __future__ import annotations

import pytest

from weir.common import TopicPartition
from weir.controller.effects import (
    FlushRequests,
    Reply,
    SendRequests,
    ZkDeletePreferredElection,
    ZkOperation,
    ZkReadPartitionStates,
    ZkUpdatePartitionStates,
)
from weir.controller.events import (
    AlterPartition,
    AutoLeaderRebalance,
    ControlledShutdown,
    ElectionType,
    ElectLeaders,
    IsrChange,
    PreferredReplicaElection,
)
from weir.controller.states import PartitionReplica, ReplicaState
from weir.coordination.codecs import LeaderIsr
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import LeaderAndIsrRequest, StopReplicaRequest

from .helpers import (
    brokers,
    change_brokers,
    drive,
    leader_and_isr,
    leader_and_isr_states,
    partition_states,
    started,
    stop_replica,
    update_metadata,
    zk_ops,
)

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
E = ErrorCode


def reply(effects):
    (found,) = [e for e in effects if isinstance(e, Reply)]
    return found.value


def alter(core, zk, broker_id, changes, broker_epoch=None):
    topic_id = zk.topics["t"].topic_id
    event = AlterPartition(broker_id, 100 + broker_id if broker_epoch is None else broker_epoch,
                           {topic_id: changes}, reply_to="r")
    effects = drive(core, zk, event)
    value = reply(effects)
    return (value if isinstance(value, ErrorCode) else value[topic_id]), effects


def change(zk, tp, isr, **kw):
    cur = zk.states[tp]
    base = {"leader_epoch": cur.leader_epoch, "partition_epoch": cur.zk_version,
            "new_isr": tuple(isr), "isr_broker_epochs": tuple(100 + b for b in isr)}
    base.update(kw)
    return IsrChange(**base)


# -- AlterPartition ---------------------------------------------------------------------------

def test_alter_partition_shrinks_isr_in_one_multi_and_informs_brokers() -> None:
    core, zk = started(topics={"t": {0: [1, 2, 3], 1: [1, 3, 2]}})
    result, effects = alter(core, zk, 1, {0: change(zk, T0, [1, 2]), 1: change(zk, T1, [1])})
    assert len(zk_ops(effects, ZkUpdatePartitionStates)) == 1
    assert isinstance(result[0], LeaderIsr) and result[0].isr == [1, 2]
    assert result[0].zk_version == zk.states[T0].zk_version == 1
    assert result[0].leader_epoch == 0 and zk.states[T1].isr == [1]
    assert core.ctx.leadership[T0].isr == [1, 2]
    um = update_metadata(effects)
    assert set(um) == {1, 2, 3} and set(partition_states(um[2])) == {T0, T1}
    assert not leader_and_isr(effects)


def test_alter_partition_validation_errors() -> None:
    core, zk = started(topics={"t": {0: [1, 2, 3], 1: [2, 1, 3]}})
    cases = {
        0: change(zk, T0, [1, 2], leader_epoch=5),
    }
    result, _ = alter(core, zk, 1, cases)
    assert result[0] is E.fenced_leader_epoch
    result, _ = alter(core, zk, 1, {1: change(zk, T1, [1, 2])})
    assert result[1] is E.not_leader_or_follower
    result, _ = alter(core, zk, 1, {0: change(zk, T0, [1, 2], partition_epoch=9)})
    assert result[0] is E.invalid_update_version
    result, _ = alter(core, zk, 1, {0: change(zk, T0, [1, 4], isr_broker_epochs=(101, -1))})
    assert result[0] is E.ineligible_replica
    result, _ = alter(core, zk, 1, {0: change(zk, T0, [1, 2], isr_broker_epochs=(101, 55))})
    assert result[0] is E.ineligible_replica
    result, _ = alter(core, zk, 1, {7: change(zk, T0, [1])})
    assert result[7] is E.unknown_topic_or_partition
    assert alter(core, zk, 1, {0: change(zk, T0, [1])}, broker_epoch=3)[0] is E.stale_broker_epoch
    assert zk.states[T0].isr == [1, 2, 3]


def test_alter_partition_rejects_dead_member_and_accepts_idempotent_retry() -> None:
    core, zk = started(topics={"t": {0: [1, 2, 3]}})
    result, _ = alter(core, zk, 1, {0: change(zk, T0, [1, 2])})
    stale = change(zk, T0, [1, 2], partition_epoch=0)  # a retry of the write that succeeded
    again, effects = alter(core, zk, 1, {0: stale})
    assert again[0] == result[0] and not zk_ops(effects, ZkUpdatePartitionStates)
    change_brokers(core, zk, brokers(1, 2))
    result, _ = alter(core, zk, 1, {0: change(zk, T0, [1, 2, 3])})
    assert result[0] is E.ineligible_replica


def test_alter_partition_lost_race_answers_invalid_update_version_and_refreshes() -> None:
    core, zk = started(topics={"t": {0: [1, 2, 3]}})
    request = change(zk, T0, [1, 2])
    zk.bump(T0)
    result, _ = alter(core, zk, 1, {0: request})
    assert result[0] is E.invalid_update_version
    assert core.ctx.leadership[T0].zk_version == zk.states[T0].zk_version
    result, _ = alter(core, zk, 1, {0: change(zk, T0, [1, 2])})
    assert isinstance(result[0], LeaderIsr)


def test_unknown_topic_id() -> None:
    import uuid
    core, zk = started(topics={"t": {0: [1, 2, 3]}})
    tid = uuid.uuid4()
    effects = drive(core, zk, AlterPartition(1, 101, {tid: {0: change(zk, T0, [1])}}, "r"))
    assert reply(effects) == {tid: {0: E.unknown_topic_id}}


# -- controlled shutdown ----------------------------------------------------------------------

def test_controlled_shutdown_moves_leaders_and_stops_followers() -> None:
    core, zk = started(topics={"t": {0: [1, 2, 3], 1: [2, 1, 3]}, "single": {0: [1]}})
    effects = drive(core, zk, ControlledShutdown(1, 101, reply_to="r"))
    remaining = reply(effects)
    assert remaining == []
    assert zk.states[T0].leader == 2 and 1 not in zk.states[T0].isr
    assert zk.states[T0].leader_epoch == 1
    assert 1 not in zk.states[T1].isr and zk.states[T1].leader == 2
    assert core.ctx.replica_state(PartitionReplica(T1, 1)) is ReplicaState.OFFLINE
    stops = partition_states(stop_replica(effects)[1])
    assert set(stops) == {T1} and not stops[T1].delete_partition
    assert 1 in core.ctx.shutting_down
    assert leader_and_isr_states(effects)[3][T0].leader == 2
    # Kafka's doControlledShutdown: the new leader of T0 is sent before T1's ISR shrink
    # is written; Weir answers before that write too (docs/control-plane.md).
    writes = [i for i, e in enumerate(effects) if isinstance(e, ZkUpdatePartitionStates)]
    sent = [i for i, e in enumerate(effects) if isinstance(e, SendRequests)]
    assert len(writes) == 2 and writes[0] < sent[0] < writes[1]
    first = {r.broker_id: partition_states(r.request) for r in effects[sent[0]].requests
             if isinstance(r.request, LeaderAndIsrRequest)}
    assert first[2][T0].leader == 2 and T1 not in first[2]
    # The shutting-down broker's requests wait for the last batch (with its StopReplica).
    assert all(r.broker_id != 1 for r in effects[sent[0]].requests)
    last = [r for r in effects[sent[-1]].requests if r.broker_id == 1]
    assert type(last[0].request).__name__ == "LeaderAndIsrRequest"
    assert partition_states(last[0].request)[T0].leader == 2
    replies = [i for i, e in enumerate(effects) if isinstance(e, Reply)]
    # ... after the new leaders are written, ahead of their requests (same step)
    assert len(replies) == 1 and writes[0] < replies[0] < sent[0] < writes[1]


def test_controlled_shutdown_answers_before_the_follower_isr_shrinks() -> None:
    """The answer (what the broker still leads) leaves with the new leaders' batch, ahead of
    the ISR shrinks: the broker can exit while those are written.  A partition whose
    leader could not move is still in it."""
    core, zk = started(topics={"t": {0: [1, 2], 1: [2, 1]}, "u": {0: [1, 2, 3]}})
    alter(core, zk, 1, {0: change(zk, T0, [1])})  # T0's only ISR member is 1: no new leader
    effects = drive(core, zk, ControlledShutdown(1, 101, reply_to="r"))
    writes = [i for i, e in enumerate(effects) if isinstance(e, ZkUpdatePartitionStates)]
    (answer,) = [i for i, e in enumerate(effects) if isinstance(e, Reply)]
    assert effects[answer].value == [T0]
    shrinks = effects[writes[-1]].states
    assert answer < writes[-1] and set(shrinks) == {T1}
    assert zk.states[T1].isr == [2] and zk.states[TopicPartition("u", 0)].leader == 2


def test_controlled_shutdown_hands_out_the_answer_and_new_leaders_before_the_shrinks() -> None:
    """The step that answers ends in a pause for the shell to write the new leaders'
    requests (:class:`FlushRequests`): the ISR shrinks are computed only when it resumes."""
    core, zk = started(topics={"t": {0: [1, 2, 3], 1: [2, 1, 3], 2: [3, 1, 2]}})
    steps = [core.handle(ControlledShutdown(1, 101, reply_to="r"), 0)]
    while steps[-1] and isinstance(steps[-1][-1], ZkOperation):
        steps.append(core.complete(zk.execute(steps[-1][-1]), 0))
    (answering,) = [i for i, step in enumerate(steps) if any(isinstance(e, Reply) for e in step)]
    step = steps[answering]
    assert isinstance(step[-1], FlushRequests)
    (sent,) = [e for e in step if isinstance(e, SendRequests)]
    assert {r.broker_id for r in sent.requests} == {2, 3}
    assert leader_and_isr_states(list(step))[2][T0].leader == 2
    # resumed: the shrinks of the partitions broker 1 follows, in one write
    shrinks = steps[answering + 1][-1]
    assert isinstance(shrinks, ZkUpdatePartitionStates)
    assert set(shrinks.states) == {T1, TopicPartition("t", 2)}
    assert zk.execute(FlushRequests()) is None and not core.awaiting_result


def test_controlled_shutdown_writes_and_sends_in_batches() -> None:
    """With ``controlled_shutdown_batch`` 2: the 5 led partitions are elected in 3 fenced
    writes of at most 2 (2, 2, 1), the 4 followed ones shrunk in one write; each election
    batch's LeaderAndIsr/UpdateMetadata leaves right after its write (before the next),
    naming only that batch; the answer follows the last election write; the shutting-down
    broker's requests all wait for the last batch."""
    led = {p: [1, 2, 3] for p in range(5)}
    followed = {p: [2, 1, 3] for p in range(5, 9)}
    core, zk = started(topics={"t": {**led, **followed}}, controlled_shutdown_batch=2)
    effects = drive(core, zk, ControlledShutdown(1, 101, reply_to="r"))
    assert reply(effects) == []
    writes = [i for i, e in enumerate(effects) if isinstance(e, ZkUpdatePartitionStates)]
    sizes = [sorted(tp.partition for tp in effects[i].states) for i in writes]
    assert sizes == [[0, 1], [2, 3], [4], [5, 6, 7, 8]]
    sent = [i for i, e in enumerate(effects) if isinstance(e, SendRequests)]
    # one send after each write but the last (that one goes with the event's end)
    assert len(sent) == len(writes)
    for write, send in zip(writes, sent, strict=True):
        assert write < send
    for k, (write, send) in enumerate(zip(writes[:-1], sent[:-1], strict=True)):
        assert send < writes[k + 1]
        named = {tp for r in effects[send].requests if isinstance(r.request, LeaderAndIsrRequest)
                 for tp in partition_states(r.request)}
        assert named == set(effects[write].states)
        assert all(r.broker_id != 1 for r in effects[send].requests)
    (answer,) = [i for i, e in enumerate(effects) if isinstance(e, Reply)]
    assert writes[2] < answer < writes[3]
    # The shutting-down broker gets the held LeaderAndIsrs (the elections) first in the
    # last batch, then its StopReplica for the followed partitions.
    last = [r.request for r in effects[sent[-1]].requests if r.broker_id == 1]
    kinds = [type(r).__name__ for r in last]
    assert kinds.index("StopReplicaRequest") > max(
        i for i, k in enumerate(kinds) if k == "LeaderAndIsrRequest")
    moved = [tp for r in last if isinstance(r, LeaderAndIsrRequest)
             for tp in partition_states(r)]
    assert set(moved) == {TopicPartition("t", p) for p in range(5)}
    stopped = {tp for r in last if isinstance(r, StopReplicaRequest)
               for tp, s in partition_states(r).items() if not s.delete_partition}
    assert stopped == {TopicPartition("t", p) for p in range(5, 9)}
    assert all(zk.states[TopicPartition("t", p)].leader == 2 for p in range(5))
    assert all(1 not in zk.states[TopicPartition("t", p)].isr for p in range(9))


def test_controlled_shutdown_pipelines_its_election_writes() -> None:
    """Every election batch is computed before the first write, which names the others
    (``pipelined``); the core then asks for exactly those, in order.  A partition whose
    write failed (its znode changed meanwhile) is re-read and elected again at the end."""
    led = {p: [1, 2, 3] for p in range(5)}
    core, zk = started(topics={"t": {**led, 5: [2, 1, 3]}}, controlled_shutdown_batch=2)
    steps = [core.handle(ControlledShutdown(1, 101, reply_to="r"), 0)]
    while steps[-1] and isinstance(steps[-1][-1], ZkOperation):
        op = steps[-1][-1]
        if isinstance(op, ZkUpdatePartitionStates) and TopicPartition("t", 3) in op.states \
                and len(op.states) == 2:
            zk.bump(TopicPartition("t", 3), isr=[1, 3, 2])  # someone wrote it meanwhile
        steps.append(core.complete(zk.execute(op), 0))
    ops = [step[-1] for step in steps if step and isinstance(step[-1], ZkOperation)]
    writes = [op for op in ops if isinstance(op, ZkUpdatePartitionStates)]
    first, second, third = writes[:3]
    assert first.pipelined == (second.states, third.states)
    assert second.pipelined == (third.states,) and third.pipelined == ()
    assert [sorted(tp.partition for tp in w.states) for w in writes[:3]] == [[0, 1], [2, 3], [4]]
    # the conflict: re-read, elected again from the fresh state, before the shrinks
    reads = [i for i, op in enumerate(ops) if isinstance(op, ZkReadPartitionStates)]
    assert reads and set(ops[reads[0]].partitions) == {TopicPartition("t", 3)}
    again = ops[reads[0] + 1]
    assert isinstance(again, ZkUpdatePartitionStates)
    assert set(again.states) == {TopicPartition("t", 3)}
    assert again.states[TopicPartition("t", 3)].isr == [3, 2]
    assert all(zk.states[TopicPartition("t", p)].leader != 1 for p in range(5))
    assert reply([e for step in steps for e in step]) == []


def test_controlled_shutdown_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        started(controlled_shutdown_batch=0)


def test_controlled_shutdown_reports_partitions_it_still_leads() -> None:
    core, zk = started(topics={"t": {0: [1, 2]}})
    alter(core, zk, 1, {0: change(zk, T0, [1])})
    remaining = reply(drive(core, zk, ControlledShutdown(1, 101, reply_to="r")))
    assert remaining == [T0]


def test_controlled_shutdown_stale_epoch_and_no_new_leader_on_shutting_down_broker() -> None:
    core, zk = started(topics={"t": {0: [1, 2, 3]}})
    assert reply(drive(core, zk, ControlledShutdown(2, 5, reply_to="r"))) is \
        E.stale_broker_epoch
    assert reply(drive(core, zk, ControlledShutdown(2, 102, reply_to="r"))) == []
    change_brokers(core, zk, brokers(2, 3))  # leader 1 dies: 2 is shutting down
    assert zk.states[T0].leader == 3


def bounce_broker_1(core, zk) -> None:
    """Broker 1 dies and returns; the leaders then take it back into their ISRs."""
    change_brokers(core, zk, brokers(2, 3))
    change_brokers(core, zk, brokers(1, 2, 3))
    for tp, li in list(zk.states.items()):
        topic_id = zk.topics[tp.topic].topic_id
        event = AlterPartition(li.leader, 100 + li.leader, {topic_id: {
            tp.partition: change(zk, tp, [*li.isr, 1] if 1 not in li.isr else li.isr)}}, "r")
        drive(core, zk, event)


# -- elections --------------------------------------------------------------------------------

def elect(core, zk, kind, partitions):
    return reply(drive(core, zk, ElectLeaders(kind, partitions, reply_to="r")))


def test_preferred_election_outcomes() -> None:
    core, zk = started(topics={"t": {0: [1, 2, 3], 1: [2, 3, 1]}})
    bounce_broker_1(core, zk)
    assert zk.states[T0].leader == 2
    out = elect(core, zk, ElectionType.PREFERRED, None)
    assert out[T0] == (E.none, None) and out[T1][0] is E.election_not_needed
    assert zk.states[T0].leader == 1
    out = elect(core, zk, ElectionType.PREFERRED, frozenset({TopicPartition("x", 0)}))
    assert out[TopicPartition("x", 0)][0] is E.unknown_topic_or_partition
    change_brokers(core, zk, brokers(2, 3))
    out = elect(core, zk, ElectionType.PREFERRED, frozenset({T0}))
    assert out[T0][0] is E.preferred_leader_not_available


def test_unclean_election_on_request() -> None:
    core, zk = started(topics={"t": {0: [1, 2]}})
    alter(core, zk, 1, {0: change(zk, T0, [1])})
    change_brokers(core, zk, brokers(2, 3))
    assert zk.states[T0].leader == -1
    assert elect(core, zk, ElectionType.UNCLEAN, frozenset({T0}))[T0] == (E.none, None)
    assert zk.states[T0].leader == 2 and zk.states[T0].isr == [2]
    assert elect(core, zk, ElectionType.UNCLEAN, frozenset({T0}))[T0][0] is \
        E.election_not_needed
    change_brokers(core, zk, brokers(3))
    assert elect(core, zk, ElectionType.UNCLEAN, frozenset({T0}))[T0][0] is \
        E.eligible_leaders_not_available


def test_admin_preferred_election_deletes_znode() -> None:
    core, zk = started(topics={"t": {0: [1, 2, 3]}})
    bounce_broker_1(core, zk)
    effects = drive(core, zk, PreferredReplicaElection(frozenset({T0})))
    assert zk.states[T0].leader == 1
    assert zk_ops(effects, ZkDeletePreferredElection)


def test_auto_rebalance_moves_back_only_above_threshold() -> None:
    topics = {"t": {p: [1, 2, 3] if p % 3 == 0 else [2, 3, 1] if p % 3 == 1 else [3, 1, 2]
                    for p in range(30)}}
    core, zk = started(topics=topics, leader_imbalance_per_broker_percentage=10)
    bounce_broker_1(core, zk)
    moved = [tp for tp, li in zk.states.items() if li.leader != core.ctx.replicas(tp)[0]]
    assert len(moved) == 10
    drive(core, zk, AutoLeaderRebalance())
    assert all(li.leader == core.ctx.replicas(tp)[0] for tp, li in zk.states.items())
    disabled, zk2 = started(topics=topics, auto_leader_rebalance_enable=False)
    bounce_broker_1(disabled, zk2)
    drive(disabled, zk2, AutoLeaderRebalance())
    assert any(li.leader != disabled.ctx.replicas(tp)[0] for tp, li in zk2.states.items())


def test_auto_rebalance_below_threshold_does_nothing() -> None:
    topics = {"t": {p: [1, 2, 3] if p else [2, 1, 3] for p in range(20)}}
    core, zk = started(topics=topics, leader_imbalance_per_broker_percentage=10)
    alter(core, zk, 1, {1: change(zk, TopicPartition("t", 1), [1, 2, 3])})  # no-op
    before = dict(zk.states)
    drive(core, zk, AutoLeaderRebalance())
    assert zk.states == before

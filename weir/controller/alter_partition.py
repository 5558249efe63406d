"""AlterPartition (KIP-497) and controlled shutdown: the controller side of two broker RPCs.

Both are sans-I/O operations of the core: they validate against the context, yield the
ZooKeeper writes they need and return the value the RPC is answered with.

AlterPartition replaces ZooKeeper-mode Kafka's old ``/isr_change_notification`` path: the
partition leader proposes a new ISR at its leader epoch and partition epoch (the state
znode's version); the controller checks it, writes every valid partition of the request in
one conditional ZooKeeper multi and tells all brokers with UpdateMetadata.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, TypeVar

from weir.common import TopicPartition
from weir.controller.context import ControllerContext
from weir.controller.effects import (
    FlushRequests,
    Log,
    Reply,
    ZkReadPartitionStates,
    ZkUpdatePartitionStates,
)
from weir.controller.events import IsrChange
from weir.controller.partition_state_machine import ElectionKind, PartitionStateMachine
from weir.controller.replica_state_machine import ReplicaStateMachine
from weir.controller.scope import EventScope, ZkSteps
from weir.controller.states import PartitionReplica, PartitionState, ReplicaState
from weir.coordination.codecs import LeaderIsr
from weir.protocol.errors import ErrorCode

__all__ = ["UNKNOWN_BROKER_EPOCH", "AlterPartitionResult", "IsrManager", "PartitionResults"]

T = TypeVar("T")
UNKNOWN_BROKER_EPOCH = -1
PartitionResults = dict[uuid.UUID, dict[int, LeaderIsr | ErrorCode]]
AlterPartitionResult = PartitionResults | ErrorCode
"""Per-partition new state or error (by topic id and partition), or a request-level error."""


class IsrManager:
    """AlterPartition and controlled shutdown, on the core's context and state machines."""

    def __init__(self, ctx: ControllerContext, partitions: PartitionStateMachine,
                 replicas: ReplicaStateMachine, batch: int = 1000) -> None:
        self._ctx = ctx
        self._partitions = partitions
        self._replicas = replicas
        if batch < 1:
            raise ValueError(f"controlled shutdown batch must be at least 1, not {batch}")
        self._batch = batch

    # -- AlterPartition --------------------------------------------------------------------

    def alter_partition(self, scope: EventScope, broker_id: int, broker_epoch: int,
                        topics: Mapping[uuid.UUID, Mapping[int, IsrChange]]
                        ) -> ZkSteps[AlterPartitionResult]:
        """Validate and apply ISR changes proposed by ``broker_id`` (see module docstring)."""
        ctx = self._ctx
        if broker_id not in ctx.live_brokers or (
                broker_epoch != UNKNOWN_BROKER_EPOCH
                and broker_epoch != ctx.broker_epoch(broker_id)):
            scope.log(Log.info(f"AlterPartition from broker {broker_id} with stale broker "
                               f"epoch {broker_epoch} (current {ctx.broker_epoch(broker_id)})"))
            return ErrorCode.stale_broker_epoch
        names = {topic_id: name for name, topic_id in ctx.topic_ids.items()}
        out: dict[TopicPartition, LeaderIsr | ErrorCode] = {}
        changes: dict[TopicPartition, IsrChange] = {}
        for topic_id, parts in topics.items():
            if topic_id in names:
                changes.update((TopicPartition(names[topic_id], p), c) for p, c in parts.items())
        writes: dict[TopicPartition, LeaderIsr] = {}
        for tp, change in changes.items():
            verdict = self._check(broker_id, tp, change)
            if isinstance(verdict, ErrorCode):
                scope.log(Log.info(f"AlterPartition of {tp} from broker {broker_id} rejected: "
                                   f"{verdict.name}"))
                out[tp] = verdict
            elif verdict is ctx.leadership.get(tp):
                out[tp] = verdict  # already the current state: an idempotent retry
            else:
                writes[tp] = verdict
        if writes:
            yield from self._write_isrs(scope, broker_id, writes, out)
        return {
            topic_id: {p: out.get(TopicPartition(names[topic_id], p), ErrorCode.unknown_topic_id)
                       if topic_id in names else ErrorCode.unknown_topic_id for p in parts}
            for topic_id, parts in topics.items()
        }

    def _write_isrs(self, scope: EventScope, broker_id: int,
                    writes: dict[TopicPartition, LeaderIsr],
                    out: dict[TopicPartition, LeaderIsr | ErrorCode]) -> ZkSteps[None]:
        """One conditional multi for all partitions; UpdateMetadata for those written."""
        ctx = self._ctx
        results = yield ZkUpdatePartitionStates(writes, ctx.epoch_zk_version)
        stale = []
        for tp in writes:
            res = results.get(tp)
            if isinstance(res, LeaderIsr):
                ctx.leadership[tp] = res
                out[tp] = res
                scope.log(Log.info(f"ISR of {tp} changed to {res.isr} (partition epoch "
                                   f"{res.zk_version}) at the request of broker {broker_id}"))
            else:
                out[tp] = ErrorCode.invalid_update_version
                stale.append(tp)
        if stale:  # someone else wrote: refresh the cache so the next attempt can succeed
            fresh = yield ZkReadPartitionStates(frozenset(stale))
            ctx.leadership.update((tp, li) for tp, li in fresh.items() if tp in ctx.leadership)
        changed = [tp for tp in writes if isinstance(out[tp], LeaderIsr)]
        if changed:
            scope.batch.add_update_metadata(ctx.live_brokers, changed)

    def _check(self, broker_id: int, tp: TopicPartition,
               change: IsrChange) -> LeaderIsr | ErrorCode:
        """The state to write, the current one (nothing to do) or the partition's error."""
        ctx = self._ctx
        current = ctx.leadership.get(tp)
        assigned = ctx.replicas(tp)
        if current is None or not assigned:
            return ErrorCode.unknown_topic_or_partition
        if change.leader_epoch != current.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if current.leader != broker_id:
            return ErrorCode.not_leader_or_follower
        new_isr = list(change.new_isr)
        if (new_isr == list(current.isr)
                and change.leader_recovery_state == current.leader_recovery_state):
            return current
        if change.partition_epoch != current.zk_version:
            return ErrorCode.invalid_update_version
        if broker_id not in new_isr or len(set(new_isr)) != len(new_isr):
            return ErrorCode.invalid_request
        if not set(new_isr) <= set(assigned):
            return ErrorCode.ineligible_replica
        epochs = change.isr_broker_epochs or (UNKNOWN_BROKER_EPOCH,) * len(new_isr)
        for member, epoch in zip(new_isr, epochs, strict=False):
            if member not in ctx.live_brokers:
                return ErrorCode.ineligible_replica
            if epoch != UNKNOWN_BROKER_EPOCH and epoch != ctx.broker_epoch(member):
                return ErrorCode.ineligible_replica
            if member in ctx.shutting_down and member not in current.isr:
                return ErrorCode.ineligible_replica
        return LeaderIsr(leader=current.leader, leader_epoch=current.leader_epoch,
                         isr=new_isr, controller_epoch=ctx.controller_epoch,
                         zk_version=current.zk_version,
                         leader_recovery_state=change.leader_recovery_state)

    # -- controlled shutdown ---------------------------------------------------------------

    def controlled_shutdown(self, scope: EventScope, broker_id: int, broker_epoch: int,
                            reply_to: Any) -> ZkSteps[None]:
        """Move leadership and follower replicas off ``broker_id`` (Kafka's shutdownBroker).

        Answers ``reply_to`` (a :class:`Reply` effect) with the replicated partitions it
        still leads (the broker retries until none are left), or ``stale_broker_epoch`` /
        ``broker_not_available``: once the new leaders are written and their requests
        queued, before the ISR shrinks of the partitions it follows (see below).
        """
        ctx = self._ctx
        if broker_id not in ctx.live_brokers:
            _answer(scope, reply_to, ErrorCode.broker_not_available)
            return
        if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < ctx.broker_epoch(broker_id):
            scope.log(Log.info(f"Controlled shutdown of broker {broker_id} with stale epoch "
                               f"{broker_epoch}"))
            _answer(scope, reply_to, ErrorCode.stale_broker_epoch)
            return
        ctx.shutting_down.add(broker_id)
        scope.log(Log.info(f"Broker {broker_id} is shutting down; shutting down brokers "
                           f"{sorted(ctx.shutting_down)}"))
        replicated = [
            tp for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.replicas(tp)) > 1 and tp in ctx.leadership
            and not ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        led = [tp for tp in replicated if ctx.leadership[tp].leader == broker_id
               and ctx.partition_state(tp) is PartitionState.ONLINE]
        followers = [PartitionReplica(tp, broker_id) for tp in replicated
                     if ctx.leadership[tp].leader != broker_id]
        # Kafka's doControlledShutdown elects every led partition in one state machine call
        # (one pipelined ZooKeeper batch), then sends.  Here the elections are written in
        # batches of at most ``batch`` partitions (one fenced multi each), all computed
        # first and all in flight at once (PartitionStateMachine.elect_in_batches), and
        # each batch's LeaderAndIsr/UpdateMetadata leaves as soon as its write lands: the
        # survivors apply the first new leaders, and clients find them, while the later
        # batches are still being written.  The shutting-down broker's part is held back
        # (below).
        yield from self._partitions.elect_in_batches(
            scope, _batches(led, self._batch), ElectionKind.CONTROLLED_SHUTDOWN,
            between=lambda: scope.send_now(hold=ctx.shutting_down))
        # The follower step below changes no leader: what the broker still leads is known.
        remaining = sorted(tp for tp in replicated
                           if tp in ctx.leadership and ctx.leadership[tp].leader == broker_id)
        # Deviation from KafkaController.doControlledShutdown, which answers after the
        # follower ISR shrinks are written too: the answer goes now, so the broker's exit
        # does not wait for ~2/3 of the event's ZooKeeper writes.  No acknowledged write
        # can be lost by it: the broker still in an ISR below stops fetching, so until the
        # leader learns the shrunk ISR its high watermark cannot pass the broker's log end
        # (nothing past it is acknowledged with acks=all), the clean shutdown flushes that
        # log, and a broker that is not registered is never elected (docs/control-plane.md).
        # It also goes ahead of the last new leaders' requests (queued in the same step,
        # their states already in ZooKeeper): the shell hands it on before the channels'
        # senders encode those.
        _answer(scope, reply_to, remaining)
        if followers:
            # Kafka's doControlledShutdown: the new leaders' LeaderAndIsr/UpdateMetadata go
            # out (the partition state machine's batch) before the ISR shrinks of the
            # partitions it follows are written.  The shutting-down broker's part waits for
            # the event's last batch, next to its StopReplica: it stops its fetchers once
            # answered, and a follower made early would truncate every partition it led in
            # the meantime.
            scope.send_now(hold=ctx.shutting_down)
            # The answer and the last new leaders' requests leave before the shrinks are
            # computed and written: on the controller's broker that work (the core's, then
            # the ZooKeeper client's encoding) would otherwise hold the event loop, and the
            # GIL, while these wait for it (a third of an event of 6,667 shrinks).
            yield FlushRequests()
        # The ISR shrinks stay one write (the client pipelines its multis): batched like
        # the elections they cost a ZooKeeper round trip (and a log sync) per batch, ~2x
        # the wall time of the whole at 6,667 partitions, and nothing waits for them the
        # way clients wait for new leaders; their large LeaderAndIsr is applied by the
        # survivors in slices, answering Metadata meanwhile
        # (ReplicaManager.apply_leader_and_isr_sliced).
        yield from self._replicas.handle_state_changes(scope, followers, ReplicaState.OFFLINE)
        scope.batch.add_update_metadata(ctx.live_brokers)


def _batches(items: list[T], size: int) -> list[list[T]]:
    """``items`` in consecutive batches of at most ``size``, as even as that allows (one
    empty batch for no items: the state machines still see the call)."""
    if not items:
        return [items]
    count = -(-len(items) // size)
    step = -(-len(items) // count)
    return [items[i:i + step] for i in range(0, len(items), step)]


def _answer(scope: EventScope, reply_to: Any, value: Any) -> None:
    if reply_to is not None:
        scope.effects.append(Reply(reply_to, value))

"""The replica state machine (seven states, see :class:`~weir.controller.states.ReplicaState`).

Actions (added to the event's request batch):

* -> NewReplica: LeaderAndIsr (``is_new``) with the current leader/ISR, if there is one;
  a replica that is the partition's leader can never become NewReplica.
* -> OnlineReplica: from New, make sure it is in the assignment; otherwise LeaderAndIsr with
  the current leader/ISR, if there is one.
* -> OfflineReplica: StopReplica (no delete); the replicas are removed from their
  partitions' ISRs by conditional writes (a removed leader leaves the leader at -1 for the
  partition state machine to replace; the ISR never becomes empty), and the remaining
  replicas get LeaderAndIsr, every live broker UpdateMetadata.
* -> ReplicaDeletionStarted: StopReplica with delete.
* -> ReplicaDeletionSuccessful / ReplicaDeletionIneligible: state only.
* -> NonExistentReplica: the replica leaves the assignment and the state table.
"""

from __future__ import annotations

from collections.abc import Iterable

from weir.common import TopicPartition
from weir.controller.context import NO_LEADER, ControllerContext
from weir.controller.effects import Log
from weir.controller.scope import EventScope, ZkSteps, update_leader_isr
from weir.controller.settings import ControllerSettings
from weir.controller.states import (
    IllegalStateTransition,
    PartitionReplica,
    ReplicaState,
    check_replica_transition,
)
from weir.coordination.codecs import LeaderIsr

__all__ = ["ReplicaStateMachine"]

R = ReplicaState
_LOG_EACH_UP_TO = 100
"""Larger batches of replica transitions are logged as one summary line."""


class ReplicaStateMachine:
    """Moves replicas between states; see the module docstring."""

    def __init__(self, ctx: ControllerContext, settings: ControllerSettings) -> None:
        self._ctx = ctx
        self._settings = settings
        self._quiet = False

    def initialize(self) -> None:
        """Live replicas start Online, the others ReplicaDeletionIneligible (failover)."""
        ctx = self._ctx
        for replica in ctx.all_replicas():
            online = ctx.is_replica_online(replica.replica)
            ctx.replica_states[replica] = R.ONLINE if online else R.DELETION_INELIGIBLE

    def startup(self, scope: EventScope) -> ZkSteps[None]:
        """Move every replica to Online or Offline, sending LeaderAndIsr to all (failover)."""
        ctx = self._ctx
        replicas = list(ctx.all_replicas())
        online = [r for r in replicas if ctx.is_replica_online(r.replica)]
        offline = [r for r in replicas if not ctx.is_replica_online(r.replica)]
        yield from self.handle_state_changes(scope, online, R.ONLINE)
        yield from self.handle_state_changes(scope, offline, R.OFFLINE)

    def handle_state_changes(self, scope: EventScope, replicas: Iterable[PartitionReplica],
                             target: ReplicaState) -> ZkSteps[None]:
        """Move ``replicas`` to ``target``; invalid ones are logged and skipped."""
        valid = self._valid(scope, replicas, target)
        if not valid:
            return
        self._quiet = len(valid) > _LOG_EACH_UP_TO
        if self._quiet:
            scope.log(Log.info(f"{len(valid)} replicas move to {target}"))
        if target is R.OFFLINE:
            yield from self._to_offline(scope, valid)
            return
        handler = {
            R.NEW: self._to_new,
            R.ONLINE: self._to_online,
            R.DELETION_STARTED: self._to_deletion_started,
            R.DELETION_SUCCESSFUL: self._set_state,
            R.DELETION_INELIGIBLE: self._set_state,
            R.NON_EXISTENT: self._to_non_existent,
        }[target]
        for replica in valid:
            handler(scope, replica, target)

    def _valid(self, scope: EventScope, replicas: Iterable[PartitionReplica],
               target: ReplicaState) -> list[PartitionReplica]:
        valid = []
        for replica in replicas:
            try:
                check_replica_transition(replica, self._ctx.replica_state(replica), target)
            except IllegalStateTransition as exc:
                scope.log(Log.error(f"Controller {self._settings.broker_id} epoch "
                                    f"{self._ctx.controller_epoch}: {exc}"))
                continue
            valid.append(replica)
        return valid

    def _set_state(self, scope: EventScope, replica: PartitionReplica,
                   target: ReplicaState) -> None:
        states = self._ctx.replica_states
        if not self._quiet:
            current = states.get(replica, R.NON_EXISTENT)
            scope.log(Log.info(f"Replica {replica} state changed from {current} to {target}"))
        states[replica] = target

    def _to_new(self, scope: EventScope, replica: PartitionReplica,
                target: ReplicaState) -> None:
        ctx = self._ctx
        tp = replica.partition
        leader_isr = ctx.leadership.get(tp)
        if leader_isr is not None:
            if leader_isr.leader == replica.replica:
                scope.log(Log.error(f"Replica {replica} cannot become NewReplica: "
                                    "it is the partition's leader"))
                return
            scope.batch.add_leader_and_isr([replica.replica], tp, leader_isr,
                                           ctx.replicas(tp), is_new=True)
        self._set_state(scope, replica, target)

    def _to_online(self, scope: EventScope, replica: PartitionReplica,
                   target: ReplicaState) -> None:
        ctx = self._ctx
        tp = replica.partition
        if ctx.replica_state(replica) is R.NEW:
            assigned = ctx.replicas(tp)
            if replica.replica not in assigned:
                ctx.set_replicas(tp, (*assigned, replica.replica))
        else:
            leader_isr = ctx.leadership.get(tp)
            if leader_isr is not None:
                scope.batch.add_leader_and_isr([replica.replica], tp, leader_isr,
                                               ctx.replicas(tp))
        self._set_state(scope, replica, target)

    def _to_deletion_started(self, scope: EventScope, replica: PartitionReplica,
                             target: ReplicaState) -> None:
        self._set_state(scope, replica, target)
        scope.batch.add_stop_replica([replica.replica], replica.partition, delete=True)

    def _to_non_existent(self, scope: EventScope, replica: PartitionReplica,
                         target: ReplicaState) -> None:
        ctx = self._ctx
        tp = replica.partition
        ctx.set_replicas(tp, [r for r in ctx.replicas(tp) if r != replica.replica])
        scope.log(Log.info(f"Replica {replica} state changed from "
                           f"{ctx.replica_state(replica)} to {target}"))
        ctx.replica_states.pop(replica, None)

    # -- -> OfflineReplica -----------------------------------------------------------------

    def _to_offline(self, scope: EventScope, replicas: list[PartitionReplica]) -> ZkSteps[None]:
        ctx = self._ctx
        removed: dict[TopicPartition, set[int]] = {}
        for replica in replicas:
            scope.batch.add_stop_replica([replica.replica], replica.partition, delete=False)
            tp = replica.partition
            if tp in ctx.leadership and not ctx.is_topic_queued_for_deletion(tp.topic):
                removed.setdefault(tp, set()).add(replica.replica)
            else:
                scope.batch.add_update_metadata(ctx.live_brokers, [tp])

        def compute(tp: TopicPartition, current: LeaderIsr) -> LeaderIsr | None:
            gone = removed[tp]
            if not gone & set(current.isr) and current.leader not in gone:
                return None
            isr = [r for r in current.isr if r not in gone] or list(current.isr[-1:])
            leader = NO_LEADER if current.leader in gone else current.leader
            return LeaderIsr(leader=leader, leader_epoch=current.leader_epoch + 1, isr=isr,
                             controller_epoch=ctx.controller_epoch,
                             zk_version=current.zk_version)

        written = yield from update_leader_isr(ctx, scope, list(removed), compute,
                                               self._settings.max_zk_update_attempts)
        for tp, leader_isr in written.items():
            recipients = [r for r in ctx.replicas(tp) if r not in removed[tp]]
            scope.batch.add_leader_and_isr(recipients, tp, leader_isr, ctx.replicas(tp))
        for tp in removed:
            if tp not in written:
                scope.batch.add_update_metadata(ctx.live_brokers, [tp])
        for replica in replicas:
            self._set_state(scope, replica, R.OFFLINE)

"""The replica state machine (seven states, see :class:`~weir.controller.states.ReplicaState`).

Actions (added to the event's request batch):

* -> NewReplica: LeaderAndIsr (``is_new``) with the current leader/ISR, if there is one;
  a replica that is the partition's leader can never become NewReplica.
* -> OnlineReplica: from New, make sure it is in the assignment; otherwise LeaderAndIsr with
  the current leader/ISR, if there is one.
* -> OfflineReplica: StopReplica (no delete); the replicas are removed from their
  partitions' ISRs by conditional writes (a removed leader leaves the leader at -1 for the
  partition state machine to replace; the ISR never becomes empty), and the remaining
  replicas get LeaderAndIsr, every live broker UpdateMetadata.  With an
  :class:`OfflineElector` (broker failure, controller failover), an Offline partition whose
  leader is removed gets its new leader in that same write instead of -1.
* -> ReplicaDeletionStarted: StopReplica with delete.
* -> ReplicaDeletionSuccessful / ReplicaDeletionIneligible: state only.
* -> NonExistentReplica: the replica leaves the assignment and the state table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from weir.common import TopicPartition
from weir.controller.context import NO_LEADER, ControllerContext
from weir.controller.effects import Log
from weir.controller.scope import EventScope, ZkSteps, update_leader_isr
from weir.controller.settings import ControllerSettings
from weir.controller.states import (
    VALID_PREVIOUS_REPLICA_STATES,
    PartitionReplica,
    ReplicaState,
    split_by_transition,
)
from weir.coordination.codecs import LeaderIsr

__all__ = ["OfflineElector", "ReplicaStateMachine"]

R = ReplicaState
_LOG_EACH_UP_TO = 100
"""Larger batches of replica transitions are logged as one summary line."""


class OfflineElector(Protocol):
    """Elects leaders inside the ISR-removal write (the partition state machine)."""

    def elect_offline(self, scope: EventScope, tp: TopicPartition, current: LeaderIsr,
                      proposed: LeaderIsr) -> tuple[LeaderIsr, tuple[int, ...]] | None: ...

    def record_election(self, scope: EventScope, tp: TopicPartition, written: LeaderIsr,
                        recipients: Sequence[int], log: bool = True) -> None: ...


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

    def startup(self, scope: EventScope, elector: OfflineElector | None = None
                ) -> ZkSteps[None]:
        """Move every replica to Online or Offline, sending LeaderAndIsr to all (failover).

        With ``elector``, Offline partitions led by a dead broker get their new leader in
        the write that removes the dead replicas from their ISRs.
        """
        ctx = self._ctx
        live = ctx.live_brokers
        online: list[PartitionReplica] = []
        offline: list[PartitionReplica] = []
        for replica in ctx.all_replicas():
            (online if replica.replica in live else offline).append(replica)
        yield from self.handle_state_changes(scope, online, R.ONLINE)
        yield from self.handle_state_changes(scope, offline, R.OFFLINE, elector)

    def handle_state_changes(self, scope: EventScope, replicas: Iterable[PartitionReplica],
                             target: ReplicaState, elector: OfflineElector | None = None
                             ) -> ZkSteps[None]:
        """Move ``replicas`` to ``target``; invalid ones are logged and skipped.

        ``elector`` (target OfflineReplica only) elects the leaders of Offline partitions
        whose leader is among ``replicas`` in the same write (see the module docstring).
        """
        valid = self._valid(scope, replicas, target)
        if not valid:
            return
        self._quiet = len(valid) > _LOG_EACH_UP_TO
        if self._quiet:
            scope.log(Log.info(f"{len(valid)} replicas move to {target}"))
        if target is R.OFFLINE:
            yield from self._to_offline(scope, valid, elector)
            return
        if target is R.ONLINE:
            self._to_online(scope, valid)
            return
        handler = {
            R.NEW: self._to_new,
            R.DELETION_STARTED: self._to_deletion_started,
            R.DELETION_SUCCESSFUL: self._set_state,
            R.DELETION_INELIGIBLE: self._set_state,
            R.NON_EXISTENT: self._to_non_existent,
        }[target]
        for replica in valid:
            handler(scope, replica, target)

    def _valid(self, scope: EventScope, replicas: Iterable[PartitionReplica],
               target: ReplicaState) -> list[PartitionReplica]:
        valid, illegal = split_by_transition(replicas, self._ctx.replica_states, R.NON_EXISTENT, target,
                                             VALID_PREVIOUS_REPLICA_STATES[target])
        for refusal in illegal:
            scope.log(Log.error(f"Controller {self._settings.broker_id} epoch "
                                f"{self._ctx.controller_epoch}: {refusal}"))
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

    def _to_online(self, scope: EventScope, replicas: list[PartitionReplica]) -> None:
        """-> OnlineReplica; consecutive replicas of one partition share one LeaderAndIsr
        call (same content as one call per replica)."""
        ctx = self._ctx
        group: list[int] = []
        group_tp: TopicPartition | None = None

        def flush() -> None:
            if group and group_tp is not None:
                leader_isr = ctx.leadership.get(group_tp)
                if leader_isr is not None:
                    scope.batch.add_leader_and_isr(group, group_tp, leader_isr,
                                                   ctx.replicas(group_tp))
            group.clear()

        for replica in replicas:
            tp = replica.partition
            if tp != group_tp:
                flush()
                group_tp = tp
            if ctx.replica_state(replica) is R.NEW:
                flush()  # the assignment may grow: replicas before see the old one
                assigned = ctx.replicas(tp)
                if replica.replica not in assigned:
                    ctx.set_replicas(tp, (*assigned, replica.replica))
            else:
                group.append(replica.replica)
            self._set_state(scope, replica, R.ONLINE)
        flush()

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

    def _to_offline(self, scope: EventScope, replicas: list[PartitionReplica],
                    elector: OfflineElector | None) -> ZkSteps[None]:
        ctx = self._ctx
        removed: dict[TopicPartition, set[int]] = {}
        unwritten: list[TopicPartition] = []
        live = ctx.live_brokers
        leadership = ctx.leadership
        to_delete = ctx.topics_to_delete
        for replica in replicas:
            tp, broker = replica
            if broker in live:  # the batch drops StopReplica to dead brokers anyway
                scope.batch.add_stop_replica((broker,), tp, delete=False)
            if tp in leadership and tp.topic not in to_delete:
                gone = removed.get(tp)
                if gone is None:
                    removed[tp] = {broker}
                else:
                    gone.add(broker)
            else:
                unwritten.append(tp)
        if unwritten:
            scope.batch.add_update_metadata(ctx.live_brokers, unwritten)
        if elector is None:
            yield from self._remove_from_isrs(scope, list(removed), removed, None)
        else:
            # Kafka's order (onReplicasBecomeOffline): the partitions that lost their leader
            # get their new leaders first and that batch is sent; only then are the other
            # partitions' ISR shrinks written (ReplicaStateMachine's OfflineReplica).
            leaderless = [tp for tp in removed if leadership[tp].leader in removed[tp]]
            if leaderless and len(leaderless) < len(removed):
                chosen = set(leaderless)
                rest = [tp for tp in removed if tp not in chosen]
                yield from self._remove_from_isrs(scope, leaderless, removed, elector)
                # The rest get their LeaderAndIsr with the new leader epoch after their
                # write: a state queued for them already (failover's LeaderAndIsr to every
                # replica) would only be refused as stale, so it waits (the later one wins).
                taken = scope.batch.drop_leader_and_isr(rest)
                scope.send_now()
                written = yield from self._remove_from_isrs(scope, rest, removed, elector)
                if taken:  # a partition whose write failed still gets the state it had
                    scope.batch.restore_leader_and_isr(
                        taken, [tp for tp in rest if tp not in written])
            else:
                yield from self._remove_from_isrs(scope, list(removed), removed, elector)
        if self._quiet:  # logged as one line: set the states in one go
            ctx.replica_states.update(dict.fromkeys(replicas, R.OFFLINE))
            return
        for replica in replicas:
            self._set_state(scope, replica, R.OFFLINE)

    def _remove_from_isrs(self, scope: EventScope, partitions: list[TopicPartition],
                          removed: dict[TopicPartition, set[int]],
                          elector: OfflineElector | None
                          ) -> ZkSteps[dict[TopicPartition, LeaderIsr]]:
        """One write round: ``removed[tp]`` leave the ISR of each of ``partitions``; those
        whose leader is among them get a new leader from ``elector`` in the same write.
        Returns the states written."""
        ctx = self._ctx
        elected: dict[TopicPartition, tuple[int, ...]] = {}

        def compute(tp: TopicPartition, current: LeaderIsr) -> LeaderIsr | None:
            elected.pop(tp, None)  # a retry after a lost race recomputes everything
            gone = removed[tp]
            if current.leader not in gone and gone.isdisjoint(current.isr):
                return None
            isr = [r for r in current.isr if r not in gone] or list(current.isr[-1:])
            leader = NO_LEADER if current.leader in gone else current.leader
            proposed = LeaderIsr(leader=leader, leader_epoch=current.leader_epoch + 1, isr=isr,
                                 controller_epoch=ctx.controller_epoch,
                                 zk_version=current.zk_version)
            if leader == NO_LEADER and elector is not None:
                election = elector.elect_offline(scope, tp, current, proposed)
                if election is not None:
                    proposed, elected[tp] = election
            return proposed

        written = yield from update_leader_isr(ctx, scope, partitions, compute,
                                               self._settings.max_zk_update_attempts)
        if elected and elector is not None:
            quiet = len(elected) > _LOG_EACH_UP_TO
            if quiet:
                scope.log(Log.info(f"{len(elected)} partitions elected a leader "
                                   "(offline election, with the ISR change)"))
            for tp, recipients in elected.items():
                if tp in written:
                    elector.record_election(scope, tp, written[tp], recipients,
                                            log=not quiet)
        for tp, leader_isr in written.items():
            if tp not in elected:
                gone = removed[tp]
                assigned = ctx.replicas(tp)
                recipients = [r for r in assigned if r not in gone]
                scope.batch.add_leader_and_isr(recipients, tp, leader_isr, assigned)
        not_written = [tp for tp in partitions if tp not in written]
        if not_written:
            scope.batch.add_update_metadata(ctx.live_brokers, not_written)
        return written

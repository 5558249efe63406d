"""Partition reassignment (Kafka's onPartitionReassignment, KIP-455), a sans-I/O operation.

With ORS the origin and TRS the target replicas, RS = TRS + ORS (target first), AR = TRS −
ORS (adding) and RR = ORS − TRS (removing):

* start: RS, AR, RR are written to the topic znode (``adding_replicas``/``removing_replicas``)
  — this is what lets the next controller resume; replicas no longer in RS (a re-targeted or
  cancelled move) are stopped and deleted, unless they are the whole ISR (then they stay
  as removing replicas: ``_keep_in_sync``).
* phase A, until TRS ⊆ ISR: the leader epoch is bumped and LeaderAndIsr goes to RS; AR →
  NewReplica.  Followers catch up, the leader adds them to the ISR through AlterPartition,
  and that event (or a broker of RS starting again) re-checks the move.
* phase B, once TRS ⊆ ISR: AR → OnlineReplica; RS = TRS in memory; a new leader through the
  reassigned-partition selector if the current one is not in TRS (or is not alive), else a
  leader epoch bump; RR → OfflineReplica (out of the ISR) → deleted (StopReplica with
  delete) → NonExistentReplica; TRS written to the topic znode last; the partition removed
  from ``/admin/reassign_partitions``; UpdateMetadata to every live broker.

Cancelling (a ``None`` target) moves back to ORS the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from weir.common import TopicPartition
from weir.controller.context import ControllerContext, ReplicaAssignment
from weir.controller.effects import Log, ZkSetReassignments, ZkUpdateTopicAssignments
from weir.controller.partition_state_machine import ElectionKind, PartitionStateMachine
from weir.controller.replica_state_machine import ReplicaStateMachine
from weir.controller.scope import EventScope, ZkSteps, update_leader_isr
from weir.controller.settings import ControllerSettings
from weir.controller.states import PartitionReplica, PartitionState, ReplicaState
from weir.coordination.codecs import LeaderIsr, TopicAssignment
from weir.protocol.errors import ErrorCode

__all__ = [
    "ReassignmentManager",
    "ReassignmentOutcome",
    "merge_topic_assignment",
]

R = ReplicaState
ReassignmentOutcome = dict[TopicPartition, tuple[ErrorCode, str | None]]


def merge_topic_assignment(current: TopicAssignment,
                           changes: Mapping[int, ReplicaAssignment]) -> TopicAssignment:
    """``current`` with the replicas/adding/removing of the ``changes`` partitions replaced."""
    partitions = {p: list(r) for p, r in current.partitions.items()}
    adding = {p: list(r) for p, r in current.adding.items()}
    removing = {p: list(r) for p, r in current.removing.items()}
    for index, assignment in changes.items():
        partitions[index] = list(assignment.replicas)
        adding.pop(index, None)
        removing.pop(index, None)
        if assignment.adding:
            adding[index] = list(assignment.adding)
        if assignment.removing:
            removing[index] = list(assignment.removing)
    return TopicAssignment(current.name, current.topic_id, partitions, adding, removing,
                           current.zk_version)


class ReassignmentManager:
    """Starts, advances, completes and cancels reassignments; see the module docstring."""

    def __init__(self, ctx: ControllerContext, partitions: PartitionStateMachine,
                 replicas: ReplicaStateMachine, settings: ControllerSettings) -> None:
        self._ctx = ctx
        self._psm = partitions
        self._rsm = replicas
        self._settings = settings

    # -- entry points ----------------------------------------------------------------------

    def alter(self, scope: EventScope, targets: Mapping[TopicPartition, Sequence[int] | None]
              ) -> ZkSteps[ReassignmentOutcome]:
        """AlterPartitionReassignments: start, re-target or cancel (``None``) moves."""
        ctx = self._ctx
        out: ReassignmentOutcome = {}
        wanted: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in targets.items():
            error = self._check(tp, target)
            if error is not None:
                out[tp] = error
                continue
            current = ctx.full_assignment(tp)
            if target is None:
                wanted[tp] = ReplicaAssignment(current.origin)
                scope.log(Log.info(f"Cancelling the reassignment of {tp} back to "
                                   f"{list(current.origin)}"))
            else:
                wanted[tp] = current.reassign_to(tuple(target))
        started = yield from self._start(scope, wanted)
        for tp in wanted:
            out[tp] = ((ErrorCode.none, None) if tp in started else
                       (ErrorCode.unknown_server_error, f"could not write the assignment of {tp}"))
        overridden = set(wanted) & set(ctx.zk_reassignments)
        if overridden:  # an API request replaces a move asked through the admin znode
            yield from self._forget_zk(scope, overridden)
        return out

    def list(self, partitions: Iterable[TopicPartition] | None
             ) -> dict[TopicPartition, ReplicaAssignment]:
        """The moves in progress (of ``partitions``, or all)."""
        moving = self._ctx.reassignments
        if partitions is None:
            return dict(sorted(moving.items()))
        return {tp: moving[tp] for tp in sorted(set(partitions)) if tp in moving}

    def zk_request(self, scope: EventScope,
                   requested: Mapping[TopicPartition, Sequence[int]]) -> ZkSteps[None]:
        """``/admin/reassign_partitions`` content: start what is new, drop what is invalid."""
        ctx = self._ctx
        ctx.zk_reassignments = {tp: tuple(r) for tp, r in requested.items()}
        wanted: dict[TopicPartition, ReplicaAssignment] = {}
        finished: set[TopicPartition] = set()
        for tp, target in sorted(requested.items()):
            error = self._check(tp, target)
            if error is not None:
                scope.log(Log.warning(f"Ignoring the reassignment of {tp} to {list(target)} "
                                      f"from {'/admin/reassign_partitions'}: {error[1]}"))
                finished.add(tp)
                continue
            current = ctx.full_assignment(tp)
            if current.target == tuple(target):
                if not current.is_being_reassigned:
                    finished.add(tp)  # nothing (left) to do
                continue  # already moving there
            wanted[tp] = current.reassign_to(tuple(target))
        started = yield from self._start(scope, wanted)
        for tp in sorted(set(wanted) - started):
            scope.log(Log.warning(f"Removing the reassignment of {tp} from "
                                  "/admin/reassign_partitions: it could not be started"))
            finished.add(tp)
        if finished:
            yield from self._forget_zk(scope, finished)

    def resume_all(self, scope: EventScope) -> ZkSteps[None]:
        """Controller failover: continue every move found in ZooKeeper."""
        moving = dict(self._ctx.reassignments)
        if moving:
            scope.log(Log.info(f"Resuming the reassignment of {sorted(map(str, moving))}"))
            yield from self._advance(scope, moving)

    def on_isr_change(self, scope: EventScope, partitions: Iterable[TopicPartition]
                      ) -> ZkSteps[None]:
        """After ISR writes: complete the moves whose target replicas are all in sync."""
        ctx = self._ctx
        done = {tp: ctx.reassignments[tp] for tp in sorted(set(partitions))
                if tp in ctx.reassignments and not ctx.is_topic_queued_for_deletion(tp.topic)
                and self._caught_up(tp, ctx.reassignments[tp])}
        if done:
            yield from self._complete(scope, done)

    def on_broker_startup(self, scope: EventScope, brokers: Iterable[int]) -> ZkSteps[None]:
        """Moves waiting on a replica of a restarted broker resume (onBrokerStartup step 4)."""
        started = set(brokers)
        moving = {tp: a for tp, a in sorted(self._ctx.reassignments.items())
                  if started & set(a.replicas)}
        if moving:
            yield from self._advance(scope, moving)

    # -- validation ------------------------------------------------------------------------

    def _check(self, tp: TopicPartition, target: Sequence[int] | None
               ) -> tuple[ErrorCode, str | None] | None:
        ctx = self._ctx
        if not ctx.replicas(tp) or tp not in ctx.leadership:
            return ErrorCode.unknown_topic_or_partition, f"The partition {tp} does not exist."
        if ctx.is_topic_queued_for_deletion(tp.topic):
            return ErrorCode.unknown_topic_or_partition, f"{tp.topic} is being deleted."
        if target is None:
            if tp not in ctx.reassignments:
                return (ErrorCode.no_reassignment_in_progress,
                        f"No reassignment of {tp} is in progress.")
            return None
        bad = ErrorCode.invalid_replica_assignment
        if not target:
            return bad, "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return bad, f"Duplicate replica ids in partition reassignment replica list: {list(target)}"
        if any(r < 0 for r in target):
            return bad, f"Invalid broker id in replica list: {list(target)}"
        # Only the replicas to add must be alive (Kafka's validateReplicas: addingReplicas
        # ⊆ liveBrokerIds, which leaves out brokers in controlled shutdown); a current
        # replica on a dead broker may stay.
        live = set(ctx.live_brokers) - ctx.shutting_down
        adding = ctx.full_assignment(tp).reassign_to(tuple(target)).adding
        unknown = sorted(set(adding) - live)
        if unknown:
            return bad, (f"Replica assignment has brokers that are not alive: {unknown}; "
                         f"live brokers are {sorted(live)}")
        return None

    # -- the steps -------------------------------------------------------------------------

    def _caught_up(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        current = self._ctx.leadership.get(tp)
        return current is not None and set(assignment.target) <= set(current.isr)

    def _start(self, scope: EventScope, wanted: Mapping[TopicPartition, ReplicaAssignment]
               ) -> ZkSteps[set[TopicPartition]]:
        """Record the new assignments (ZooKeeper first), stop unneeded replicas, advance."""
        ctx = self._ctx
        wanted = {tp: self._keep_in_sync(scope, tp, a) for tp, a in wanted.items()}
        changed = {tp: a for tp, a in wanted.items() if a != ctx.full_assignment(tp)}
        written = yield from self._write_assignments(scope, changed)
        unneeded: list[PartitionReplica] = []
        for tp in written:
            previous = ctx.full_assignment(tp)
            new = changed[tp]
            scope.log(Log.info(f"Reassignment of {tp}: replicas {list(new.replicas)}, adding "
                               f"{list(new.adding)}, removing {list(new.removing)}"))
            self._set(tp, new)
            unneeded += [PartitionReplica(tp, r) for r in previous.replicas
                         if r not in new.replicas]
        if unneeded:
            yield from self._remove_replicas(scope, unneeded)
        advance = {tp: a for tp, a in wanted.items()
                   if tp in written or (tp not in changed and a.is_being_reassigned)}
        yield from self._advance(scope, advance)
        return set(written) | {tp for tp in wanted if tp not in changed}

    def _keep_in_sync(self, scope: EventScope, tp: TopicPartition,
                      new: ReplicaAssignment) -> ReplicaAssignment:
        """``new``, or, when none of its replicas is in the ISR, ``new`` that also keeps the
        ISR members it drops, as replicas being removed (RR).

        Deviation from Kafka's updateCurrentReassignment, which stops and deletes every
        replica a re-targeted or cancelled move no longer needs at once
        (stopRemovedReplicasOfReassignedPartition): when those are the whole ISR,
        removeReplicasFromIsr leaves the last one in the ISR with no leader, outside the
        replicas, so no replica can ever be elected (cleanly) and the acknowledged writes
        are only on the deleted replica.  Kept, it leads (or is elected when its broker
        returns), the new replicas catch up from it, and phase B removes it once the target
        is in the ISR: the move completes as any other."""
        current = self._ctx.leadership.get(tp)
        if current is None or set(current.isr) & set(new.replicas):
            return new
        keep = tuple(r for r in self._ctx.full_assignment(tp).replicas
                     if r in current.isr and r not in new.replicas)
        if not keep:
            return new
        scope.log(Log.warning(
            f"Reassignment of {tp}: keeping {list(keep)} (the whole ISR) as replicas being "
            f"removed until {list(new.target)} are in sync"))
        return ReplicaAssignment((*new.replicas, *keep), new.adding, (*new.removing, *keep))

    def _advance(self, scope: EventScope,
                 moves: Mapping[TopicPartition, ReplicaAssignment]) -> ZkSteps[None]:
        # A move of a topic queued for deletion ends with the topic (module docstring of
        # weir.controller.deletion): advancing or completing it would hand the replica
        # state machine transitions the deletion's states do not allow (a completed move
        # turned a replica in ReplicaDeletionStarted into NonExistent and stalled the
        # deletion for good).
        moves = {tp: a for tp, a in moves.items()
                 if not self._ctx.is_topic_queued_for_deletion(tp.topic)}
        complete = {tp: a for tp, a in moves.items() if self._caught_up(tp, a)}
        waiting = {tp: a for tp, a in moves.items() if tp not in complete}
        if waiting:
            yield from self._phase_a(scope, waiting)
        if complete:
            yield from self._complete(scope, complete)

    def _phase_a(self, scope: EventScope,
                 moves: Mapping[TopicPartition, ReplicaAssignment]) -> ZkSteps[None]:
        """Bump the leader epoch, LeaderAndIsr to RS; adding replicas → NewReplica."""
        ctx = self._ctx
        yield from self._bump_leader_epochs(scope, list(moves))
        new = [PartitionReplica(tp, r) for tp, a in moves.items() for r in a.adding
               if ctx.replica_state(PartitionReplica(tp, r)) is R.NON_EXISTENT]
        yield from self._rsm.handle_state_changes(scope, new, R.NEW)

    def _complete(self, scope: EventScope,
                  moves: Mapping[TopicPartition, ReplicaAssignment]) -> ZkSteps[None]:
        """Phase B: the target replicas are in sync; finish the moves."""
        ctx = self._ctx
        adding = [PartitionReplica(tp, r) for tp, a in moves.items() for r in a.adding
                  if ctx.replica_state(PartitionReplica(tp, r)) is not R.ONLINE
                  and ctx.is_replica_online(r)]
        yield from self._rsm.handle_state_changes(scope, adding, R.ONLINE)
        for tp, assignment in moves.items():
            self._set(tp, ReplicaAssignment(assignment.target))
        eligible = set(ctx.live_brokers) - ctx.shutting_down
        elect = [tp for tp in moves if tp in ctx.leadership
                 and (ctx.leadership[tp].leader not in moves[tp].target
                      or ctx.leadership[tp].leader not in eligible)]
        keep = [tp for tp in moves if tp in ctx.leadership and tp not in elect]
        if elect:
            elected = yield from self._psm.handle_state_changes(
                scope, elect, PartitionState.ONLINE, ElectionKind.REASSIGNED)
            for tp in set(elect) - set(elected):
                scope.log(Log.warning(f"Reassignment of {tp}: no target replica can lead yet"))
        yield from self._bump_leader_epochs(scope, keep)
        removing = [PartitionReplica(tp, r) for tp, a in moves.items() for r in a.removing]
        yield from self._remove_replicas(scope, removing)
        finals = {tp: ReplicaAssignment(a.target) for tp, a in moves.items()}
        written = yield from self._write_assignments(scope, finals)
        for tp in sorted(written):
            scope.log(Log.info(f"Reassignment of {tp} to {list(finals[tp].replicas)} "
                               "completed"))
        finished = set(written) & set(ctx.zk_reassignments)
        if finished:
            yield from self._forget_zk(scope, finished)
        scope.batch.add_update_metadata(ctx.live_brokers, list(moves))

    def _remove_replicas(self, scope: EventScope,
                         replicas: list[PartitionReplica]) -> ZkSteps[None]:
        """OfflineReplica (out of the ISR), then deleted, then NonExistentReplica."""
        if not replicas:
            return
        yield from self._rsm.handle_state_changes(scope, replicas, R.OFFLINE)
        yield from self._rsm.handle_state_changes(scope, replicas, R.DELETION_STARTED)
        yield from self._rsm.handle_state_changes(scope, replicas, R.DELETION_SUCCESSFUL)
        yield from self._rsm.handle_state_changes(scope, replicas, R.NON_EXISTENT)

    def _bump_leader_epochs(self, scope: EventScope,
                            partitions: list[TopicPartition]) -> ZkSteps[None]:
        """Kafka's updateLeaderEpochAndSendRequest: same leader/ISR, epoch + 1."""
        ctx = self._ctx

        def compute(tp: TopicPartition, current: LeaderIsr) -> LeaderIsr | None:
            if current.controller_epoch > ctx.controller_epoch:
                scope.log(Log.error(f"Not bumping the leader epoch of {tp}: written by "
                                    f"controller epoch {current.controller_epoch}"))
                return None
            return LeaderIsr(leader=current.leader, leader_epoch=current.leader_epoch + 1,
                             isr=list(current.isr), controller_epoch=ctx.controller_epoch,
                             zk_version=current.zk_version,
                             leader_recovery_state=current.leader_recovery_state)

        present = [tp for tp in partitions if tp in ctx.leadership]
        written = yield from update_leader_isr(ctx, scope, present, compute,
                                               self._settings.max_zk_update_attempts)
        for tp, leader_isr in written.items():
            scope.batch.add_leader_and_isr(ctx.live_replicas(tp), tp, leader_isr,
                                           ctx.replicas(tp))

    # -- context and ZooKeeper -------------------------------------------------------------

    def _set(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        ctx = self._ctx
        ctx.set_replicas(tp, assignment.replicas)
        if assignment.is_being_reassigned:
            ctx.reassignments[tp] = assignment
        else:
            ctx.reassignments.pop(tp, None)

    def _write_assignments(self, scope: EventScope,
                           changes: Mapping[TopicPartition, ReplicaAssignment]
                           ) -> ZkSteps[set[TopicPartition]]:
        """One topic-znode write per topic; returns the partitions written."""
        if not changes:
            return set()
        by_topic: dict[str, dict[int, ReplicaAssignment]] = {}
        for tp, assignment in changes.items():
            by_topic.setdefault(tp.topic, {})[tp.partition] = assignment
        results = yield ZkUpdateTopicAssignments(by_topic, self._ctx.epoch_zk_version)
        written: set[TopicPartition] = set()
        for topic, parts in by_topic.items():
            error = results.get(topic)
            if error is not None:
                scope.log(Log.error(f"Writing the assignment of {topic} failed: {error!r}"))
                continue
            written.update(TopicPartition(topic, p) for p in parts)
        return written

    def _forget_zk(self, scope: EventScope, partitions: set[TopicPartition]) -> ZkSteps[None]:
        ctx = self._ctx
        before = len(ctx.zk_reassignments)
        for tp in partitions:
            ctx.zk_reassignments.pop(tp, None)
        if len(ctx.zk_reassignments) != before:
            yield ZkSetReassignments(dict(ctx.zk_reassignments), ctx.epoch_zk_version)

"""The partition state machine (NonExistent, New, Online, Offline).

* NonExistent -> New: the assignment is already in the context; only the state changes.
* New -> Online: leader = first live assigned replica, ISR = live assigned replicas
  (brokers in controlled shutdown and failed log directories left out), leader epoch 0; the state znodes are *created* (one ZooKeeper operation for the batch).
* Online/Offline -> Online: a leader selector (see :mod:`weir.controller.election`) picks
  leader and ISR, the leader epoch is bumped, and the znodes are conditionally *updated*.
* New/Online/Offline -> Offline, Offline -> NonExistent: only the state changes.

Every leader change adds a LeaderAndIsr for the selector's recipients and an UpdateMetadata
for every live broker to the event's batch.  Illegal transitions are logged as
:class:`~weir.controller.states.IllegalStateTransition` and leave the partition unchanged.
Batches of more than 100 partitions are logged as one summary line.

The replica state machine can elect the leaders of Offline partitions in the same write as
the removal of dead replicas from their ISRs (:meth:`PartitionStateMachine.elect_offline`,
:meth:`PartitionStateMachine.record_election`): one ZooKeeper round and one leader
epoch bump per partition instead of two.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence

from weir.common import TopicPartition
from weir.controller import election
from weir.controller.context import ControllerContext
from weir.controller.effects import (
    Log,
    ZkCreatePartitionStates,
    ZkReadPartitionStates,
    ZkUpdatePartitionStates,
)
from weir.controller.election import ElectionResult
from weir.controller.scope import EventScope, ZkSteps, update_leader_isr
from weir.controller.settings import ControllerSettings
from weir.controller.states import (
    VALID_PREVIOUS_PARTITION_STATES,
    PartitionState,
    split_by_transition,
)
from weir.coordination.codecs import LeaderIsr

__all__ = ["ElectionKind", "PartitionStateMachine"]

_LOG_EACH_UP_TO = 100
"""Larger batches of partition transitions are logged as one summary line."""


class ElectionKind(enum.Enum):
    """Which leader selector an Online transition uses."""

    OFFLINE = "offline"
    REASSIGNED = "reassigned"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    UNCLEAN = "unclean"


class PartitionStateMachine:
    """Moves partitions between states; see the module docstring."""

    def __init__(self, ctx: ControllerContext, settings: ControllerSettings) -> None:
        self._ctx = ctx
        self._settings = settings

    def initialize(self) -> None:
        """Derive every partition's state from the context (controller failover)."""
        ctx = self._ctx
        for tp in ctx.all_partitions():
            leader_isr = ctx.leadership.get(tp)
            if leader_isr is None:
                ctx.partition_states[tp] = PartitionState.NEW
            elif ctx.is_replica_online(leader_isr.leader, tp):
                ctx.partition_states[tp] = PartitionState.ONLINE
            else:
                ctx.partition_states[tp] = PartitionState.OFFLINE

    def trigger_online_state_change(self, scope: EventScope) -> ZkSteps[None]:
        """Elect leaders for every New or Offline partition not queued for deletion."""
        ctx = self._ctx
        candidates = [
            tp for tp in ctx.partitions_in_states(PartitionState.NEW, PartitionState.OFFLINE)
            if not ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        yield from self.handle_state_changes(scope, candidates, PartitionState.ONLINE)

    def handle_state_changes(self, scope: EventScope, partitions: Iterable[TopicPartition],
                             target: PartitionState,
                             election_kind: ElectionKind = ElectionKind.OFFLINE
                             ) -> ZkSteps[dict[TopicPartition, LeaderIsr]]:
        """Move ``partitions`` to ``target``; invalid ones are logged and skipped.

        Returns the leader/ISR states written by elections (``target`` Online).
        """
        valid = self._valid(scope, partitions, target)
        elected: dict[TopicPartition, LeaderIsr] = {}
        if not valid:
            return elected
        states = self._ctx.partition_states
        if target is PartitionState.ONLINE:
            new = [tp for tp in valid if states.get(tp) is PartitionState.NEW]
            others = [tp for tp in valid if states.get(tp) is not PartitionState.NEW]
            if new:
                yield from self._initialize_leader_isr(scope, new)
            if others:
                elected = yield from self._elect(scope, others, election_kind)
            return elected
        quiet = len(valid) > _LOG_EACH_UP_TO
        if quiet:
            scope.log(Log.info(f"{len(valid)} partitions move to {target}"))
        for tp in valid:
            if not quiet:
                scope.log(Log.info(f"Partition {tp} state changed from "
                                   f"{self._ctx.partition_state(tp)} to {target}"))
            states[tp] = target
        return elected

    def _valid(self, scope: EventScope, partitions: Iterable[TopicPartition],
               target: PartitionState) -> list[TopicPartition]:
        valid, illegal = split_by_transition(partitions, self._ctx.partition_states, PartitionState.NON_EXISTENT, target,
                                             VALID_PREVIOUS_PARTITION_STATES[target])
        for refusal in illegal:
            scope.log(Log.error(f"Controller {self._settings.broker_id} epoch "
                                f"{self._ctx.controller_epoch}: {refusal}"))
        return valid

    # -- New -> Online ---------------------------------------------------------------------

    def _initialize_leader_isr(self, scope: EventScope,
                               partitions: Sequence[TopicPartition]) -> ZkSteps[None]:
        ctx = self._ctx
        creates: dict[TopicPartition, LeaderIsr] = {}
        for tp in partitions:
            # Kafka's initializeLeaderAndIsrForPartitions: isReplicaOnline replicas only
            # (not a broker in controlled shutdown, not a failed log directory).
            live = ctx.online_replicas(tp)
            if not live:
                scope.log(Log.error(
                    f"Cannot bring new partition {tp} online: none of its replicas "
                    f"{list(ctx.replicas(tp))} is alive (and not shutting down)"))
                continue
            creates[tp] = LeaderIsr(leader=live[0], leader_epoch=0, isr=list(live),
                                    controller_epoch=ctx.controller_epoch, zk_version=0)
        if not creates:
            return
        results = yield ZkCreatePartitionStates(creates, ctx.epoch_zk_version)
        quiet = len(creates) > _LOG_EACH_UP_TO
        if quiet:
            scope.log(Log.info(f"{len(creates)} partitions move from NewPartition to "
                               "OnlinePartition"))
        for tp in creates:
            res = results.get(tp)
            if not isinstance(res, LeaderIsr):
                scope.log(Log.error(f"Creating the state of new partition {tp} failed: {res!r}"))
                continue
            ctx.leadership[tp] = res
            ctx.partition_states[tp] = PartitionState.ONLINE
            scope.batch.add_leader_and_isr(ctx.live_replicas(tp), tp, res, ctx.replicas(tp),
                                           is_new=True)
            if not quiet:
                scope.log(Log.info(f"Partition {tp} state changed from NewPartition to "
                                   f"OnlinePartition with leader {res.leader}, isr {res.isr}"))

    # -- Online/Offline -> Online ----------------------------------------------------------

    def _elect(self, scope: EventScope, partitions: Sequence[TopicPartition],
               kind: ElectionKind) -> ZkSteps[dict[TopicPartition, LeaderIsr]]:
        ctx = self._ctx
        elections: dict[TopicPartition, ElectionResult] = {}

        def compute(tp: TopicPartition, current: LeaderIsr) -> LeaderIsr | None:
            result = self._run_selector(scope, kind, tp, current, report=True)
            if result is None:
                return None
            elections[tp] = result
            return self._elected_state(current, result)

        written = yield from update_leader_isr(ctx, scope, partitions, compute,
                                               self._settings.max_zk_update_attempts)
        quiet = len(written) > _LOG_EACH_UP_TO
        if quiet:
            scope.log(Log.info(f"{len(written)} partitions elected a leader "
                               f"({kind.value} election)"))
        for tp, leader_isr in written.items():
            self.record_election(scope, tp, leader_isr, elections[tp].recipients,
                                         log=not quiet)
        return written

    def elect_in_batches(self, scope: EventScope, batches: Sequence[Sequence[TopicPartition]],
                         kind: ElectionKind, between: Callable[[], None]
                         ) -> ZkSteps[dict[TopicPartition, LeaderIsr]]:
        """Online/Offline -> Online for ``batches`` of partitions, one conditional write per
        batch, all elections computed first: each write names the ones after it
        (``ZkUpdatePartitionStates.pipelined``), so the shell has them all in flight while
        the core records each batch's elections as its write lands and calls ``between``
        (after every batch but the last; the caller sends the batch's requests there).

        The selectors' inputs (live and shutting-down brokers, ISRs) do not change within
        the event, so a batch's elections are the same computed before the earlier
        batches' writes landed.  Partitions whose write failed (their state znode changed
        meanwhile) are re-read and elected again at the end, as :meth:`_elect` retries.
        """
        ctx = self._ctx
        planned: list[tuple[dict[TopicPartition, ElectionResult],
                            dict[TopicPartition, LeaderIsr]]] = []
        for part in batches:
            elections: dict[TopicPartition, ElectionResult] = {}
            updates: dict[TopicPartition, LeaderIsr] = {}
            for tp in self._valid(scope, part, PartitionState.ONLINE):
                current = ctx.leadership.get(tp)
                if current is None or ctx.partition_states.get(tp) is PartitionState.NEW:
                    scope.log(Log.error(f"No leader/ISR state for {tp}; cannot elect"))
                    continue
                result = self._run_selector(scope, kind, tp, current, report=True)
                if result is not None:
                    elections[tp] = result
                    updates[tp] = self._elected_state(current, result)
            planned.append((elections, updates))
        writes = [updates for _, updates in planned if updates]
        elected: dict[TopicPartition, LeaderIsr] = {}
        failed: list[TopicPartition] = []
        written_so_far = 0
        for i, (elections, updates) in enumerate(planned):
            if updates:
                written_so_far += 1
                ahead = tuple(writes[written_so_far:])
                results = yield ZkUpdatePartitionStates(updates, ctx.epoch_zk_version, ahead)
                written = {tp: res for tp in updates
                           if isinstance(res := results.get(tp), LeaderIsr)}
                failed.extend(tp for tp in updates if tp not in written)
                quiet = len(written) > _LOG_EACH_UP_TO
                if quiet:
                    scope.log(Log.info(f"{len(written)} partitions elected a leader "
                                       f"({kind.value} election)"))
                for tp, leader_isr in written.items():
                    ctx.leadership[tp] = leader_isr
                    self.record_election(scope, tp, leader_isr, elections[tp].recipients,
                                         log=not quiet)
                elected.update(written)
            if i < len(planned) - 1:
                between()
        if failed:
            fresh = yield ZkReadPartitionStates(frozenset(failed))
            for tp in failed:
                if tp in fresh:
                    ctx.leadership[tp] = fresh[tp]
                else:
                    scope.log(Log.error(f"Leader/ISR state of {tp} vanished"))
            again = [tp for tp in failed if tp in fresh]
            if again:
                elected.update((yield from self._elect(scope, again, kind)))
        return elected

    def _run_selector(self, scope: EventScope, kind: ElectionKind, tp: TopicPartition,
                      current: LeaderIsr, report: bool) -> ElectionResult | None:
        """The selector's result, or None (logged as an error if ``report``)."""
        ctx = self._ctx
        if current.controller_epoch > ctx.controller_epoch:
            if report:
                scope.log(Log.error(
                    f"Aborting leader election of {tp}: its state was written by controller "
                    f"epoch {current.controller_epoch} > {ctx.controller_epoch}"))
            return None
        result = self.select_leader(kind, tp, current)
        if result is None:
            if report:
                scope.log(Log.error(
                    f"No eligible leader for {tp} ({kind.value} election): assigned "
                    f"{list(ctx.replicas(tp))}, isr {list(current.isr)}, live brokers "
                    f"{sorted(ctx.live_brokers)}; it stays {ctx.partition_state(tp)}"))
            return None
        if result.unclean:
            scope.log(Log.warning(
                f"Unclean leader election for {tp}: no ISR member of {list(current.isr)} "
                f"is alive, electing {result.leader}; there is potential data loss"))
        return result

    def _elected_state(self, current: LeaderIsr, result: ElectionResult) -> LeaderIsr:
        return LeaderIsr(leader=result.leader, leader_epoch=current.leader_epoch + 1,
                         isr=list(result.isr), controller_epoch=self._ctx.controller_epoch,
                         zk_version=current.zk_version)

    # -- elections folded into the replica state machine's ISR writes ---------------------

    def elect_offline(self, scope: EventScope, tp: TopicPartition, current: LeaderIsr,
                      proposed: LeaderIsr) -> tuple[LeaderIsr, tuple[int, ...]] | None:
        """Elect a leader for Offline ``tp`` on top of ``proposed`` (its ISR-shrunk state).

        ``current`` is the state in ZooKeeper, ``proposed`` the one about to be written
        with the leader removed (its leader epoch already bumped).  Returns the state to
        write instead, with the offline selector's leader and ISR at the same leader
        epoch, and the LeaderAndIsr recipients; None leaves the partition to
        :meth:`trigger_online_state_change` (which reports why no leader was elected).
        """
        if self._ctx.partition_states.get(tp) is not PartitionState.OFFLINE:
            return None
        if current.controller_epoch > self._ctx.controller_epoch:
            self._run_selector(scope, ElectionKind.OFFLINE, tp, current, report=True)
            return None
        result = self._run_selector(scope, ElectionKind.OFFLINE, tp, proposed, report=False)
        if result is None:
            return None
        state = LeaderIsr(leader=result.leader, leader_epoch=proposed.leader_epoch,
                          isr=list(result.isr), controller_epoch=proposed.controller_epoch,
                          zk_version=proposed.zk_version)
        return state, result.recipients

    def record_election(self, scope: EventScope, tp: TopicPartition,
                                written: LeaderIsr, recipients: Sequence[int],
                                log: bool = True) -> None:
        """``tp`` got the leader in ``written`` (now in ZooKeeper): Online, LeaderAndIsr."""
        ctx = self._ctx
        previous = ctx.partition_state(tp)
        ctx.partition_states[tp] = PartitionState.ONLINE
        scope.batch.add_leader_and_isr(recipients, tp, written, ctx.replicas(tp))
        if log:
            scope.log(Log.info(
                f"Partition {tp} state changed from {previous} to OnlinePartition with "
                f"leader {written.leader}, leader epoch {written.leader_epoch}, "
                f"isr {written.isr}"))

    def select_leader(self, kind: ElectionKind, tp: TopicPartition,
                      current: LeaderIsr) -> ElectionResult | None:
        """Run the ``kind`` selector on the partition's current values.

        Brokers in controlled shutdown are not eligible leaders (as in Kafka), except to
        the controlled-shutdown selector, which handles them itself; nor are replicas on a
        failed log directory.
        """
        ctx = self._ctx
        assignment = ctx.replicas(tp)
        live_ids = ctx.live_brokers.keys()
        shutting = ctx.shutting_down
        dirs = ctx.replicas_on_offline_dirs
        offline = {b for b, tps in dirs.items() if tp in tps} if dirs else None
        if kind is ElectionKind.CONTROLLED_SHUTDOWN:
            # live = eligible | (shutting down & live): the live brokers but those whose
            # replica of tp is on a failed log directory (unless shutting down).
            live = live_ids - (offline - shutting) if offline else live_ids
            return election.controlled_shutdown_leader(assignment, current.isr, live, shutting)
        # Without shutting-down brokers or failed log dirs, every live broker is eligible.
        eligible = ctx.eligible_leaders(tp) if shutting or offline else live_ids
        if kind is ElectionKind.OFFLINE:
            unclean = ctx.unclean_allowed(tp.topic,
                                          self._settings.unclean_leader_election_enable)
            return election.offline_leader(assignment, current.isr, eligible, unclean)
        if kind is ElectionKind.UNCLEAN:
            return election.offline_leader(assignment, current.isr, eligible, True)
        if kind is ElectionKind.REASSIGNED:
            return election.reassigned_leader(assignment, current.isr, eligible)
        return election.preferred_leader(assignment, current.isr, eligible)  # PREFERRED

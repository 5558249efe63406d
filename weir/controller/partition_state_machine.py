"""The partition state machine (NonExistent, New, Online, Offline).

* NonExistent -> New: the assignment is already in the context; only the state changes.
* New -> Online: leader = first live assigned replica, ISR = live assigned replicas,
  leader epoch 0; the state znodes are *created* (one ZooKeeper operation for the batch).
* Online/Offline -> Online: a leader selector (see :mod:`weir.controller.election`) picks
  leader and ISR, the leader epoch is bumped, and the znodes are conditionally *updated*.
* New/Online/Offline -> Offline, Offline -> NonExistent: only the state changes.

Every leader change adds a LeaderAndIsr for the selector's recipients and an UpdateMetadata
for every live broker to the event's batch.  Illegal transitions are logged as
:class:`~weir.controller.states.IllegalStateTransition` and leave the partition unchanged.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from weir.common import TopicPartition
from weir.controller import election
from weir.controller.context import ControllerContext
from weir.controller.effects import Log, ZkCreatePartitionStates
from weir.controller.election import ElectionResult
from weir.controller.scope import EventScope, ZkSteps, update_leader_isr
from weir.controller.settings import ControllerSettings
from weir.controller.states import (
    IllegalStateTransition,
    PartitionState,
    check_partition_transition,
)
from weir.coordination.codecs import LeaderIsr

__all__ = ["ElectionKind", "PartitionStateMachine"]


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
            elif ctx.is_replica_online(leader_isr.leader):
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
        for tp in valid:
            scope.log(Log.info(f"Partition {tp} state changed from "
                               f"{self._ctx.partition_state(tp)} to {target}"))
            states[tp] = target
        return elected

    def _valid(self, scope: EventScope, partitions: Iterable[TopicPartition],
               target: PartitionState) -> list[TopicPartition]:
        valid = []
        for tp in partitions:
            try:
                check_partition_transition(tp, self._ctx.partition_state(tp), target)
            except IllegalStateTransition as exc:
                scope.log(Log.error(f"Controller {self._settings.broker_id} epoch "
                                    f"{self._ctx.controller_epoch}: {exc}"))
                continue
            valid.append(tp)
        return valid

    # -- New -> Online ---------------------------------------------------------------------

    def _initialize_leader_isr(self, scope: EventScope,
                               partitions: Sequence[TopicPartition]) -> ZkSteps[None]:
        ctx = self._ctx
        creates: dict[TopicPartition, LeaderIsr] = {}
        for tp in partitions:
            live = ctx.live_replicas(tp)
            if not live:
                scope.log(Log.error(
                    f"Cannot bring new partition {tp} online: none of its replicas "
                    f"{list(ctx.replicas(tp))} is alive"))
                continue
            creates[tp] = LeaderIsr(leader=live[0], leader_epoch=0, isr=list(live),
                                    controller_epoch=ctx.controller_epoch, zk_version=0)
        if not creates:
            return
        results = yield ZkCreatePartitionStates(creates, ctx.epoch_zk_version)
        for tp in creates:
            res = results.get(tp)
            if not isinstance(res, LeaderIsr):
                scope.log(Log.error(f"Creating the state of new partition {tp} failed: {res!r}"))
                continue
            ctx.leadership[tp] = res
            ctx.partition_states[tp] = PartitionState.ONLINE
            scope.batch.add_leader_and_isr(ctx.live_replicas(tp), tp, res, ctx.replicas(tp),
                                           is_new=True)
            scope.log(Log.info(f"Partition {tp} state changed from NewPartition to "
                               f"OnlinePartition with leader {res.leader}, isr {res.isr}"))

    # -- Online/Offline -> Online ----------------------------------------------------------

    def _elect(self, scope: EventScope, partitions: Sequence[TopicPartition],
               kind: ElectionKind) -> ZkSteps[dict[TopicPartition, LeaderIsr]]:
        ctx = self._ctx
        elections: dict[TopicPartition, ElectionResult] = {}

        def compute(tp: TopicPartition, current: LeaderIsr) -> LeaderIsr | None:
            if current.controller_epoch > ctx.controller_epoch:
                scope.log(Log.error(
                    f"Aborting leader election of {tp}: its state was written by controller "
                    f"epoch {current.controller_epoch} > {ctx.controller_epoch}"))
                return None
            result = self.select_leader(kind, tp, current)
            if result is None:
                scope.log(Log.error(
                    f"No eligible leader for {tp} ({kind.value} election): assigned "
                    f"{list(ctx.replicas(tp))}, isr {list(current.isr)}, live brokers "
                    f"{sorted(ctx.live_brokers)}; it stays {ctx.partition_state(tp)}"))
                return None
            if result.unclean:
                scope.log(Log.warning(
                    f"Unclean leader election for {tp}: no ISR member of {list(current.isr)} "
                    f"is alive, electing {result.leader}; there is potential data loss"))
            elections[tp] = result
            return LeaderIsr(leader=result.leader, leader_epoch=current.leader_epoch + 1,
                             isr=list(result.isr), controller_epoch=ctx.controller_epoch,
                             zk_version=current.zk_version)

        written = yield from update_leader_isr(ctx, scope, partitions, compute,
                                               self._settings.max_zk_update_attempts)
        for tp, leader_isr in written.items():
            previous = ctx.partition_state(tp)
            ctx.partition_states[tp] = PartitionState.ONLINE
            scope.batch.add_leader_and_isr(elections[tp].recipients, tp, leader_isr,
                                           ctx.replicas(tp))
            scope.log(Log.info(
                f"Partition {tp} state changed from {previous} to OnlinePartition with "
                f"leader {leader_isr.leader}, leader epoch {leader_isr.leader_epoch}, "
                f"isr {leader_isr.isr}"))
        return written

    def select_leader(self, kind: ElectionKind, tp: TopicPartition,
                      current: LeaderIsr) -> ElectionResult | None:
        """Run the ``kind`` selector on the partition's current values.

        Brokers in controlled shutdown are not eligible leaders (as in Kafka), except to
        the controlled-shutdown selector, which handles them itself.
        """
        ctx = self._ctx
        assignment = ctx.replicas(tp)
        live = ctx.live_broker_ids
        eligible = live - ctx.shutting_down
        if kind is ElectionKind.OFFLINE:
            unclean = ctx.unclean_allowed(tp.topic,
                                          self._settings.unclean_leader_election_enable)
            return election.offline_leader(assignment, current.isr, eligible, unclean)
        if kind is ElectionKind.UNCLEAN:
            return election.offline_leader(assignment, current.isr, eligible, True)
        if kind is ElectionKind.REASSIGNED:
            return election.reassigned_leader(assignment, current.isr, eligible)
        if kind is ElectionKind.PREFERRED:
            return election.preferred_leader(assignment, current.isr, eligible)
        return election.controlled_shutdown_leader(assignment, current.isr, live,
                                                   ctx.shutting_down)

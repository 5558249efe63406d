"""Leader elections on request: ElectLeaders (preferred / unclean), the admin znode
``/admin/preferred_replica_election`` and the automatic leader rebalance.

Sans-I/O operations of the core.  Per-partition outcomes follow Kafka's ElectLeaders:
``election_not_needed`` when the wanted leader already leads, ``preferred_leader_not_available``
when the preferred replica is dead, shutting down or out of sync, and
``eligible_leaders_not_available`` when an unclean election finds no live replica.
"""

from __future__ import annotations

from collections.abc import Iterable

from weir.common import TopicPartition
from weir.controller.context import ControllerContext
from weir.controller.effects import Log, ZkDeletePreferredElection
from weir.controller.events import ElectionType
from weir.controller.partition_state_machine import ElectionKind, PartitionStateMachine
from weir.controller.scope import EventScope, ZkSteps
from weir.controller.settings import ControllerSettings
from weir.controller.states import PartitionState
from weir.protocol.errors import ErrorCode

__all__ = ["ElectionOutcome", "LeaderElections", "imbalanced_partitions"]

ElectionOutcome = dict[TopicPartition, tuple[ErrorCode, str | None]]


def imbalanced_partitions(ctx: ControllerContext, percentage: int) -> list[TopicPartition]:
    """Partitions to move back to their preferred leader (Kafka's checkAndTriggerAutoLeaderRebalance).

    For every live broker not shutting down: the share of the partitions it is preferred
    leader of that someone else leads; above ``percentage`` %, those of them whose preferred
    replica is in the ISR are returned.
    """
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp in ctx.leadership:
        replicas = ctx.replicas(tp)
        if not replicas or ctx.is_topic_queued_for_deletion(tp.topic):
            continue
        by_preferred.setdefault(replicas[0], []).append(tp)
    out: list[TopicPartition] = []
    for broker, tps in sorted(by_preferred.items()):
        if broker not in ctx.live_brokers or broker in ctx.shutting_down:
            continue
        moved = [tp for tp in tps if ctx.leadership[tp].leader != broker]
        if len(moved) * 100 <= percentage * len(tps):
            continue
        out.extend(tp for tp in sorted(moved) if broker in ctx.leadership[tp].isr
                   and ctx.partition_state(tp) is PartitionState.ONLINE)
    return out


class LeaderElections:
    """Preferred and unclean elections on request; see the module docstring."""

    def __init__(self, ctx: ControllerContext, partitions: PartitionStateMachine,
                 settings: ControllerSettings) -> None:
        self._ctx = ctx
        self._partitions = partitions
        self._settings = settings

    def elect(self, scope: EventScope, election_type: ElectionType,
              requested: Iterable[TopicPartition] | None) -> ZkSteps[ElectionOutcome]:
        """Run an ElectLeaders request; ``requested`` None means every partition."""
        ctx = self._ctx
        wanted = sorted(ctx.all_partitions() if requested is None else set(requested))
        out: ElectionOutcome = {}
        candidates = []
        for tp in wanted:
            error = self._precheck(tp, election_type)
            if error is None:
                candidates.append(tp)
            else:
                out[tp] = error
        kind = (ElectionKind.PREFERRED if election_type is ElectionType.PREFERRED
                else ElectionKind.UNCLEAN)
        elected = yield from self._partitions.handle_state_changes(
            scope, candidates, PartitionState.ONLINE, kind)
        failed = (ErrorCode.preferred_leader_not_available
                  if election_type is ElectionType.PREFERRED
                  else ErrorCode.eligible_leaders_not_available)
        for tp in candidates:
            if tp in elected:
                out[tp] = (ErrorCode.none, None)
            else:
                out[tp] = (failed, f"Failed to elect a leader for {tp}")
        if candidates:
            scope.log(Log.info(f"{election_type.name.lower()} election: "
                               f"{len(elected)}/{len(candidates)} partitions got a new leader"))
        return out

    def _precheck(self, tp: TopicPartition,
                  election_type: ElectionType) -> tuple[ErrorCode, str | None] | None:
        """The partition's answer when no election is attempted, else None."""
        ctx = self._ctx
        current = ctx.leadership.get(tp)
        replicas = ctx.replicas(tp)
        if current is None or not replicas:
            return ErrorCode.unknown_topic_or_partition, f"{tp} does not exist"
        if ctx.is_topic_queued_for_deletion(tp.topic):
            return ErrorCode.invalid_topic_exception, f"{tp.topic} is being deleted"
        eligible = set(ctx.live_brokers) - ctx.shutting_down
        if election_type is ElectionType.PREFERRED:
            preferred = replicas[0]
            if current.leader == preferred:
                return ErrorCode.election_not_needed, None
            if preferred not in eligible or preferred not in current.isr:
                return (ErrorCode.preferred_leader_not_available,
                        f"preferred replica {preferred} of {tp} is not live or not in sync")
            return None
        if current.leader in eligible:
            return ErrorCode.election_not_needed, None
        if not any(r in eligible for r in replicas):
            return (ErrorCode.eligible_leaders_not_available,
                    f"no live replica of {tp} among {list(replicas)}")
        return None

    def admin_election(self, scope: EventScope,
                       partitions: frozenset[TopicPartition]) -> ZkSteps[None]:
        """``/admin/preferred_replica_election``: elect, then delete the znode."""
        if not partitions:
            return
        outcome = yield from self.elect(scope, ElectionType.PREFERRED, partitions)
        failed = sorted(tp for tp, (code, _) in outcome.items()
                        if code not in (ErrorCode.none, ErrorCode.election_not_needed))
        if failed:
            scope.log(Log.warning(f"Preferred replica election failed for {failed}"))
        yield ZkDeletePreferredElection(self._ctx.epoch_zk_version)

    def auto_rebalance(self, scope: EventScope) -> ZkSteps[None]:
        """The periodic imbalance check (only when ``auto.leader.rebalance.enable``)."""
        settings = self._settings
        if not settings.auto_leader_rebalance_enable:
            return
        moved = imbalanced_partitions(self._ctx,
                                      settings.leader_imbalance_per_broker_percentage)
        if moved:
            scope.log(Log.info(f"Leader imbalance: moving {len(moved)} partitions back to "
                               "their preferred leader"))
            yield from self.elect(scope, ElectionType.PREFERRED, moved)

"""The consumer groups' invariants (``--groups``, :mod:`weir.sim.groups`), as named objects.

They judge what the simulated members were told against what the group coordinators hold
(Kafka's guarantees for the classic group protocol over ``__consumer_offsets``):

* :class:`AcknowledgedCommitsFetched`: an OffsetCommit acknowledged as successful is what
  OffsetFetch returns afterwards from whichever broker is then the coordinator (the online
  leader of the group's offsets partition), unless a commit of the same group and partition
  that may have been written after it replaced it, or its topic (the incarnation the
  coordinator validated it against) has since been marked for deletion: then no offset is
  also right; at the end, each group's coordinator holds such an offset;
* :class:`DeletedTopicOffsetsRemoved`: once a deletion has been applied by the group's
  coordinator (:class:`~weir.sim.groups.DeletionApplied`: the online coordinator ran the
  UpdateMetadata handler's step and its tombstones were written), OffsetFetch never again
  answers an offset committed against the deleted incarnation of the topic (offsets of a
  topic re-created under the same name are committed against the new one and are owed as
  any others);
* :class:`OneAssignmentPerGeneration`: the members told they are in sync (SyncGroup answered
  NONE) for one generation id of a group all got the assignment of one and the same
  rebalance (Kafka answers SyncGroup only once the generation's metadata is durable, so a
  new coordinator can never hand out that generation id again);
* :class:`GenerationsNeverGoBack`: the coordinator of a group, whichever broker it moves
  to, holds a generation at least as new as any generation whose members were told they
  are in sync.

The last two hold per incarnation of a group: an Empty group left without offsets (when a
deleted topic took its last ones) is deleted, and its id starts again from generation 0
(Kafka's GroupMetadataManager.cleanupGroupMetadata; the old members' ids are unknown to the
new group, so nothing they hold is valid there).

Each has a test in ``tests/sim/test_groups.py`` that plants a bug and shows it is caught.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.coordinator_runtime import Loading
from weir.groups.codec import OFFSETS_TOPIC
from weir.protocol.errors import KafkaError
from weir.sim.invariants import Invariant

if TYPE_CHECKING:
    from weir.sim.groups import CommitAttempt, FetchObservation, GroupPlane
    from weir.sim.world import World

__all__ = ["AcknowledgedCommitsFetched", "DeletedTopicOffsetsRemoved", "GenerationsNeverGoBack",
           "GroupInvariants", "OneAssignmentPerGeneration", "group_invariants"]


class _EachOffsetFetch(Invariant):
    """Judges every OffsetFetch answer observed since the previous step, once."""

    def __init__(self) -> None:
        self._seen = 0

    def after_step(self, sim: World) -> Iterable[str]:
        plane = sim.groups
        if plane is None or len(plane.fetches) == self._seen:
            return []
        out: list[str] = []
        for obs in plane.fetches[self._seen:]:
            out.extend(self._judge(plane, obs))
        self._seen = len(plane.fetches)
        return out

    @staticmethod
    def _judge(plane: GroupPlane, obs: FetchObservation) -> list[str]:
        raise NotImplementedError


class AcknowledgedCommitsFetched(_EachOffsetFetch):
    """See the module docstring.  A commit C "may have been written after" an acknowledged
    commit A if C's write was not certainly over when A was sent (``CommitAttempt.end``)."""

    name = "acknowledged commits fetched"

    @staticmethod
    def _judge(plane: GroupPlane, obs: FetchObservation) -> list[str]:
        out = []
        for tp, value in sorted(obs.offsets.items()):
            message = _judge_excusing(plane, obs.broker, obs.group, tp, value, obs.served_at)
            if message:
                out.append(f"group {obs.group} {tp}: OffsetFetch from broker {obs.broker} at "
                           f"{obs.served_at}: {message}")
        return out

    def at_end(self, sim: World) -> Iterable[str]:
        plane = sim.groups
        if plane is None:
            return []
        out = []
        for group in sorted({g for g, _tp in plane.commits}):
            online = plane.online_coordinator(group)
            if online is None:
                out.append(f"group {group} has no online coordinator at the end")
                continue
            node, coordinator = online
            try:
                found = coordinator.fetch_offsets(group, None)
            except KafkaError as exc:
                out.append(f"group {group}: coordinator {node.id} answers {exc.code.name} "
                           f"at the end")
                continue
            for g, tp in sorted(plane.commits):
                if g != group:
                    continue
                stored = found.get(tp)
                message = _judge_excusing(plane, node.id, group, tp,
                                          None if stored is None else stored.offset, sim.now)
                if message:
                    out.append(f"group {group} {tp}: coordinator {node.id} at the end: "
                               f"{message}")
        return out


def _judge_excusing(plane: GroupPlane, broker: int, group: str, tp: TopicPartition,
                    value: int | None, served_at: int) -> str:
    """:func:`judge_fetched`, with the power-loss exemption of the data path: an
    acknowledged commit whose record the answering broker itself lost to power failure is
    forgiven (and forgotten: ``CommitAttempt.excused``)."""
    attempts = plane.commits.get((group, tp), [])
    message = judge_fetched(attempts, value, served_at, plane.marked)
    if not message:
        return ""
    lost, _generation = plane.lost_to_power_failure(broker, group)
    excused = [a for a in attempts if a.acked_at is not None and not a.excused
               and a.value in lost]
    if not excused:
        return message
    for attempt in excused:
        attempt.excused = True
        plane.stats["groups_excused_losses"] += 1
    return judge_fetched(attempts, value, served_at, plane.marked)


def judge_fetched(attempts: list[CommitAttempt], value: int | None, served_at: int,
                  marked: Mapping[uuid.UUID, int] | None = None) -> str:
    """Why ``value``, answered at ``served_at``, breaks the invariant ('' if it does not);
    excused attempts count as never acknowledged.  ``marked``: topic id -> when that topic
    incarnation was marked for deletion; from then on its commits may be gone (no offset),
    but an offset answered must still be the latest."""
    acked = [a for a in attempts if a.acked_at is not None and a.acked_at <= served_at
             and not a.excused]
    if value is None and marked:
        acked = [a for a in acked
                 if a.topic_id is None or marked.get(a.topic_id, served_at + 1) > served_at]
    if not acked:
        if value is not None and not any(a.value == value for a in attempts):
            return f"offset {value} was never committed"
        return ""
    if value is None:
        latest = max(acked, key=lambda a: a.acked_at or 0)
        return f"no offset, but {latest.value} was acknowledged at {latest.acked_at}"
    fetched = next((a for a in attempts if a.value == value), None)
    if fetched is None:
        return f"offset {value} was never committed"
    later = [a for a in acked if a is not fetched]
    if not later or fetched.end is None:
        return ""
    newest = max(later, key=lambda a: a.sent_at)
    if fetched.end < newest.sent_at:
        return (f"offset {value} (written by {fetched.end}) replaced {newest.value}, "
                f"acknowledged at {newest.acked_at}, sent at {newest.sent_at}")
    return ""


class DeletedTopicOffsetsRemoved(_EachOffsetFetch):
    """See the module docstring.  Judged on every OffsetFetch answered by the online
    coordinator, and at the end on each group's online coordinator.  The data path's
    power-loss exemption applies to the tombstones: once a broker lost one of the group's
    offset tombstones to power failure, the offset it deleted may be answered again (that
    broker may lead without it, and its followers then truncate it too)."""

    name = "deleted topic offsets removed"

    @staticmethod
    def _judge(plane: GroupPlane, obs: FetchObservation) -> list[str]:
        out = []
        for tp, value in sorted(obs.offsets.items()):
            message = judge_deleted(plane, obs.broker, obs.group, tp, value, obs.served_at)
            if message:
                out.append(f"group {obs.group} {tp}: OffsetFetch from broker {obs.broker} "
                           f"at {obs.served_at}: {message}")
        return out

    def at_end(self, sim: World) -> Iterable[str]:
        plane = sim.groups
        if plane is None:
            return []
        out = []
        for group in sorted({d.group for d in plane.applied}):
            online = plane.online_coordinator(group)
            if online is None:
                continue  # AcknowledgedCommitsFetched reports it if anything is owed
            node, coordinator = online
            try:
                found = coordinator.fetch_offsets(group, None)
            except KafkaError:
                continue
            for tp, stored in sorted(found.items()):
                message = judge_deleted(plane, node.id, group, tp,
                                        None if stored is None else stored.offset, sim.now)
                if message:
                    out.append(f"group {group} {tp}: coordinator {node.id} at the end: "
                               f"{message}")
        return out


def judge_deleted(plane: GroupPlane, broker: int, group: str, tp: TopicPartition,
                  value: int | None, served_at: int) -> str:
    """Why ``value`` answered by ``broker`` at ``served_at`` is an offset of a deleted topic
    incarnation that the group's coordinator had already removed ('' if it is not)."""
    if value is None:
        return ""
    attempt = next((a for a in plane.commits.get((group, tp), []) if a.value == value), None)
    if attempt is None or attempt.topic_id is None:
        return ""
    applied = next((d for d in plane.applied if d.group == group and d.tp == tp
                    and d.topic_id == attempt.topic_id and d.at <= served_at), None)
    if applied is None:
        return ""
    if tp in plane.lost_tombstones(group):
        plane.stats["groups_excused_losses"] += 1  # the power-loss exemption
        return ""
    return (f"offset {value} was committed against topic id {attempt.topic_id}, whose "
            f"deletion broker {applied.broker}, then the group's coordinator, had applied "
            f"by {applied.at}")


class OneAssignmentPerGeneration(Invariant):
    """See the module docstring: one (group, generation id) names one rebalance."""

    name = "one assignment per generation"

    def __init__(self) -> None:
        self._seen = 0
        self._deletions = _GroupDeletions()
        self._nonces: dict[tuple[str, int], tuple[str, str]] = {}

    def _forget(self, group: str) -> None:
        for key in [k for k in self._nonces if k[0] == group]:
            del self._nonces[key]

    def after_step(self, sim: World) -> Iterable[str]:
        plane = sim.groups
        if plane is None:
            return []
        out = []
        for obs in plane.syncs[self._seen:]:
            self._deletions.apply(plane, obs.at, self._forget)
            first = self._nonces.setdefault((obs.group, obs.generation), (obs.nonce, obs.member))
            if first[0] == obs.nonce:
                continue
            self._nonces[(obs.group, obs.generation)] = (obs.nonce, obs.member)
            # The power-loss exemption: the answering coordinator itself lost the metadata
            # of that generation, so it could hand its id out again.
            if plane.lost_to_power_failure(obs.broker, obs.group)[1] >= obs.generation:
                plane.stats["groups_excused_losses"] += 1
            else:
                out.append(f"group {obs.group} generation {obs.generation}: member "
                           f"{obs.member} was told by broker {obs.broker} that it is in sync "
                           f"with assignment {obs.nonce!r}, member {first[1]} with "
                           f"{first[0]!r}")
        self._seen = len(plane.syncs)
        self._deletions.apply(plane, sim.now, self._forget)
        return out


class _GroupDeletions:
    """Reads :attr:`GroupPlane.group_deletions` in order, up to a time."""

    def __init__(self) -> None:
        self._seen = 0

    def apply(self, plane: GroupPlane, upto: int, forget: Callable[[str], None]) -> None:
        while self._seen < len(plane.group_deletions) and \
                plane.group_deletions[self._seen][1] <= upto:
            forget(plane.group_deletions[self._seen][0])
            self._seen += 1


class GenerationsNeverGoBack(Invariant):
    """See the module docstring."""

    name = "generations never go back"

    def __init__(self) -> None:
        self._seen = 0
        self._deletions = _GroupDeletions()
        self._synced: dict[str, int] = {}

    def _forget(self, group: str) -> None:
        self._synced.pop(group, None)

    def after_step(self, sim: World) -> Iterable[str]:
        plane = sim.groups
        if plane is None:
            return []
        for obs in plane.syncs[self._seen:]:
            self._deletions.apply(plane, obs.at, self._forget)
            self._synced[obs.group] = max(self._synced.get(obs.group, -1), obs.generation)
        self._seen = len(plane.syncs)
        self._deletions.apply(plane, sim.now, self._forget)
        out = []
        for group, synced in sorted(self._synced.items()):
            if synced < 0:
                continue  # nothing owed (yet, or any more)
            online = plane.online_coordinator(group)
            if online is None:
                continue
            node, coordinator = online
            part = coordinator.partitions.get(coordinator.partition_for(group))
            if part is None or part.status is not Loading.LOADED:
                continue
            held = part.groups.get(group)
            if held is not None and held.generation >= synced:
                continue
            generation = -1 if held is None else held.generation
            if plane.lost_to_power_failure(node.id, group)[1] > generation:
                plane.stats["groups_excused_losses"] += 1  # the power-loss exemption
                self._synced[group] = generation
                continue
            out.append(f"group {group}: coordinator {node.id} "
                       f"({TopicPartition(OFFSETS_TOPIC, part.index)}) holds generation "
                       f"{None if held is None else held.generation}, but members were told "
                       f"generation {synced} is in sync")
            self._synced[group] = generation  # reported once
        return out


def group_invariants() -> list[Invariant]:
    """A fresh set of the consumer groups' invariants."""
    return [AcknowledgedCommitsFetched(), OneAssignmentPerGeneration(),
            GenerationsNeverGoBack(), DeletedTopicOffsetsRemoved()]


class GroupInvariants(Invariant):
    """The consumer groups' invariants (:func:`group_invariants`, or ``parts``); their
    messages are prefixed with their names."""

    name = "groups"

    def __init__(self, parts: list[Invariant] | None = None) -> None:
        self.parts = group_invariants() if parts is None else parts

    def after_step(self, sim: World) -> Iterable[str]:
        if sim.groups is None:
            return []
        return [f"{part.name}: {message}" for part in self.parts
                for message in part.after_step(sim)]

    def at_end(self, sim: World) -> Iterable[str]:
        if sim.groups is None:
            return []
        return [f"{part.name}: {message}" for part in self.parts
                for message in part.at_end(sim)]

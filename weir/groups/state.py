"""The classic group protocol as a sans-I/O state machine (one :class:`Group` per group id).

Requests (join, sync, heartbeat, leave, commit validation) and the passing of time
(:meth:`Group.tick`) go in with ``now_ms``; what comes out is an :class:`Outcome`: responses
owed to members whose JoinGroup/SyncGroup requests are parked, and whether the group's
metadata must be written to ``__consumer_offsets``.  The shell
(:mod:`weir.groups.coordinator`) owns the parked requests, the writes and the clock.

States follow Kafka: Empty → PreparingRebalance → CompletingRebalance → Stable, with Dead
for a deleted or unloaded group.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.config.keys import default_value
from weir.groups.codec import GroupRecord, MemberRecord, OffsetAndMetadata
from weir.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from weir.config import BrokerConfig


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A group's limits (Kafka's ``GroupConfig``); the field defaults are the key table's,
    :meth:`from_config` reads a broker config."""

    min_session_timeout_ms: int = default_value("group.min.session.timeout.ms")
    max_session_timeout_ms: int = default_value("group.max.session.timeout.ms")
    initial_rebalance_delay_ms: int = default_value("group.initial.rebalance.delay.ms")
    max_size: int = default_value("group.max.size")

    @classmethod
    def from_config(cls, config: BrokerConfig) -> GroupConfig:
        return cls(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            max_size=config.group_max_size,
        )


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    last_heartbeat_ms: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")


@dataclass(frozen=True, slots=True)
class JoinRequest:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class Outcome:
    """Responses owed to parked requests and the writes the shell must make."""

    joins: dict[str, JoinResult] = field(default_factory=dict)
    syncs: dict[str, SyncResult] = field(default_factory=dict)
    store_for_sync: int | None = None  # generation whose assignment awaits a durable write
    store: bool = False  # write the group's metadata, nothing waits for it

    def merge(self, other: Outcome) -> Outcome:
        self.joins.update(other.joins)
        self.syncs.update(other.syncs)
        self.store_for_sync = other.store_for_sync or self.store_for_sync
        self.store = self.store or other.store
        return self


def new_member_id(client_id: str, instance_id: str | None = None) -> str:
    return f"{instance_id or client_id}-{uuid.uuid4()}"


class Group:
    def __init__(self, group_id: str, config: GroupConfig, now_ms: int) -> None:
        self.group_id = group_id
        self.config = config
        self.state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id → member id
        self.pending_members: dict[str, int] = {}  # KIP-394 ids handed out → expiry
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        # Offset commits written but not yet acknowledged, per partition (Kafka's
        # GroupMetadata.pendingOffsetCommits): a deletion of the partition removes them too.
        self.pending_offsets: dict[TopicPartition, int] = {}
        # Commits appended to the log whose write then failed (timed out waiting for the
        # followers): they may still be replicated, and a load would read them.
        self.unsettled_offsets: set[TopicPartition] = set()
        # Where the latest tombstone of each partition was written: a commit written before
        # it that completes after it stays deleted (the log's order decides, as on a load).
        self.removed_at: dict[TopicPartition, int] = {}
        self.join_deadline = 0
        self.initial_delay_until = 0
        self.initial_delay_limit = 0
        self.sync_deadline = 0  # pending-sync watch (Kafka's DelayedSync); 0: none
        self.synced: set[str] = set()

    # -- small helpers ------------------------------------------------------------------

    def _transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def is_leader(self, member_id: str) -> bool:
        return self.leader == member_id

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def _supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        return (protocol_type == self.protocol_type
                and bool({n for n, _ in protocols} & self.candidate_protocols()))

    def _select_protocol(self) -> str | None:
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
            if choice not in order:
                order.append(choice)
        return max(order, key=lambda name: votes[name])

    def _all_joined(self) -> bool:
        return (all(m.awaiting_join for m in self.members.values())
                and not self.pending_members)

    def _fenced(self, member_id: str, instance_id: str | None) -> bool:
        return instance_id is not None and self.static_members.get(instance_id, member_id) != member_id

    def _member_check(self, member_id: str, instance_id: str | None) -> ErrorCode:
        if self._fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    # -- JoinGroup -------------------------------------------------------------------------

    def join(self, req: JoinRequest, now_ms: int) -> tuple[JoinResult | None, str, Outcome]:
        """(immediate response or None to park the request under member id, member id, effects)."""
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return JoinResult(ErrorCode.invalid_session_timeout, req.member_id), "", Outcome()
        if self.state == GroupState.DEAD:
            return JoinResult(ErrorCode.coordinator_not_available, req.member_id), "", Outcome()
        if not self._supports(req.protocol_type, req.protocols):
            return (JoinResult(ErrorCode.inconsistent_group_protocol, req.member_id), "",
                    Outcome())
        if not req.member_id:
            return self._join_unknown(req, now_ms)
        return self._join_known(req, now_ms)

    def _full(self) -> bool:
        return len(self.members) + len(self.pending_members) >= self.config.max_size

    def _join_unknown(self, req: JoinRequest, now_ms: int) -> tuple[JoinResult | None, str, Outcome]:
        instance = req.group_instance_id
        if instance is not None and instance in self.static_members:
            return self._replace_static(req, now_ms)
        if self._full():
            return JoinResult(ErrorCode.group_max_size_reached), "", Outcome()
        member_id = new_member_id(req.client_id, instance)
        if instance is None and req.require_known_member_id:
            self.pending_members[member_id] = now_ms + req.session_timeout_ms
            return JoinResult(ErrorCode.member_id_required, member_id), "", Outcome()
        return None, member_id, self._add_member(member_id, req, now_ms)

    def _join_known(self, req: JoinRequest, now_ms: int) -> tuple[JoinResult | None, str, Outcome]:
        mid = req.member_id
        if mid in self.pending_members and mid not in self.members:
            del self.pending_members[mid]
            return None, mid, self._add_member(mid, req, now_ms)
        error = self._member_check(mid, req.group_instance_id)
        if error != ErrorCode.none or self.state == GroupState.EMPTY:
            return JoinResult(error if error != ErrorCode.none
                              else ErrorCode.unknown_member_id, mid), "", Outcome()
        member = self.members[mid]
        same = member.protocols == req.protocols
        if self.state == GroupState.PREPARING_REBALANCE:
            self._update_member(member, req, now_ms)
            return None, mid, self._maybe_complete_join(now_ms)
        if self.state == GroupState.COMPLETING_REBALANCE and same:
            return self._current_join_result(mid, with_members=self.is_leader(mid)), mid, Outcome()
        if self.state == GroupState.STABLE and same and not self.is_leader(mid):
            return self._current_join_result(mid, with_members=False), mid, Outcome()
        self._update_member(member, req, now_ms)
        return None, mid, self._prepare_rebalance(now_ms)

    def _replace_static(self, req: JoinRequest, now_ms: int) -> tuple[JoinResult | None, str, Outcome]:
        """A known group.instance.id joins with no member id: it takes a fresh id, the old
        one is fenced; a Stable group with unchanged protocols does not rebalance."""
        assert req.group_instance_id is not None
        old_id = self.static_members[req.group_instance_id]
        old = self.members.pop(old_id)
        outcome = Outcome()
        if old.awaiting_join:
            outcome.joins[old_id] = JoinResult(ErrorCode.fenced_instance_id, old_id)
        if old.awaiting_sync:
            outcome.syncs[old_id] = SyncResult(ErrorCode.fenced_instance_id)
        new_id = new_member_id(req.client_id, req.group_instance_id)
        old.member_id = new_id
        old.awaiting_join = old.awaiting_sync = False
        self.members[new_id] = old
        self.static_members[req.group_instance_id] = new_id
        if old_id in self.synced:
            self.synced.add(new_id)
        was_leader = self.leader == old_id
        if was_leader:
            self.leader = new_id
        same = old.protocols == req.protocols
        if self.state == GroupState.STABLE and same and not was_leader:
            old.last_heartbeat_ms = now_ms
            old.session_timeout_ms = req.session_timeout_ms
            old.rebalance_timeout_ms = req.rebalance_timeout_ms
            outcome.store = True
            return self._current_join_result(new_id, with_members=False), new_id, outcome
        self._update_member(old, req, now_ms)
        outcome.merge(self._prepare_rebalance(now_ms) if self.state != GroupState.PREPARING_REBALANCE
                      else self._maybe_complete_join(now_ms))
        return None, new_id, outcome

    def _update_member(self, member: Member, req: JoinRequest, now_ms: int) -> None:
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        member.awaiting_join = True
        member.last_heartbeat_ms = now_ms

    def _add_member(self, member_id: str, req: JoinRequest, now_ms: int) -> Outcome:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                        list(req.protocols), awaiting_join=True, last_heartbeat_ms=now_ms)
        if not self.members:
            self.protocol_type = req.protocol_type
        self.members[member_id] = member
        if req.group_instance_id is not None:
            self.static_members[req.group_instance_id] = member_id
        if self.leader is None or self.leader not in self.members:
            self.leader = member_id
        if self.state == GroupState.PREPARING_REBALANCE:
            if now_ms < self.initial_delay_until:
                self.initial_delay_until = min(
                    now_ms + self.config.initial_rebalance_delay_ms, self.initial_delay_limit)
            return self._maybe_complete_join(now_ms)
        return self._prepare_rebalance(now_ms)

    def _current_join_result(self, member_id: str, with_members: bool) -> JoinResult:
        members = []
        if with_members:
            members = [(m.member_id, m.group_instance_id, m.metadata(self.protocol))
                       for m in self.members.values()]
        return JoinResult(ErrorCode.none, member_id, self.generation, self.protocol_type,
                          self.protocol, self.leader or "", members)

    def _rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _prepare_rebalance(self, now_ms: int) -> Outcome:
        outcome = Outcome()
        if self.state == GroupState.COMPLETING_REBALANCE:
            outcome.merge(self._fail_syncs(ErrorCode.rebalance_in_progress))
        timeout = self._rebalance_timeout()
        if self.state == GroupState.EMPTY:
            delay = min(self.config.initial_rebalance_delay_ms, timeout)
            self.initial_delay_until = now_ms + delay
            self.initial_delay_limit = now_ms + timeout
        self.join_deadline = now_ms + timeout
        self.sync_deadline = 0  # Kafka's removeSyncExpiration
        self._transition(GroupState.PREPARING_REBALANCE, now_ms)
        return outcome.merge(self._maybe_complete_join(now_ms))

    def _fail_syncs(self, error: ErrorCode) -> Outcome:
        outcome = Outcome()
        for m in self.members.values():
            m.assignment = b""
            if m.awaiting_sync:
                m.awaiting_sync = False
                outcome.syncs[m.member_id] = SyncResult(error)
        return outcome

    def _maybe_complete_join(self, now_ms: int) -> Outcome:
        if self.state != GroupState.PREPARING_REBALANCE:
            return Outcome()
        if now_ms < self.initial_delay_until:
            return Outcome()
        if self._all_joined() or now_ms >= self.join_deadline:
            return self._complete_join(now_ms)
        return Outcome()

    def _complete_join(self, now_ms: int) -> Outcome:
        outcome = Outcome()
        for m in list(self.members.values()):
            if not m.awaiting_join and m.group_instance_id is None:
                outcome.merge(self._remove(m.member_id))
        self.initial_delay_until = 0
        self.generation += 1
        if not self.members:
            self.protocol = self.leader = None
            self._transition(GroupState.EMPTY, now_ms)
            outcome.store = True
            return outcome
        if self.leader not in self.members or not self.members[self.leader].awaiting_join:
            joined = [m for m in self.members.values() if m.awaiting_join]
            self.leader = (joined[0] if joined else next(iter(self.members.values()))).member_id
        self.protocol = self._select_protocol()
        self._transition(GroupState.COMPLETING_REBALANCE, now_ms)
        self.sync_deadline = now_ms + self._rebalance_timeout()
        self.synced = set()
        for m in self.members.values():
            m.last_heartbeat_ms = now_ms
            if m.awaiting_join:
                m.awaiting_join = False
                outcome.joins[m.member_id] = self._current_join_result(
                    m.member_id, with_members=self.is_leader(m.member_id))
        return outcome

    # -- SyncGroup -------------------------------------------------------------------------

    def sync(self, member_id: str, instance_id: str | None, generation: int,
             protocol_type: str | None, protocol_name: str | None,
             assignments: dict[str, bytes], now_ms: int) -> tuple[SyncResult | None, Outcome]:
        if self.state == GroupState.DEAD:
            return SyncResult(ErrorCode.coordinator_not_available), Outcome()
        error = self._member_check(member_id, instance_id)
        if error != ErrorCode.none:
            return SyncResult(error), Outcome()
        if generation != self.generation:
            return SyncResult(ErrorCode.illegal_generation), Outcome()
        if ((protocol_type is not None and protocol_type != self.protocol_type)
                or (protocol_name is not None and protocol_name != self.protocol)):
            return SyncResult(ErrorCode.inconsistent_group_protocol), Outcome()
        member = self.members[member_id]
        member.last_heartbeat_ms = now_ms
        if self.state == GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress), Outcome()
        if self.state == GroupState.STABLE:
            self._synced(member_id)
            return self._sync_result(member), Outcome()
        if self.state != GroupState.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.unknown_member_id), Outcome()
        member.awaiting_sync = True
        self._synced(member_id)
        outcome = Outcome()
        if self.is_leader(member_id):
            for m in self.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            outcome.store_for_sync = self.generation
        return None, outcome

    def _synced(self, member_id: str) -> None:
        self.synced.add(member_id)
        if self.sync_deadline and not set(self.members) - self.synced:
            self.sync_deadline = 0  # everyone synced: the watch ends

    def _sync_result(self, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.none, self.protocol_type, self.protocol, member.assignment)

    def on_stored(self, generation: int, error: ErrorCode, now_ms: int) -> Outcome:
        """The write of generation ``generation``'s assignment finished (``error`` none or
        the coordinator error to report)."""
        if self.state != GroupState.COMPLETING_REBALANCE or generation != self.generation:
            return Outcome()
        if error != ErrorCode.none:
            return self._fail_syncs(error).merge(self._prepare_rebalance(now_ms))
        self._transition(GroupState.STABLE, now_ms)
        outcome = Outcome()
        for m in self.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                outcome.syncs[m.member_id] = self._sync_result(m)
        return outcome

    # -- Heartbeat, LeaveGroup ---------------------------------------------------------------

    def heartbeat(self, member_id: str, instance_id: str | None, generation: int,
                  now_ms: int) -> ErrorCode:
        if self.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        error = self._member_check(member_id, instance_id)
        if error != ErrorCode.none:
            return error
        if self.state == GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        if generation != self.generation:
            return ErrorCode.illegal_generation
        self.members[member_id].last_heartbeat_ms = now_ms
        if self.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, member_id: str, instance_id: str | None,
              now_ms: int) -> tuple[ErrorCode, Outcome]:
        if self.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available, Outcome()
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is None:
                return ErrorCode.unknown_member_id, Outcome()
            if member_id and member_id != known:
                return ErrorCode.fenced_instance_id, Outcome()
            member_id = known
        elif member_id in self.pending_members:
            del self.pending_members[member_id]
            return ErrorCode.none, self._maybe_complete_join(now_ms)
        if member_id not in self.members:
            return ErrorCode.unknown_member_id, Outcome()
        return ErrorCode.none, self._remove_and_rebalance(member_id, now_ms)

    def _remove(self, member_id: str) -> Outcome:
        outcome = Outcome()
        member = self.members.pop(member_id)
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if member.awaiting_join:
            outcome.joins[member_id] = JoinResult(ErrorCode.unknown_member_id, member_id)
        if member.awaiting_sync:
            outcome.syncs[member_id] = SyncResult(ErrorCode.unknown_member_id)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return outcome

    def _remove_and_rebalance(self, member_id: str, now_ms: int) -> Outcome:
        outcome = self._remove(member_id)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return outcome.merge(self._prepare_rebalance(now_ms))
        return outcome.merge(self._maybe_complete_join(now_ms))

    # -- time ------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> Outcome:
        """Expire sessions and pending member ids, finish joins and syncs that timed out."""
        outcome = Outcome()
        for mid, deadline in list(self.pending_members.items()):
            if now_ms >= deadline:
                del self.pending_members[mid]
        if self._sync_watched() and now_ms >= self.sync_deadline:
            # Kafka's onExpirePendingSync, in CompletingRebalance and Stable alike.
            self.sync_deadline = 0
            unsynced = [m for m in self.members if m not in self.synced]
            if unsynced:
                for mid in unsynced:
                    outcome.merge(self._remove(mid))
                return outcome.merge(self._prepare_rebalance(now_ms))
        for m in list(self.members.values()):
            if m.member_id in self.members and self._expired(m, now_ms):
                outcome.merge(self._remove_and_rebalance(m.member_id, now_ms))
        return outcome.merge(self._maybe_complete_join(now_ms))

    def _expired(self, m: Member, now_ms: int) -> bool:
        if m.awaiting_join or m.awaiting_sync:
            return False
        return now_ms >= m.last_heartbeat_ms + m.session_timeout_ms

    def next_deadline(self) -> int | None:
        """Earliest time :meth:`tick` could change something (None: nothing pending)."""
        return min(self.deadlines(), default=None)

    def deadlines(self) -> list[int]:
        """Every time at which :meth:`tick` could change something: the sessions'
        (last heartbeat + session timeout), the pending member ids', the join and sync
        timeouts and the initial rebalance delay while they run."""
        times = list(self.pending_members.values())
        times += [m.last_heartbeat_ms + m.session_timeout_ms for m in self.members.values()]
        if self.state == GroupState.PREPARING_REBALANCE:
            times += [self.join_deadline, self.initial_delay_until]
        if self._sync_watched():
            times.append(self.sync_deadline)
        return times

    def _sync_watched(self) -> bool:
        return bool(self.sync_deadline) and self.state in (GroupState.COMPLETING_REBALANCE,
                                                            GroupState.STABLE)

    # -- offsets ---------------------------------------------------------------------------

    def validate_commit(self, member_id: str, instance_id: str | None, generation: int,
                        now_ms: int) -> ErrorCode:
        if self.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation < 0 and self.state == GroupState.EMPTY:
            return ErrorCode.none  # a consumer without group management, or an admin
        error = self._member_check(member_id, instance_id)
        if error != ErrorCode.none:
            return error
        if generation != self.generation:
            return ErrorCode.illegal_generation
        if self.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        self.members[member_id].last_heartbeat_ms = now_ms
        return ErrorCode.none

    def apply_offset(self, tp: TopicPartition, value: OffsetAndMetadata | None,
                     removed_at: int = -1) -> None:
        """Install a written commit, or a tombstone written at ``removed_at`` (-1: unknown,
        it removes whatever is here), unless a later write is already here: writes that
        complete out of the log's order end as a load of the log would."""
        current = self.offsets.get(tp)
        if value is None:
            if current is None or removed_at < 0 or current.record_offset < removed_at:
                self.offsets.pop(tp, None)
            if removed_at > self.removed_at.get(tp, -1):
                self.removed_at[tp] = removed_at
        elif value.record_offset < self.removed_at.get(tp, -1):
            return  # written before a tombstone that completed first
        elif current is None or value.record_offset >= current.record_offset:
            self.offsets[tp] = value

    def add_pending_offsets(self, tps: Iterable[TopicPartition], delta: int) -> None:
        """Count commits of ``tps`` being written (``delta`` 1) or done (-1)."""
        for tp in tps:
            count = self.pending_offsets.get(tp, 0) + delta
            if count > 0:
                self.pending_offsets[tp] = count
            else:
                self.pending_offsets.pop(tp, None)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol); None if unknown."""
        from weir.groups.codec import subscribed_topics

        if self.protocol_type != "consumer" or not self.members:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            topics |= subscribed_topics("consumer", m.metadata(self.protocol))
        return topics

    # -- persistence -------------------------------------------------------------------------

    def to_record(self) -> GroupRecord:
        return GroupRecord(
            self.protocol_type or "", self.generation, self.protocol, self.leader,
            self.state_timestamp,
            [MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          m.rebalance_timeout_ms, m.session_timeout_ms,
                          m.metadata(self.protocol), m.assignment)
             for m in self.members.values()],
        )

    @classmethod
    def from_record(cls, group_id: str, record: GroupRecord, config: GroupConfig,
                    now_ms: int) -> Group:
        group = cls(group_id, config, now_ms)
        group.generation = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol = record.protocol
        group.leader = record.leader
        if record.current_state_timestamp >= 0:
            group.state_timestamp = record.current_state_timestamp
        for mr in record.members:
            group.members[mr.member_id] = Member(
                mr.member_id, mr.group_instance_id, mr.client_id, mr.client_host,
                mr.rebalance_timeout_ms, mr.session_timeout_ms, record.protocol_type,
                [(record.protocol or "", mr.subscription)], mr.assignment,
                last_heartbeat_ms=now_ms)
            if mr.group_instance_id is not None:
                group.static_members[mr.group_instance_id] = mr.member_id
        if group.members:
            group.state = GroupState.STABLE
        return group

    def mark_dead(self, now_ms: int) -> Outcome:
        """Unloaded or deleted: park nobody any longer."""
        outcome = Outcome()
        for m in self.members.values():
            if m.awaiting_join:
                outcome.joins[m.member_id] = JoinResult(ErrorCode.not_coordinator, m.member_id)
            if m.awaiting_sync:
                outcome.syncs[m.member_id] = SyncResult(ErrorCode.not_coordinator)
        self.members.clear()
        self.static_members.clear()
        self._transition(GroupState.DEAD, now_ms)
        return outcome

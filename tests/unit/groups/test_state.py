"""The sans-I/O group state machine: joins, syncs, heartbeats, leaves, timeouts."""

from __future__ import annotations

from weir.common import TopicPartition
from weir.groups.codec import OffsetAndMetadata
from weir.groups.state import Group, GroupConfig, GroupState, JoinRequest
from weir.protocol.errors import ErrorCode

CFG = GroupConfig(min_session_timeout_ms=1000, max_session_timeout_ms=60000,
                  initial_rebalance_delay_ms=0)


def req(member_id: str = "", *, instance: str | None = None, session: int = 10000,
        rebalance: int = 30000, protocols=(("range", b"meta"),), ptype: str = "consumer",
        kip394: bool = True) -> JoinRequest:
    return JoinRequest(member_id, instance, "client", "/127.0.0.1", session, rebalance, ptype,
                       list(protocols), kip394)


def join_new(group: Group, now: int = 0, **kw):
    """KIP-394 round trip: (member id, outcome of the second join)."""
    first, _, _ = group.join(req(**kw), now)
    assert first.error == ErrorCode.member_id_required
    immediate, member_id, outcome = group.join(req(first.member_id, **kw), now)
    assert immediate is None and member_id == first.member_id
    return member_id, outcome


def stable_pair(now: int = 0):
    """A Stable group with members a (leader) and b at generation 2."""
    g = Group("g", CFG, now)
    a, out = join_new(g, now)
    assert out.joins[a].generation_id == 1
    b, out = join_new(g, now)
    assert g.state == GroupState.PREPARING_REBALANCE and not out.joins
    assert g.heartbeat(a, None, 1, now) == ErrorCode.rebalance_in_progress
    imm, _, out = g.join(req(a), now)
    assert imm is None and set(out.joins) == {a, b}
    assert g.generation == 2 and g.leader == a
    assert {m for m, _, _ in out.joins[a].members} == {a, b}
    assert out.joins[b].members == []
    imm, out = g.sync(b, None, 2, None, None, {}, now)
    assert imm is None and out.store_for_sync is None
    imm, out = g.sync(a, None, 2, None, None, {a: b"A", b: b"B"}, now)
    assert imm is None and out.store_for_sync == 2
    out = g.on_stored(2, ErrorCode.none, now)
    assert out.syncs[a].assignment == b"A" and out.syncs[b].assignment == b"B"
    assert g.state == GroupState.STABLE
    return g, a, b


def test_first_member_completes_join_and_sync():
    g = Group("g", CFG, 0)
    a, out = join_new(g)
    result = out.joins[a]
    assert (result.error, result.generation_id, result.leader) == (ErrorCode.none, 1, a)
    assert result.protocol_name == "range"
    assert result.members == [(a, None, b"meta")]
    assert g.state == GroupState.COMPLETING_REBALANCE


def test_two_members_rebalance_and_sync():
    g, _a, b = stable_pair()
    assert g.heartbeat(b, None, 2, 5) == ErrorCode.none
    assert g.heartbeat(b, None, 1, 5) == ErrorCode.illegal_generation
    assert g.heartbeat("nobody", None, 2, 5) == ErrorCode.unknown_member_id


def test_failed_store_fails_syncs_and_rebalances():
    g = Group("g", CFG, 0)
    a, _ = join_new(g)
    g.sync(a, None, 1, None, None, {a: b"x"}, 0)
    out = g.on_stored(1, ErrorCode.not_coordinator, 0)
    assert out.syncs[a].error == ErrorCode.not_coordinator
    assert g.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)


def test_stable_follower_rejoin_with_same_protocols_does_not_rebalance():
    g, _a, b = stable_pair()
    imm, _, _out = g.join(req(b), 10)
    assert imm is not None and imm.generation_id == 2 and g.state == GroupState.STABLE


def test_session_expiry_removes_member_and_rebalances():
    g, a, b = stable_pair()
    g.heartbeat(a, None, 2, 9000)
    out = g.tick(10001)  # b's last heartbeat was at 0, session 10 s
    assert b not in g.members and g.state == GroupState.PREPARING_REBALANCE
    assert not out.joins
    _imm, _, out = g.join(req(a), 10002)
    assert out.joins[a].generation_id == 3 and out.joins[a].members == [(a, None, b"meta")]


def test_member_not_rejoining_is_dropped_at_rebalance_deadline():
    g, a, b = stable_pair()
    c, _ = join_new(g, 100)
    g.join(req(a), 100)
    assert g.state == GroupState.PREPARING_REBALANCE
    g.heartbeat(b, None, 2, 20000)  # alive, but never rejoins
    out = g.tick(100 + 30000)
    assert set(out.joins) == {a, c} and b not in g.members
    assert out.joins[a].generation_id == 3


def test_pending_member_id_expires():
    g = Group("g", CFG, 0)
    first, _, _ = g.join(req(), 0)
    assert first.member_id in g.pending_members
    g.tick(10000)
    assert not g.pending_members


def test_leave_triggers_rebalance_and_unknown_member():
    g, a, b = stable_pair()
    error, out = g.leave(b, None, 10)
    assert error == ErrorCode.none and g.state == GroupState.PREPARING_REBALANCE
    _imm, _, out = g.join(req(a), 11)
    assert out.joins[a].generation_id == 3
    assert g.leave("ghost", None, 12)[0] == ErrorCode.unknown_member_id


def test_last_member_leaving_empties_the_group():
    g = Group("g", CFG, 0)
    a, _ = join_new(g)
    error, out = g.leave(a, None, 5)
    assert error == ErrorCode.none
    assert g.state == GroupState.EMPTY and out.store and g.generation == 2


def test_static_member_rejoin_gets_new_id_without_rebalance():
    g = Group("g", CFG, 0)
    imm, a, out = g.join(req(instance="i-1"), 0)  # static members skip MEMBER_ID_REQUIRED
    assert imm is None and out.joins[a].generation_id == 1
    imm, b, _ = g.join(req(instance="i-2"), 0)
    g.join(req(a, instance="i-1"), 0)
    g.sync(a, "i-1", 2, None, None, {}, 0)
    g.sync(b, "i-2", 2, None, None, {}, 0)
    g.on_stored(2, ErrorCode.none, 0)
    assert g.state == GroupState.STABLE and g.leader == a
    imm, new_b, out = g.join(req(instance="i-2"), 10)
    assert imm is not None and imm.error == ErrorCode.none and new_b != b
    assert g.state == GroupState.STABLE and g.generation == 2 and out.store
    assert g.heartbeat(b, "i-2", 2, 11) == ErrorCode.fenced_instance_id
    assert g.heartbeat(new_b, "i-2", 2, 11) == ErrorCode.none
    assert g.leave(b, "i-2", 12)[0] == ErrorCode.fenced_instance_id


def test_protocol_checks_and_selection():
    g = Group("g", CFG, 0)
    assert g.join(req(session=10), 0)[0].error == ErrorCode.invalid_session_timeout
    a, _ = join_new(g, protocols=(("range", b"r"), ("roundrobin", b"rr")))
    bad = g.join(req(ptype="connect"), 0)[0]
    assert bad.error == ErrorCode.inconsistent_group_protocol
    assert g.join(req(protocols=(("sticky", b""),)), 0)[0].error == \
        ErrorCode.inconsistent_group_protocol
    _b, _ = join_new(g, protocols=(("roundrobin", b"rr2"),))
    _imm, _, out = g.join(req(a, protocols=(("range", b"r"), ("roundrobin", b"rr"))), 0)
    assert g.protocol == "roundrobin"
    assert (a, None, b"rr") in out.joins[a].members


def test_join_without_kip394_adds_member_directly():
    g = Group("g", CFG, 0)
    imm, a, out = g.join(req(kip394=False), 0)
    assert imm is None and out.joins[a].generation_id == 1


def test_initial_rebalance_delay_collects_members():
    g = Group("g", GroupConfig(1000, 60000, initial_rebalance_delay_ms=3000), 0)
    a, out = join_new(g, 0)
    assert not out.joins
    b, out = join_new(g, 2000)
    assert not out.joins
    assert not g.tick(4000).joins
    out = g.tick(5000)
    assert set(out.joins) == {a, b}


def test_commit_validation():
    g = Group("g", CFG, 0)
    assert g.validate_commit("", None, -1, 0) == ErrorCode.none
    a, _ = join_new(g)
    assert g.validate_commit(a, None, 1, 0) == ErrorCode.rebalance_in_progress
    g.sync(a, None, 1, None, None, {a: b""}, 0)
    g.on_stored(1, ErrorCode.none, 0)
    assert g.validate_commit(a, None, 1, 0) == ErrorCode.none
    assert g.validate_commit(a, None, 0, 0) == ErrorCode.illegal_generation
    assert g.validate_commit("x", None, 1, 0) == ErrorCode.unknown_member_id


def test_apply_offset_keeps_the_latest_write():
    g = Group("g", CFG, 0)
    tp = TopicPartition("t", 0)
    g.apply_offset(tp, OffsetAndMetadata(10, record_offset=5))
    g.apply_offset(tp, OffsetAndMetadata(7, record_offset=3))  # an older write completing late
    assert g.offsets[tp].offset == 10
    g.apply_offset(tp, None)
    assert tp not in g.offsets


def test_record_round_trip_restores_stable_group():
    g, a, b = stable_pair()
    restored = Group.from_record("g", g.to_record(), CFG, 50)
    assert restored.state == GroupState.STABLE and restored.generation == 2
    assert restored.members[b].assignment == b"B" and restored.leader == a
    assert restored.heartbeat(b, None, 2, 60) == ErrorCode.none


def test_mark_dead_answers_parked_requests():
    g, _a, _b = stable_pair()
    c, _ = join_new(g, 5)  # parked until a and b rejoin
    out = g.mark_dead(6)
    assert out.joins[c].error == ErrorCode.not_coordinator
    assert g.state == GroupState.DEAD


def test_offset_expiry_rules():
    from weir.groups.coordinator import _expired_offsets

    tp, other = TopicPartition("t", 0), TopicPartition("old", 0)
    simple = Group("s", CFG, 0)  # no protocol: each offset expires after its commit
    simple.offsets = {tp: OffsetAndMetadata(1, commit_timestamp=0),
                      other: OffsetAndMetadata(1, commit_timestamp=500)}
    assert _expired_offsets(simple, 999, 600) == [tp]
    assert _expired_offsets(simple, 100, 600) is None
    empty = Group("e", CFG, 0)
    a, _ = join_new(empty)
    empty.leave(a, None, 1000)  # Empty since t=1000: all offsets go together
    empty.offsets = {tp: OffsetAndMetadata(1, commit_timestamp=0)}
    assert _expired_offsets(empty, 1500, 600) is None
    assert _expired_offsets(empty, 1600, 600) == [tp]
    g, _a, _b = stable_pair()
    g.members[_a].protocols = [("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t")]
    g.offsets = {tp: OffsetAndMetadata(1, commit_timestamp=0),
                 other: OffsetAndMetadata(1, commit_timestamp=0)}
    assert _expired_offsets(g, 10_000, 600) == [other]  # not subscribed any more

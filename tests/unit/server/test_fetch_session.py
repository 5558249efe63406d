"""Incremental fetch sessions (KIP-227): Kafka's FetchSession.scala rules, sans I/O."""

from __future__ import annotations

import random
import uuid

from weir.protocol.errors import ErrorCode
from weir.protocol.fetch_response import PartitionData
from weir.server.fetch_session import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSessionCache,
    PartitionRequest,
    next_epoch,
)

T0 = 1_000_000


def req(topic: str, partition: int, offset: int = 0, topic_id: uuid.UUID | None = None):
    return PartitionRequest(topic, topic_id, partition, offset, 1 << 20)


def data(partition: int, hw: int = 10, lso: int = 0, records: bytes = b"", error: int = 0,
         preferred: int = -1, diverging=None):
    return PartitionData(partition_index=partition, error_code=error, high_watermark=hw,
                         last_stable_offset=hw, log_start_offset=lso, records=records,
                         preferred_read_replica=preferred, diverging_epoch=diverging)


def open_session(cache: FetchSessionCache, parts, now=T0, version=12, follower=False,
                 answers=None):
    ctx = cache.new_context(version, INVALID_SESSION_ID, INITIAL_EPOCH, follower, parts, [], now)
    assert ctx.kind == "full"
    answers = answers or [(p, data(p.partition)) for p in parts]
    error, sid, kept = ctx.respond(answers, now)
    assert error == 0 and kept == answers
    return sid


def test_next_epoch_wraps_to_one_and_final_stays_final():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(7) == 8
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_fetch_creates_a_session_and_incremental_fetches_advance_its_epoch():
    cache = FetchSessionCache(rng=random.Random(1))
    parts = [req("a", 0), req("a", 1)]
    sid = open_session(cache, parts)
    assert sid != INVALID_SESSION_ID and cache.sessions[sid].epoch == 1
    assert cache.num_partitions == 2
    ctx = cache.new_context(12, sid, 1, False, [], [], T0 + 1)
    assert ctx.kind == "incremental"
    # The broker reads every partition of the session, not only those the request named.
    assert [(p.topic, p.partition) for p in ctx.partitions] == [("a", 0), ("a", 1)]
    assert cache.sessions[sid].epoch == 2
    # A repeat of epoch 1 is refused; the right epoch goes on.
    assert cache.new_context(12, sid, 1, False, [], [], T0 + 2).error == \
        ErrorCode.invalid_fetch_session_epoch
    assert cache.new_context(12, sid, 2, False, [], [], T0 + 2).kind == "incremental"


def test_unknown_session_and_final_epoch():
    cache = FetchSessionCache(rng=random.Random(2))
    assert cache.new_context(12, 12345, 1, False, [], [], T0).error == \
        ErrorCode.fetch_session_id_not_found
    sid = open_session(cache, [req("a", 0)])
    # A full fetch with the final epoch closes the session and creates none.
    ctx = cache.new_context(12, sid, FINAL_EPOCH, False, [req("a", 0)], [], T0)
    assert ctx.kind == "sessionless"
    assert ctx.respond([(req("a", 0), data(0))], T0)[1] == INVALID_SESSION_ID
    assert sid not in cache.sessions and cache.num_partitions == 0


def test_a_full_fetch_naming_a_session_replaces_it():
    cache = FetchSessionCache(rng=random.Random(3))
    sid = open_session(cache, [req("a", 0)])
    ctx = cache.new_context(12, sid, INITIAL_EPOCH, False, [req("b", 0)], [], T0)
    assert sid not in cache.sessions
    _, new_sid, _ = ctx.respond([(req("b", 0), data(0))], T0)
    assert new_sid not in (sid, INVALID_SESSION_ID) and len(cache.sessions) == 1


def test_no_sessions_before_v7_or_with_zero_slots():
    cache = FetchSessionCache(max_entries=0)
    assert cache.new_context(6, 0, 0, False, [req("a", 0)], [], T0).kind == "sessionless"
    ctx = cache.new_context(12, 0, 0, False, [req("a", 0)], [], T0)
    assert ctx.respond([(req("a", 0), data(0))], T0)[1] == INVALID_SESSION_ID


def test_unchanged_partitions_are_left_out_of_incremental_responses():
    cache = FetchSessionCache(rng=random.Random(4))
    parts = [req("a", i) for i in range(6)]
    sid = open_session(cache, parts, answers=[(p, data(p.partition)) for p in parts])
    ctx = cache.new_context(12, sid, 1, False, [], [], T0 + 1)
    answers = [
        (ctx.partitions[0], data(0)),                           # nothing new
        (ctx.partitions[1], data(1, records=b"x" * 10)),         # records
        (ctx.partitions[2], data(2, hw=11)),                     # high watermark moved
        (ctx.partitions[3], data(3, lso=4)),                     # log start offset moved
        (ctx.partitions[4], data(4, error=int(ErrorCode.not_leader_or_follower))),
        (ctx.partitions[5], data(5, preferred=2)),               # KIP-392 redirect
    ]
    error, same, kept = ctx.respond(answers, T0 + 1)
    assert (error, same) == (0, sid)
    assert [p.partition for p, _ in kept] == [1, 2, 3, 4, 5]
    # Next time: the cached HW/LSO are the new ones; the errored partition's HW was reset
    # so that it is sent again when the error clears; no redirect now for partition 5.
    ctx = cache.new_context(12, sid, 2, False, [], [], T0 + 2)
    answers = [(p, data(p.partition, hw=11 if p.partition == 2 else 10,
                        lso=4 if p.partition == 3 else 0)) for p in ctx.partitions]
    _, _, kept = ctx.respond(answers, T0 + 2)
    assert [p.partition for p, _ in kept] == [4]
    # Partitions that returned records moved to the end of the session (fair max_bytes).
    assert [p.partition for p in ctx.partitions] == [0, 2, 3, 4, 5, 1]


def test_diverging_epoch_is_always_answered():
    cache = FetchSessionCache(rng=random.Random(5))
    sid = open_session(cache, [req("a", 0)], follower=True)
    ctx = cache.new_context(12, sid, 1, True, [], [], T0)
    _, _, kept = ctx.respond([(ctx.partitions[0], data(0, diverging=(3, 5)))], T0)
    assert len(kept) == 1


def test_incremental_requests_add_update_and_forget_partitions():
    cache = FetchSessionCache(rng=random.Random(6))
    sid = open_session(cache, [req("a", 0), req("a", 1)])
    ctx = cache.new_context(12, sid, 1, False, [req("a", 1, offset=50), req("b", 0)],
                            [req("a", 0)], T0)
    assert [(p.topic, p.partition, p.fetch_offset) for p in ctx.partitions] == \
        [("a", 1, 50), ("b", 0, 0)]
    assert cache.num_partitions == 2
    # Forgetting every partition closes the session: a sessionless answer.
    ctx = cache.new_context(12, sid, 2, False, [], [req("a", 1), req("b", 0)], T0)
    assert ctx.kind == "sessionless" and sid not in cache.sessions
    assert cache.num_partitions == 0


def test_a_duplicate_request_answered_after_a_later_one_gets_invalid_epoch():
    cache = FetchSessionCache(rng=random.Random(7))
    sid = open_session(cache, [req("a", 0)])
    first = cache.new_context(12, sid, 1, False, [], [], T0)
    second = cache.new_context(12, sid, 2, False, [], [], T0)
    assert second.respond([(second.partitions[0], data(0))], T0)[0] == 0
    error, same, kept = first.respond([(first.partitions[0], data(0, records=b"x"))], T0)
    assert (error, same, kept) == (ErrorCode.invalid_fetch_session_epoch, sid, [])


def test_topic_id_sessions_and_name_sessions_do_not_mix():
    cache = FetchSessionCache(rng=random.Random(8))
    tid = uuid.uuid4()
    by_id = open_session(cache, [req("a", 0, topic_id=tid)], version=13)
    by_name = open_session(cache, [req("a", 0)], version=12)
    assert cache.new_context(12, by_id, 1, False, [], [], T0).error == \
        ErrorCode.fetch_session_topic_id_error
    assert cache.new_context(13, by_name, 1, False, [], [], T0).error == \
        ErrorCode.fetch_session_topic_id_error


def test_an_unknown_topic_id_is_kept_and_resolved_later():
    cache = FetchSessionCache(rng=random.Random(9))
    tid = uuid.uuid4()
    unknown = PartitionRequest(None, tid, 0, 0, 100)
    sid = open_session(cache, [unknown], version=13,
                       answers=[(unknown, data(0, error=int(ErrorCode.unknown_topic_id)))])
    ctx = cache.new_context(13, sid, 1, False, [], [], T0, resolve={tid: "late"}.get)
    assert [(p.topic, p.topic_id) for p in ctx.partitions] == [("late", tid)]
    # Forgetting by id removes it whatever its name.
    ctx = cache.new_context(13, sid, 2, False, [], [PartitionRequest(None, tid, 0, -1, 0)], T0)
    assert ctx.kind == "sessionless"


def test_a_full_cache_evicts_a_stale_session_first():
    cache = FetchSessionCache(max_entries=2, rng=random.Random(10))
    old = open_session(cache, [req("a", 0)], now=T0)
    young = open_session(cache, [req("b", 0)], now=T0 + EVICTION_MS)
    new = open_session(cache, [req("c", 0)], now=T0 + EVICTION_MS + 1)
    assert set(cache.sessions) == {young, new} and old not in cache.sessions
    assert cache.evictions == 1


def test_young_sessions_are_safe_from_consumers_but_not_from_followers():
    cache = FetchSessionCache(max_entries=2, rng=random.Random(11))
    c1 = open_session(cache, [req("a", 0)], now=T0)
    c2 = open_session(cache, [req("b", 0), req("b", 1)], now=T0 + 1)
    # A third consumer finds no session old enough to evict: no session for it.
    ctx = cache.new_context(12, 0, 0, False, [req("c", 0)], [], T0 + 2)
    assert ctx.respond([(req("c", 0), data(0))], T0 + 2)[1] == INVALID_SESSION_ID
    # A follower (privileged) evicts the smallest consumer session.
    f1 = open_session(cache, [req("d", 0)], now=T0 + 3, follower=True)
    assert set(cache.sessions) == {c2, f1} and c1 not in cache.sessions
    assert cache.evictions == 1


def test_old_sessions_are_evicted_by_value_privileged_and_larger_ones_kept():
    cache = FetchSessionCache(max_entries=2, eviction_ms=100, rng=random.Random(12))
    small = open_session(cache, [req("a", 0)], now=T0)
    big = open_session(cache, [req("b", i) for i in range(5)], now=T0)
    # Both get older than eviction_ms while in use (touched), so none is stale.
    for sid in (small, big):
        ctx = cache.new_context(12, sid, 1, False, [], [], T0 + 150)
        ctx.respond([(p, data(p.partition)) for p in ctx.partitions], T0 + 150)
    # A consumer session of 3 partitions is worth more than the 1-partition one...
    three = [req("c", i) for i in range(3)]
    mid = open_session(cache, three, now=T0 + 160)
    assert set(cache.sessions) == {big, mid} and small not in cache.sessions
    # ... but a 1-partition session is worth less than both: not created.
    ctx = cache.new_context(12, 0, 0, False, [req("d", 0)], [], T0 + 170)
    assert ctx.respond([(req("d", 0), data(0))], T0 + 170)[1] == INVALID_SESSION_ID
    assert cache.evictions == 1


def test_partition_count_tracks_sessions():
    cache = FetchSessionCache(rng=random.Random(13))
    a = open_session(cache, [req("a", 0), req("a", 1)])
    open_session(cache, [req("b", 0)])
    assert cache.num_partitions == 3
    cache.new_context(12, a, 1, False, [req("a", 2)], [], T0)
    assert cache.num_partitions == 4
    cache.remove(a)
    assert cache.num_partitions == 1 and len(cache.sessions) == 1


def test_unchanged_agrees_with_must_respond_for_reads_without_news():
    cache = FetchSessionCache(rng=random.Random(9))
    parts = [req("a", i) for i in range(4)]
    sid = open_session(cache, parts)  # cached: HW 10, log start 0
    ctx = cache.new_context(12, sid, 1, True, [], [], T0 + 1)
    # A read with no records, no error, no diverging epoch and no redirect: unchanged
    # exactly when must_respond would be False (and then it changes nothing).
    assert ctx.unchanged(ctx.partitions[0], 10, 0)
    assert not ctx.unchanged(ctx.partitions[1], 11, 0)  # HW moved
    assert not ctx.unchanged(ctx.partitions[2], 10, 3)  # log start moved
    _, _, kept = ctx.respond([(ctx.partitions[3],
                               data(3, error=int(ErrorCode.not_leader_or_follower)))], T0 + 1)
    assert len(kept) == 1
    ctx = cache.new_context(12, sid, 2, True, [], [req("a", 1)], T0 + 2)
    assert not ctx.unchanged(ctx.partitions[2], 10, 0)  # its HW was forgotten by the error
    assert not ctx.unchanged(req("a", 1), 10, 0)  # forgotten: not in the session any more
    assert ctx.unchanged(ctx.partitions[0], 10, 0)
    # Full and sessionless fetches answer every partition.
    assert cache.new_context(12, 0, 0, True, parts, [], T0).unchanged is None
    assert cache.new_context(6, 0, 0, True, parts, [], T0).unchanged is None

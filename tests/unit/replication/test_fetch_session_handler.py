"""The follower's side of incremental fetch sessions (Kafka's FetchSessionHandler)."""

from __future__ import annotations

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.replication.fetch_session_handler import FetchSessionHandler

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def fields(offset: int, epoch: int = 3) -> dict:
    return {"fetch_offset": offset, "current_leader_epoch": epoch}


def test_full_then_incremental_then_only_changes():
    h = FetchSessionHandler()
    first = h.build({A0: fields(0), A1: fields(5)})
    assert (first.session_id, first.epoch, first.full) == (0, 0, True)
    assert set(first.to_send) == {A0, A1}
    assert h.handle_response(0, 77)
    second = h.build({A0: fields(0), A1: fields(9)})
    assert (second.session_id, second.epoch) == (77, 1)
    assert second.to_send == {A1: fields(9)} and second.to_forget == []
    assert h.handle_response(0, 77)
    third = h.build({A1: fields(9), B0: fields(0)})
    assert third.epoch == 2 and third.to_send == {B0: fields(0)} and third.to_forget == [(A0, None)]


def test_a_leader_without_a_session_keeps_full_requests():
    h = FetchSessionHandler()
    h.build({A0: fields(0)})
    assert h.handle_response(0, 0)
    again = h.build({A0: fields(0)})
    assert again.full and again.to_send == {A0: fields(0)}


def test_session_errors_make_the_next_request_full():
    h = FetchSessionHandler()
    h.build({A0: fields(0)})
    h.handle_response(0, 5)
    h.build({A0: fields(1)})
    assert not h.handle_response(int(ErrorCode.invalid_fetch_session_epoch), 0)
    retry = h.build({A0: fields(1)})
    assert (retry.session_id, retry.epoch) == (5, 0)  # closes session 5, opens a new one
    assert not h.handle_response(int(ErrorCode.fetch_session_id_not_found), 0)
    fresh = h.build({A0: fields(1)})
    assert (fresh.session_id, fresh.epoch, set(fresh.to_send)) == (0, 0, {A0})


def test_a_lost_response_makes_the_next_request_full():
    h = FetchSessionHandler()
    h.build({A0: fields(0)})
    h.handle_response(0, 9)
    h.build({A0: fields(3)})
    h.handle_error()
    nxt = h.build({A0: fields(3)})
    assert (nxt.session_id, nxt.epoch, nxt.to_send) == (9, 0, {A0: fields(3)})


def test_a_new_topic_id_forgets_the_old_one_and_sends_the_new():
    """KIP-516: a partition whose topic id changed (the topic was recreated) is a new
    partition to the session; the old one is forgotten by its id in the same request."""
    h = FetchSessionHandler()
    h.build({A0: {**fields(0), "topic_id": "old"}, A1: {**fields(0), "topic_id": "old"}},
            topic_ids=True)
    assert h.handle_response(0, 8)
    nxt = h.build({A0: {**fields(0), "topic_id": "new"}, A1: {**fields(0), "topic_id": "old"}},
                  topic_ids=True)
    assert (nxt.session_id, nxt.epoch, nxt.topic_ids) == (8, 1, True)
    assert nxt.to_send == {A0: {**fields(0), "topic_id": "new"}}
    assert nxt.to_forget == [(A0, "old")]


def test_switching_between_names_and_ids_starts_a_full_session():
    """A session names its topics one way only (the leader answers
    FETCH_SESSION_TOPIC_ID_ERROR otherwise): the request that switches closes it."""
    h = FetchSessionHandler()
    h.build({A0: {**fields(0), "topic_id": None}})
    assert h.handle_response(0, 4)
    by_id = h.build({A0: {**fields(0), "topic_id": "x"}}, topic_ids=True)
    assert (by_id.session_id, by_id.epoch, by_id.full, by_id.topic_ids) == (4, 0, True, True)
    assert set(by_id.to_send) == {A0} and by_id.to_forget == []
    assert h.handle_response(0, 5)
    assert (h.session_id, h.epoch, h.uses_topic_ids) == (5, 1, True)
    incremental = h.build({A0: {**fields(0), "topic_id": "x"}}, topic_ids=True)
    assert (incremental.epoch, incremental.to_send) == (1, {})

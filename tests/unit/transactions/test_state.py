"""Kafka's TransactionMetadata transitions and TransactionCoordinator checks, sans I/O."""

from __future__ import annotations

from dataclasses import replace

import pytest

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.transactions.state import (
    MAX_EPOCH,
    TransactionMetadata,
    TxnState,
    init_producer_id_valid,
    prepare_add_partitions,
    prepare_end,
)

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def _meta(state=TxnState.EMPTY, epoch=3, partitions=()) -> TransactionMetadata:
    return TransactionMetadata("tx", producer_id=10, producer_epoch=epoch, state=state,
                               partitions=set(partitions), txn_start_timestamp=100)


def _code(fn, *args) -> ErrorCode:
    with pytest.raises(KafkaError) as err:
        fn(*args)
    return err.value.code


def test_a_transaction_runs_empty_ongoing_prepare_complete():
    m = _meta()
    t = prepare_add_partitions(m, 10, 3, {A0}, now=500)
    assert (t.state, t.partitions, t.txn_start_timestamp) == (TxnState.ONGOING, {A0}, 500)
    assert m.pending_state == TxnState.ONGOING
    m.complete(t)
    assert prepare_add_partitions(m, 10, 3, {A0}, now=600) is None  # already in
    t = prepare_add_partitions(m, 10, 3, {A1}, now=700)
    assert t.partitions == {A0, A1} and t.txn_start_timestamp == 500  # start kept
    m.complete(t)
    t = prepare_end(m, 10, 3, commit=True, from_client=True, now=800)
    assert t.state == TxnState.PREPARE_COMMIT
    m.complete(t)
    t = m.prepare_complete(900)
    assert (t.state, t.partitions) == (TxnState.COMPLETE_COMMIT, frozenset())
    m.complete(t)
    assert prepare_end(m, 10, 3, True, True, 1000) is None  # a retried commit is fine
    assert _code(prepare_end, m, 10, 3, False, True, 1000) == ErrorCode.invalid_txn_state


def test_requests_meanwhile_get_concurrent_transactions():
    m = _meta(TxnState.ONGOING, partitions=[A0])
    prepare_end(m, 10, 3, False, True, 1)  # PrepareAbort pending
    assert _code(prepare_add_partitions, m, 10, 3, {A1}, 2) == ErrorCode.concurrent_transactions
    assert _code(prepare_end, m, 10, 3, False, True, 2) == ErrorCode.concurrent_transactions
    m.abandon()  # the write failed: nothing changed
    assert m.state == TxnState.ONGOING and not m.pending
    m.state = TxnState.PREPARE_COMMIT
    assert _code(prepare_end, m, 10, 3, True, True, 3) == ErrorCode.concurrent_transactions
    assert _code(prepare_end, m, 10, 3, False, True, 3) == ErrorCode.invalid_txn_state
    assert _code(prepare_add_partitions, m, 10, 3, {A1}, 3) == ErrorCode.concurrent_transactions


def test_wrong_producer_id_or_epoch():
    m = _meta(TxnState.ONGOING, partitions=[A0])
    assert _code(prepare_add_partitions, m, 11, 3, {A0}, 1) == ErrorCode.invalid_producer_id_mapping
    assert _code(prepare_add_partitions, m, 10, 2, {A0}, 1) == ErrorCode.producer_fenced
    assert _code(prepare_end, m, 10, 4, True, True, 1) == ErrorCode.producer_fenced
    assert _code(prepare_end, m, 10, 2, True, False, 1) == ErrorCode.producer_fenced
    assert _code(prepare_end, _meta(), 10, 3, True, True, 1) == ErrorCode.invalid_txn_state


def test_epoch_fence_aborts_with_the_bumped_epoch():
    m = _meta(TxnState.ONGOING, partitions=[A0])
    fence = m.prepare_fence_producer_epoch()
    assert (fence.state, fence.producer_epoch) == (TxnState.PREPARE_EPOCH_FENCE, 4)
    t = prepare_end(m, 10, fence.producer_epoch, False, from_client=False, now=5)
    assert (t.state, t.producer_epoch, t.partitions) == (TxnState.PREPARE_ABORT, 4, {A0})
    m.complete(t)
    # The fenced producer (epoch 3) is now refused.
    assert _code(prepare_end, m, 10, 3, True, True, 6) == ErrorCode.producer_fenced


def test_failed_fence_is_not_bumped_twice():
    m = _meta(TxnState.ONGOING, partitions=[A0])
    m.prepare_fence_producer_epoch()
    prepare_end(m, 10, 4, False, False, 5)
    m.abandon()
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 4


def test_init_bumps_the_epoch_and_kip360_retries():
    m = _meta(TxnState.COMPLETE_ABORT)
    t = m.prepare_increment_producer_epoch(5000, None, now=9)
    assert (t.producer_epoch, t.last_producer_epoch, t.state, t.txn_timeout_ms) == (
        4, -1, TxnState.EMPTY, 5000)
    m.complete(t)
    # KIP-360: the current producer names its epoch and gets the next, remembering the last.
    t = m.prepare_increment_producer_epoch(5000, 4, now=10)
    assert (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    m.complete(t)
    # Its retry (it never saw the answer) names the previous epoch: same answer.
    t = m.prepare_increment_producer_epoch(5000, 4, now=11)
    assert (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    m.abandon()
    assert _code(m.prepare_increment_producer_epoch, 5000, 2, 12) == ErrorCode.producer_fenced


def test_exhausted_epoch_rotates_the_producer_id():
    m = _meta(epoch=MAX_EPOCH - 1)
    assert m.is_producer_epoch_exhausted()
    t = m.prepare_producer_id_rotation(77, 1000, now=1, record_last_epoch=True)
    assert (t.producer_id, t.last_producer_id, t.producer_epoch, t.last_producer_epoch) == (
        77, 10, 0, MAX_EPOCH - 1)
    m.complete(t)
    # A retry with the old id and its exhausted epoch is still recognised.
    assert init_producer_id_valid(m, 10, MAX_EPOCH - 1)
    assert not init_producer_id_valid(m, 10, 3)
    assert init_producer_id_valid(m, 77, 0)


def test_invalid_transitions_are_refused():
    m = _meta(TxnState.EMPTY)
    assert _code(m.prepare_abort_or_commit, TxnState.PREPARE_COMMIT, 1) == ErrorCode.invalid_txn_state
    m = _meta(TxnState.ONGOING, partitions=[A0])
    assert _code(m.prepare_dead) == ErrorCode.invalid_txn_state
    t = m.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 1)
    with pytest.raises(KafkaError):  # only the pending transit can complete
        m.complete(replace(t, state=TxnState.PREPARE_ABORT))
    m.complete(t)
    assert m.state == TxnState.PREPARE_COMMIT

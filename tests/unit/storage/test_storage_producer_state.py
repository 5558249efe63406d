"""Idempotent producer state: dedup window, sequence gaps, epochs, rebuild."""

from __future__ import annotations

import pytest

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import parse_header
from weir.records.builder import build_batch
from weir.storage.producer_state import ProducerStateManager


def hdr(seq, n=1, *, pid=7, epoch=0, offset=0, control=False):
    buf = build_batch(
        [b"v"] * n,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        base_offset=offset,
        control=control,
    )
    return parse_header(buf)


def test_sequence_progression_and_duplicates():
    psm = ProducerStateManager()
    offset = 0
    for seq in range(0, 12, 2):
        h = hdr(seq, 2, offset=offset)
        assert psm.check(h) is None
        psm.apply(h)
        offset += 2
    assert psm.check(hdr(10, 2)) == (10, 11)  # last batch
    assert psm.check(hdr(2, 2)) == (2, 3)  # fifth most recent
    with pytest.raises(KafkaError) as err:
        psm.check(hdr(0, 2))  # evicted from the 5-batch window: looks like a gap
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    with pytest.raises(KafkaError) as err:
        psm.check(hdr(14, 1))  # gap (expected 12)
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    assert psm.check(hdr(12, 1)) is None
    assert len(psm.entry(7).batches) == 5


def test_epochs():
    psm = ProducerStateManager()
    psm.apply(hdr(0, epoch=3))
    with pytest.raises(KafkaError) as err:
        psm.check(hdr(1, epoch=2))
    assert err.value.code == ErrorCode.invalid_producer_epoch
    with pytest.raises(KafkaError) as err:
        psm.check(hdr(1, epoch=4))  # new epoch must start at 0
    assert err.value.code == ErrorCode.out_of_order_sequence_number
    assert psm.check(hdr(0, epoch=4)) is None
    psm.apply(hdr(0, epoch=4, offset=1))
    assert psm.entry(7).epoch == 4 and len(psm.entry(7).batches) == 1


def test_unknown_producer_accepted_at_any_sequence_and_non_idempotent_ignored():
    psm = ProducerStateManager()
    assert psm.check(hdr(42)) is None
    plain = parse_header(build_batch([b"x"]))
    assert psm.check(plain) is None
    psm.apply(plain)
    assert psm.producers == {}


def test_sequence_wraps():
    psm = ProducerStateManager()
    psm.apply(hdr(2**31 - 2, 2))  # covers 2**31-2 .. 2**31-1
    assert psm.check(hdr(0)) is None


def test_control_batch_only_checks_epoch():
    psm = ProducerStateManager()
    psm.apply(hdr(0))
    assert psm.check(hdr(-1, control=True, epoch=0)) is None
    with pytest.raises(KafkaError):
        psm.check(hdr(-1, control=True, epoch=-5))


def test_check_all_sees_earlier_batches_of_same_request():
    psm = ProducerStateManager()
    psm.apply(hdr(0))
    assert psm.check_all([hdr(1), hdr(2)]) is None
    with pytest.raises(KafkaError):
        psm.check_all([hdr(1), hdr(3)])
    assert psm.check_all([hdr(0)]) == (0, 0)
    assert psm.entry(7).last_seq == 0  # check_all does not mutate


def test_check_all_of_several_batches_leaves_the_entry_alone():
    """Batches after the first are checked against a copy advanced by the earlier ones (a
    generator of headers as well as a list); the manager's entry changes only in apply."""
    psm = ProducerStateManager()
    psm.apply(hdr(0))
    assert psm.check_all(h for h in [hdr(1), hdr(2), hdr(3)]) is None
    # a duplicate within the append: the offsets of the earlier batch
    assert psm.check_all([hdr(1, offset=1), hdr(2, offset=2), hdr(1, offset=3)]) == (1, 1)
    assert psm.entry(7).last_seq == 0 and len(psm.entry(7).batches) == 1
    assert psm.check_all([hdr(1)]) is None


def test_rebuild():
    psm = ProducerStateManager()
    headers = [hdr(i, offset=i) for i in range(8)]
    for h in headers:
        psm.apply(h)
    assert psm.check(hdr(7)) == (7, 7)
    assert psm.check(hdr(8)) is None

"""The ``__transaction_state`` record formats (Kafka's TransactionLogKey/Value) and
placement."""

from __future__ import annotations

import struct

import pytest

from weir.common import TopicPartition
from weir.transactions import codec
from weir.transactions.state import TxnState, TxnTransit


def _transit(state: TxnState, partitions=()) -> TxnTransit:
    return TxnTransit(producer_id=1234, last_producer_id=-1, producer_epoch=7,
                      last_producer_epoch=-1, txn_timeout_ms=60000, state=state,
                      partitions=frozenset(partitions), txn_start_timestamp=1700000000000,
                      txn_last_update_timestamp=1700000000500)


def test_key_is_version_0_and_the_id():
    assert codec.encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert codec.decode_key(codec.encode_key("héllo")) == "héllo"
    assert codec.decode_key(b"\x00\x05\x00\x01x") is None  # unknown key versions are skipped


def test_value_v0_bytes_are_kafkas_layout():
    t = _transit(TxnState.ONGOING, [TopicPartition("a", 1), TopicPartition("a", 0),
                                    TopicPartition("b", 3)])
    expected = (struct.pack(">hqhib", 0, 1234, 7, 60000, 1)
                + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 3)
                + struct.pack(">qq", 1700000000500, 1700000000000))
    assert codec.encode_value(t) == expected
    assert codec.decode_value(expected) == t


def test_empty_state_has_null_partitions():
    raw = codec.encode_value(_transit(TxnState.EMPTY))
    assert raw[2 + 15:2 + 19] == b"\xff\xff\xff\xff"
    assert codec.decode_value(raw).partitions == frozenset()
    with pytest.raises(ValueError):
        codec.encode_value(_transit(TxnState.EMPTY, [TopicPartition("a", 0)]))


def test_reads_flexible_value_v1():
    # Version 1: compact string/array lengths (N+1 varints) and empty tagged-field sections.
    raw = (struct.pack(">hqhib", 1, 99, 2, 1000, 2)
           + bytes([2]) + bytes([2]) + b"t" + bytes([3]) + struct.pack(">ii", 4, 5) + b"\x00"
           + struct.pack(">qq", 20, 10) + b"\x00")
    t = codec.decode_value(raw)
    assert (t.producer_id, t.producer_epoch, t.txn_timeout_ms, t.state) == (
        99, 2, 1000, TxnState.PREPARE_COMMIT)
    assert t.partitions == {TopicPartition("t", 4), TopicPartition("t", 5)}
    assert (t.txn_last_update_timestamp, t.txn_start_timestamp) == (20, 10)


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x00\x07" + b"\x00" * 40,
                                 struct.pack(">hqhib", 0, 1, 1, 1, 9) + b"\xff" * 20,
                                 struct.pack(">hqhib", 0, 1, 1, 1, 1) + b"\x00\x00\x00\x01\x7f"])
def test_corrupt_values_raise(raw):
    with pytest.raises(codec.CorruptTxnRecord):
        codec.decode_value(raw)


def test_placement_is_javas_string_hash():
    assert codec.java_string_hash("hello") == 99162322
    assert codec.java_string_hash("polygenelubricants") == -(1 << 31)
    assert codec.partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert codec.partition_for("hello", 50) == 99162322 % 50
    assert codec.java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 units

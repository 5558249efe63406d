"""Message formats v0/v1 (Produce v0-2, Fetch v0-3): Kafka's conversions to and from v2."""

from __future__ import annotations

import gzip
import struct

import pytest

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import ATTRIBUTES_OFFSET, parse_header, validate_produce
from weir.records.builder import build_batch
from weir.records.legacy import down_convert, encode_message, iter_messages, up_convert
from weir.records.records import iter_records


def _set_zstd(batch: bytes) -> bytes:
    """A batch whose attributes claim zstd (only the codec bits matter here)."""
    raw = bytearray(batch)
    struct.pack_into(">h", raw, ATTRIBUTES_OFFSET, 4)
    return bytes(raw)


def test_message_round_trip_v0_and_v1():
    data = (encode_message(5, 0, -1, None, b"a")
            + encode_message(6, 1, 1_700_000_000_000, b"k", None))
    got = list(iter_messages(data))
    assert [(m.offset, m.magic, m.timestamp, m.key, m.value) for m in got] == [
        (5, 0, -1, None, b"a"), (6, 1, 1_700_000_000_000, b"k", None)]


def test_a_flipped_bit_fails_the_crc():
    data = bytearray(encode_message(0, 1, 0, b"k", b"value"))
    data[-1] ^= 1
    with pytest.raises(KafkaError) as err:
        list(iter_messages(bytes(data)))
    assert err.value.code == ErrorCode.corrupt_message


@pytest.mark.parametrize("cut", [1, 11, 20, 25])
def test_truncated_message_sets_are_corrupt(cut):
    data = encode_message(0, 1, 0, b"k", b"value")
    with pytest.raises(KafkaError) as err:
        list(iter_messages(data[:-cut]))
    assert err.value.code == ErrorCode.corrupt_message


def test_magic_2_batches_are_invalid_records_for_old_produce_versions():
    with pytest.raises(KafkaError) as err:
        up_convert(build_batch([b"x"]))
    assert err.value.code == ErrorCode.invalid_record


def test_gzip_wrapper_v1_has_relative_inner_offsets():
    inner = b"".join(encode_message(i, 1, 1000 + i, None, b"v%d" % i) for i in range(3))
    wrapper = encode_message(41, 1, 1002, None, gzip.compress(inner), attributes=1)
    got = list(iter_messages(wrapper))
    assert [(m.offset, m.value, m.timestamp) for m in got] == [
        (39, b"v0", 1000), (40, b"v1", 1001), (41, b"v2", 1002)]


def test_gzip_wrapper_v0_has_absolute_inner_offsets():
    inner = b"".join(encode_message(10 + i, 0, -1, None, b"w%d" % i) for i in range(2))
    wrapper = encode_message(11, 0, -1, None, gzip.compress(inner), attributes=1)
    assert [m.offset for m in iter_messages(wrapper)] == [10, 11]


def test_up_convert_makes_one_valid_v2_batch():
    data = (encode_message(0, 1, 1_700_000_000_000, b"k1", b"v1")
            + encode_message(1, 1, 1_700_000_000_005, None, b"v2"))
    batch = up_convert(data)
    (header,) = validate_produce(batch, 1 << 20)
    assert header.records_count == 2 and header.magic == 2
    assert [(r.offset, r.timestamp, r.key, r.value) for r in iter_records(batch)] == [
        (0, 1_700_000_000_000, b"k1", b"v1"), (1, 1_700_000_000_005, None, b"v2")]


def test_v0_messages_get_no_timestamp():
    batch = up_convert(encode_message(0, 0, -1, b"k", b"v"))
    assert [r.timestamp for r in iter_records(batch)] == [-1]


def test_down_convert_drops_records_below_the_fetch_offset_and_control_batches():
    first = build_batch([b"a", b"b", b"c"], keys=[b"x", None, b"z"], base_offset=10,
                        timestamps=[100, 101, 102])
    control = build_batch([b"\x00"], base_offset=13, control=True)
    second = build_batch([b"d"], base_offset=14, timestamp_ms=200)
    stored = first + control + second
    v1 = list(iter_messages(down_convert(stored, 1, 11)))
    assert [(m.offset, m.magic, m.timestamp, m.key, m.value) for m in v1] == [
        (11, 1, 101, None, b"b"), (12, 1, 102, b"z", b"c"), (14, 1, 200, None, b"d")]
    v0 = list(iter_messages(down_convert(stored, 0, 0)))
    assert [(m.offset, m.magic, m.timestamp) for m in v0][:1] == [(10, 0, -1)]
    assert len(v0) == 4


def test_down_convert_leaves_out_a_partial_last_batch():
    stored = build_batch([b"a"], base_offset=0) + build_batch([b"b"], base_offset=1)[:30]
    assert [m.offset for m in iter_messages(down_convert(stored, 1, 0))] == [0]


def test_down_convert_refuses_zstd():
    with pytest.raises(KafkaError) as err:
        down_convert(_set_zstd(build_batch([b"a"])), 1, 0)
    assert err.value.code == ErrorCode.unsupported_compression_type
    assert parse_header(build_batch([b"a"])).compression == 0

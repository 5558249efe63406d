"""__consumer_offsets record formats, Kafka's group placement, the record decoder."""

from __future__ import annotations

import gzip
import struct

import pytest

from weir.common import TopicPartition
from weir.groups import codec
from weir.records.batch import HEADER_SIZE
from weir.records.builder import build_batch
from weir.records.records import iter_records


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("a", 97), ("hello", 99162322), ("polygenelubricants", -(2**31)),
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # a surrogate pair: two UTF-16 units
])
def test_java_string_hash(text, expected):
    assert codec.java_string_hash(text) == expected


def test_partition_for_matches_kafka_abs():
    assert codec.partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert codec.partition_for("hello", 50) == 99162322 % 50
    h = codec.java_string_hash("my-group")
    assert codec.partition_for("my-group", 50) == abs(h) % 50


def test_offset_key_and_value_round_trip():
    tp = TopicPartition("orders", 3)
    key = codec.decode_key(codec.encode_offset_key("g", tp))
    assert key == codec.OffsetKey("g", tp)
    value = codec.OffsetAndMetadata(42, 7, "meta", 1234)
    assert codec.decode_offset_value(codec.encode_offset_value(value)) == value


def test_old_offset_value_versions_decode():
    v0 = struct.pack(">hq", 0, 5) + struct.pack(">h", 1) + b"m" + struct.pack(">q", 99)
    assert codec.decode_offset_value(v0) == codec.OffsetAndMetadata(5, -1, "m", 99)
    v1 = struct.pack(">hq", 1, 6) + struct.pack(">h", 0) + struct.pack(">qq", 10, 20)
    assert codec.decode_offset_value(v1) == codec.OffsetAndMetadata(6, -1, "", 10, 20)


def test_group_value_round_trip():
    record = codec.GroupRecord("consumer", 4, "range", "m-1", 777, [
        codec.MemberRecord("m-1", "inst", "cid", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
        codec.MemberRecord("m-2", None, "cid2", "/127.0.0.2", 5, 6, b"", b""),
    ])
    assert codec.decode_key(codec.encode_group_key("g")) == codec.GroupKey("g")
    assert codec.decode_group_value(codec.encode_group_value(record)) == record


def test_empty_group_value_with_null_protocol():
    record = codec.GroupRecord("consumer", 1, None, None, 5, [])
    assert codec.decode_group_value(codec.encode_group_value(record)) == record


def test_subscribed_topics_of_consumer_protocol():
    sub = struct.pack(">hi", 0, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">h", 1) + b"b"
    assert codec.subscribed_topics("consumer", sub + b"\xff\xff\xff\xff") == {"a", "b"}
    assert codec.subscribed_topics("connect", sub) == set()


def test_iter_records_with_tombstones():
    batch = build_batch([b"v1", None], keys=[b"k1", b"k2"], base_offset=10, timestamp_ms=500)
    records = list(iter_records(batch + batch[:20]))  # a trailing partial batch is ignored
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (10, b"k1", b"v1", 500), (11, b"k2", None, 500)]


def _gzip_batch(batch: bytes) -> bytes:
    body = gzip.compress(batch[HEADER_SIZE:])
    head = bytearray(batch[:HEADER_SIZE])
    struct.pack_into(">i", head, 8, len(head) - 12 + len(body))
    attributes = struct.unpack_from(">h", head, 21)[0] | 1
    struct.pack_into(">h", head, 21, attributes)
    return bytes(head) + body


def test_iter_records_decompresses_gzip():
    batch = _gzip_batch(build_batch([b"a", b"b"], keys=[b"x", b"y"], base_offset=3))
    assert [(r.offset, r.key, r.value) for r in iter_records(batch)] == [
        (3, b"x", b"a"), (4, b"y", b"b")]


def test_iter_records_skips_control_batches():
    control = build_batch([b"\x00\x00\x00\x00"], keys=[b"\x00\x00\x00\x00"], control=True,
                          producer_id=1, producer_epoch=0, transactional=True)
    assert list(iter_records(control)) == []

"""Record batch header parsing, validation and offset assignment."""

from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import (
    HEADER_SIZE,
    assign_offsets,
    batch_crc,
    iter_headers,
    parse_header,
    scan_valid_prefix,
    validate_batches,
    validate_produce,
)
from weir.records.builder import build_batch

LIMIT = 1_000_000


def kafka_python_batch(n: int, *, ts: int = 1000, pid: int = -1, seq: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        batch_size=1 << 20,
    )
    for i in range(n):
        builder.append(i, timestamp=ts + i, key=None, value=b"v%d" % i, headers=[])
    return bytes(builder.build())


def test_parse_header_of_kafka_python_batch():
    buf = kafka_python_batch(3, ts=5000, pid=7, seq=10)
    h = parse_header(buf)
    assert h.magic == 2 and h.records_count == 3 and h.last_offset_delta == 2
    assert h.size == len(buf)
    assert h.base_timestamp == 5000 and h.max_timestamp == 5002
    assert h.producer_id == 7 and h.base_sequence == 10 and h.last_sequence == 12
    assert h.has_producer_id and not h.is_transactional and not h.is_control
    assert h.compression == 0 and h.timestamp_type == 0
    assert batch_crc(buf, h) == h.crc
    assert (h.last_offset, h.next_offset) == (2, 3)


def test_builder_matches_kafka_python_decoder():
    buf = build_batch([b"a", b"bb", None], keys=[b"k", None, b"z"], timestamp_ms=42)
    batch = DefaultRecordBatch(bytearray(buf))
    assert batch.validate_crc()
    records = list(batch)
    assert [r.value for r in records] == [b"a", b"bb", None]
    assert [r.key for r in records] == [b"k", None, b"z"]
    assert [r.offset for r in records] == [0, 1, 2]


def test_header_flags():
    h = parse_header(build_batch([b"x"], transactional=True, control=True, producer_id=1))
    assert h.is_transactional and h.is_control


def test_last_sequence_wraps():
    h = parse_header(build_batch([b"a", b"b", b"c"], producer_id=1, base_sequence=2**31 - 2))
    assert h.last_sequence == 0


def test_parse_header_too_short_or_impossible_length():
    with pytest.raises(KafkaError) as err:
        parse_header(b"\x00" * (HEADER_SIZE - 1))
    assert err.value.code == ErrorCode.corrupt_message
    bad = bytearray(build_batch([b"x"]))
    struct.pack_into(">i", bad, 8, 10)
    with pytest.raises(KafkaError) as err:
        parse_header(bad)
    assert err.value.code == ErrorCode.corrupt_message


def test_validate_multiple_batches():
    buf = build_batch([b"a", b"b"]) + build_batch([b"c"])
    headers = validate_produce(buf, LIMIT)
    assert [h.records_count for h in headers] == [2, 1]
    assert headers[1].position == headers[0].size


def test_validate_bad_crc():
    buf = bytearray(build_batch([b"hello"]))
    buf[-1] ^= 0xFF
    with pytest.raises(KafkaError) as err:
        validate_produce(bytes(buf), LIMIT)
    assert err.value.code == ErrorCode.corrupt_message


def test_validate_magic_v1_rejected():
    buf = bytearray(build_batch([b"hello"]))
    buf[16] = 1
    with pytest.raises(KafkaError) as err:
        validate_produce(bytes(buf), LIMIT)
    assert err.value.code == ErrorCode.unsupported_for_message_format
    assert "magic v2" in err.value.message


def test_validate_oversized_batch():
    buf = build_batch([b"x" * 500])
    with pytest.raises(KafkaError) as err:
        validate_produce(buf, 100)
    assert err.value.code == ErrorCode.message_too_large


@pytest.mark.parametrize("cut", [1, 30, 62])
def test_validate_truncated(cut):
    buf = build_batch([b"a", b"b"]) + build_batch([b"c"])
    with pytest.raises(KafkaError) as err:
        validate_produce(buf[:-cut], LIMIT)
    assert err.value.code == ErrorCode.corrupt_message


def test_validate_empty_and_trailing_garbage():
    with pytest.raises(KafkaError):
        validate_produce(b"", LIMIT)
    with pytest.raises(KafkaError):
        validate_produce(build_batch([b"a"]) + b"\x00" * 5, LIMIT)


def _resign(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def test_validate_inconsistent_last_offset_delta_and_zero_records():
    buf = bytearray(build_batch([b"a", b"b"]))
    struct.pack_into(">i", buf, 23, 5)  # lastOffsetDelta
    with pytest.raises(KafkaError) as err:
        validate_produce(_resign(buf), LIMIT)
    assert err.value.code == ErrorCode.corrupt_message
    assert validate_batches(bytes(buf), None, strict=False)[0].last_offset_delta == 5
    buf = bytearray(build_batch([b"a"]))
    struct.pack_into(">i", buf, 57, 0)  # recordsCount
    with pytest.raises(KafkaError):
        validate_produce(_resign(buf), LIMIT)


def test_assign_offsets_create_time_keeps_crc():
    buf = build_batch([b"a", b"b"], timestamp_ms=100) + build_batch([b"c"], timestamp_ms=200)
    headers = validate_produce(buf, LIMIT)
    out = assign_offsets(buf, headers, 1000, 7, None)
    assert [h.base_offset for h in headers] == [1000, 1002]
    reparsed = list(iter_headers(out))
    assert [(h.base_offset, h.partition_leader_epoch) for h in reparsed] == [(1000, 7), (1002, 7)]
    assert all(h.timestamp_type == 0 for h in reparsed)
    assert [h.crc for h in reparsed] == [h.crc for h in validate_produce(buf, LIMIT)]
    validate_produce(bytes(out), LIMIT)  # CRC still valid: offsets are not CRC-covered


def test_assign_offsets_log_append_time_recomputes_crc():
    buf = build_batch([b"a", b"b"], timestamp_ms=100)
    headers = validate_produce(buf, LIMIT)
    out = assign_offsets(buf, headers, 5, 1, 999_000)
    h = validate_produce(bytes(out), LIMIT)[0]
    assert h.timestamp_type == 1 and h.max_timestamp == 999_000
    assert h.crc == headers[0].crc and headers[0].max_timestamp == 999_000
    batch = DefaultRecordBatch(bytearray(out))
    assert batch.validate_crc()
    assert [r.timestamp for r in batch] == [999_000, 999_000]  # LogAppendTime semantics


def test_scan_valid_prefix_stops_at_torn_and_corrupt_batches():
    a, b = build_batch([b"a"]), build_batch([b"b", b"c"])
    headers, end = scan_valid_prefix(a + b[:-3])
    assert len(headers) == 1 and end == len(a)
    corrupt = bytearray(a + b)
    corrupt[len(a) + 70] ^= 1
    headers, end = scan_valid_prefix(corrupt)
    assert end == len(a)
    headers, end = scan_valid_prefix(corrupt, verify_crc=False)
    assert end == len(corrupt)
    assert [h.position for h in iter_headers(a + b + b"\x01\x02")] == [0, len(a)]

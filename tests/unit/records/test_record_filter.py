"""Record-level filtering and re-batching (the cleaner's MemoryRecords.filterTo)."""

from __future__ import annotations

import struct

import crc32c
import pytest

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import CRC_OFFSET, parse_header, validate_batches
from weir.records.builder import build_batch, encode_varint
from weir.records.filter import (
    DELETE_HORIZON_BIT,
    BatchRetention,
    compress,
    decode_raw_records,
    delete_horizon_ms,
    filter_batch,
    keyless_records,
    scan_keys,
)
from weir.records.records import iter_records


def _with_codec(batch: bytes, codec: int, headers_on_records: bool = False) -> bytes:
    """Re-encode an uncompressed built batch with ``codec`` (same records)."""
    header = parse_header(batch)
    payload = batch[61:]
    body = bytearray(batch[21:61])
    struct.pack_into(">h", body, 0, header.attributes | codec)
    body += compress(codec, payload)
    head = struct.pack(">qiib", header.base_offset, 9 + len(body), header.partition_leader_epoch,
                       2)
    return head + struct.pack(">I", crc32c.crc32c(bytes(body))) + bytes(body)


def _record_with_headers(offset_delta: int, key: bytes, value: bytes) -> bytes:
    body = (b"\x00" + encode_varint(0) + encode_varint(offset_delta)
            + encode_varint(len(key)) + key + encode_varint(len(value)) + value
            + encode_varint(1) + encode_varint(2) + b"h1" + encode_varint(3) + b"hv1")
    return encode_varint(len(body)) + body


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_filter_keeps_chosen_records_offsets_and_codec(codec):
    raw = build_batch([b"a", b"b", b"c", b"d"], keys=[b"k1", b"k2", b"k1", b"k3"],
                      base_offset=100, timestamps=[10, 20, 30, 40], producer_id=7,
                      producer_epoch=2, base_sequence=5, partition_leader_epoch=3)
    batch = _with_codec(raw, codec)
    header = parse_header(batch)
    result = filter_batch(batch, header, BatchRetention.DELETE_EMPTY,
                          lambda r: r.offset in (101, 103), now_ms=0, delete_retention_ms=0)
    out = parse_header(result.data)
    validate_batches(result.data, strict=False)  # CRC and structure
    assert out.compression == codec
    assert (out.base_offset, out.last_offset_delta, out.records_count) == (100, 3, 2)
    assert (out.producer_id, out.producer_epoch, out.base_sequence) == (7, 2, 5)
    assert out.partition_leader_epoch == 3 and out.max_timestamp == 40
    records = list(iter_records(result.data))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (101, 20, b"k2", b"b"), (103, 40, b"k3", b"d")]
    assert (result.records_read, result.records_kept) == (4, 2)


def test_record_headers_survive_a_rewrite():
    records = _record_with_headers(0, b"k", b"v0") + _record_with_headers(1, b"k", b"v1")
    base = build_batch([b"x", b"y"], keys=[b"k", b"k"])
    header = parse_header(base)
    body = bytearray(base[21:61]) + records
    head = struct.pack(">qiib", 0, 9 + len(body), -1, 2)
    batch = head + struct.pack(">I", crc32c.crc32c(bytes(body))) + bytes(body)
    header = parse_header(batch)
    result = filter_batch(batch, header, BatchRetention.DELETE_EMPTY, lambda r: r.offset == 1,
                          now_ms=0, delete_retention_ms=0)
    (kept,) = list(decode_raw_records(result.data, parse_header(result.data)))
    assert kept.offset == 1 and kept.value == b"v1"
    assert kept.tail.endswith(encode_varint(1) + encode_varint(2) + b"h1" + encode_varint(3)
                              + b"hv1")


def test_unchanged_batch_is_copied_byte_for_byte():
    batch = build_batch([b"a", b"b"], keys=[b"1", b"2"], base_offset=5)
    result = filter_batch(batch, parse_header(batch), BatchRetention.DELETE_EMPTY,
                          lambda r: True, now_ms=0, delete_retention_ms=0)
    assert result.copied and result.data == batch


def test_tombstone_gets_delete_horizon_then_goes():
    batch = build_batch([b"a", None], keys=[b"1", b"2"], timestamps=[1000, 2000])
    first = filter_batch(batch, parse_header(batch), BatchRetention.DELETE_EMPTY,
                         lambda r: True, now_ms=5000, delete_retention_ms=100)
    header = parse_header(first.data)
    assert header.attributes & DELETE_HORIZON_BIT and delete_horizon_ms(header) == 5100
    # record timestamps are unchanged (deltas re-encoded against the horizon)
    assert [r.timestamp for r in iter_records(first.data)] == [1000, 2000]
    assert header.max_timestamp == 2000
    # a second filter keeps the horizon as is
    again = filter_batch(first.data, header, BatchRetention.DELETE_EMPTY, lambda r: True,
                         now_ms=9999, delete_retention_ms=100)
    assert again.copied and delete_horizon_ms(parse_header(again.data)) == 5100


def test_empty_batches_deleted_or_kept_as_header():
    batch = _with_codec(build_batch([b"a"], keys=[b"k"], base_offset=9, producer_id=4,
                                    producer_epoch=1, base_sequence=17, timestamps=[77]), 1)
    header = parse_header(batch)
    gone = filter_batch(batch, header, BatchRetention.DELETE_EMPTY, lambda r: False,
                        now_ms=0, delete_retention_ms=0)
    assert gone.data == b""
    kept = filter_batch(batch, header, BatchRetention.RETAIN_EMPTY, lambda r: False,
                        now_ms=0, delete_retention_ms=0)
    out = parse_header(kept.data)
    validate_batches(kept.data, strict=False)
    assert (out.records_count, out.base_offset, out.last_offset, out.base_sequence) == (
        0, 9, 9, 17)
    assert (out.producer_id, out.producer_epoch, out.compression, out.max_timestamp) == (
        4, 1, 0, 77)
    assert list(iter_records(kept.data)) == []
    deleted = filter_batch(batch, header, BatchRetention.DELETE, lambda r: True,
                           now_ms=0, delete_retention_ms=0)
    assert deleted.data == b""


def test_crc_is_recomputed():
    batch = build_batch([b"a", b"b"], keys=[b"1", b"1"])
    result = filter_batch(batch, parse_header(batch), BatchRetention.DELETE_EMPTY,
                          lambda r: r.offset == 1, now_ms=0, delete_retention_ms=0)
    data = result.data
    (crc,) = struct.unpack_from(">I", data, CRC_OFFSET)
    assert crc == crc32c.crc32c(data[21:])


@pytest.mark.parametrize("codec", [0, 2, 4])
def test_keyless_records_are_found_by_batch_index(codec):
    a = build_batch([b"a", b"b", b"c"], keys=[b"k", None, b"k"])
    b = _with_codec(build_batch([b"d"], keys=[None], base_offset=3), codec)
    assert keyless_records(a + b) == [1, 0]
    assert keyless_records(build_batch([b"x"], keys=[b"k"])) == []


@pytest.mark.parametrize("codec", [0, 1, 3, 4])
def test_scan_keys_agrees_with_the_full_decode(codec):
    """The cleaner's key scan (one- and two-byte varints inlined) sees what the full decode
    sees: offsets, keys (null too), tombstones, over short, 64+ byte and 8 KiB+ records."""
    values = [b"v", None, b"x" * 100, None, b"y" * 9000, b""]
    keys = [b"k0", b"k1", None, b"k" * 200, b"k4", b"k5"]
    raw = build_batch(values, keys=keys, base_offset=42, timestamp_ms=1_700_000_000_000,
                      timestamps=[1_700_000_000_000 + d for d in (0, 5, 100, 70_000, 1, 2)])
    batch = _with_codec(raw, codec) if codec else raw
    header = parse_header(batch)
    offsets, got_keys, tombstones = scan_keys(batch, header)
    records = list(decode_raw_records(batch, header))
    assert offsets == [r.offset for r in records] == list(range(42, 48))
    assert got_keys == [r.key for r in records] == keys
    assert tombstones == [r.value is None for r in records] == [v is None for v in values]


def test_scan_keys_rejects_a_truncated_record():
    batch = bytearray(build_batch([b"value"], keys=[b"key"]))
    batch[61] = 0x7E  # the record claims 63 bytes: past the batch
    with pytest.raises(KafkaError) as err:
        scan_keys(bytes(batch), parse_header(bytes(batch)))
    assert err.value.code == ErrorCode.corrupt_message

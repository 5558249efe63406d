"""Record-level filtering and re-batching of magic-v2 batches — the log cleaner's half of
Kafka's ``MemoryRecords.filterTo`` — and the key check of a produce to a compacted topic.

A batch is decoded into :class:`RawRecord` s that keep each record's bytes after its offset
delta (key, value, headers) untouched, so re-encoding a kept record only rewrites its length,
timestamp delta and offset delta.  A rebuilt batch keeps the original ``baseOffset`` and
``lastOffsetDelta`` (the producer's sequence numbers stay meaningful: ``baseSequence`` +
delta still names the batch's last record), its producer id, epoch, base sequence, partition
leader epoch, timestamp type, transactional/control bits and compression codec; the CRC is
computed anew.  A batch from which nothing is removed is copied as is.

Tombstones follow KIP-534: the first cleaning of a batch holding a tombstone rewrites it with
the *delete horizon* (``now + delete.retention.ms``) as its ``baseTimestamp`` and attribute
bit 6 set (record timestamp deltas are re-encoded against it, so every record keeps its
timestamp); a later cleaning after the horizon drops the tombstones.
"""

from __future__ import annotations

import enum
import gzip
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import crc32c

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    iter_headers,
)
from weir.records.builder import encode_varint
from weir.records.records import MAX_DECOMPRESSED_BYTES, _decompress, decode_varint

__all__ = [
    "DELETE_HORIZON_BIT",
    "BatchRetention",
    "RawRecord",
    "RecordValidationError",
    "build_batch_from",
    "compress",
    "decode_raw_records",
    "delete_horizon_ms",
    "empty_batch",
    "filter_batch",
    "iter_keys",
    "keyless_records",
    "require_keys",
    "scan_keys",
]

DELETE_HORIZON_BIT = 0x40  # KIP-534: baseTimestamp holds the delete horizon

_HEAD = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_BODY = struct.Struct(">hiqqqhii")  # attributes .. recordsCount


class BatchRetention(enum.Enum):
    """What to do with a batch once its records are filtered (Kafka's BatchRetention)."""

    DELETE = "delete"  # drop the whole batch, records unseen
    DELETE_EMPTY = "delete_empty"  # drop the batch if no record is kept
    RETAIN_EMPTY = "retain_empty"  # keep at least an empty header (producer state, last offset)


@dataclass(slots=True)
class RawRecord:
    """One record of a batch: ``raw`` is its encoding (length prefix included), whose bytes
    from ``tail_at`` on are its key, value and headers."""

    attributes: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    raw: bytes
    tail_at: int

    @property
    def tail(self) -> bytes:
        return self.raw[self.tail_at:]

    def encode(self, base_offset: int, base_timestamp: int) -> bytes:
        body = (
            bytes((self.attributes,))
            + encode_varint(self.timestamp - base_timestamp)
            + encode_varint(self.offset - base_offset)
            + self.tail
        )
        return encode_varint(len(body)) + body


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """The batch's KIP-534 delete horizon, None if it has none."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint; one and two byte values (nearly all of them) without a call."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    if pos + 1 < len(buf) and buf[pos + 1] < 0x80:
        raw = (b & 0x7F) | (buf[pos + 1] << 7)
        return (raw >> 1) ^ -(raw & 1), pos + 2
    return decode_varint(buf, pos)


def decode_raw_records(batch: bytes, header: BatchHeader,
                       max_bytes: int = MAX_DECOMPRESSED_BYTES) -> Iterator[RawRecord]:
    """Every record of the batch ``header`` describes inside ``batch`` (compressed too)."""
    start = header.position + HEADER_SIZE
    body = _decompress(header.compression, bytes(batch[start:header.position + header.size]),
                       max_bytes)
    base_offset, base_ts, size = header.base_offset, header.base_timestamp, len(body)
    pos = 0
    try:
        for _ in range(header.records_count):
            record_start = pos
            length, pos = _varint(body, pos)
            end = pos + length
            if length < 1 or end > size:
                raise _corrupt(f"record of {length} bytes at {pos}: {size - pos} remain")
            attributes = body[pos]
            ts_delta, p = _varint(body, pos + 1)
            off_delta, p = _varint(body, p)
            tail_start = p
            klen, p = _varint(body, p)
            if klen < 0:
                key = None
            else:
                key = body[p:p + klen]
                p += klen
            vlen, p = _varint(body, p)
            if vlen < 0:
                value = None
            else:
                value = body[p:p + vlen]
                p += vlen
            if p > end:
                raise _corrupt(f"a key or value runs past its record at {pos}")
            yield RawRecord(attributes, base_offset + off_delta, base_ts + ts_delta, key, value,
                            body[record_start:end], tail_start - record_start)
            pos = end
    except IndexError as exc:
        raise _corrupt(f"record truncated at {pos}") from exc


def iter_keys(batch: bytes, header: BatchHeader,
              max_bytes: int = MAX_DECOMPRESSED_BYTES) -> Iterator[tuple[int, bytes | None]]:
    """(offset, key) of every record of the batch: the offset map needs nothing else."""
    start = header.position + HEADER_SIZE
    body = _decompress(header.compression, bytes(batch[start:header.position + header.size]),
                       max_bytes)
    base_offset, size = header.base_offset, len(body)
    pos = 0
    try:
        for _ in range(header.records_count):
            length, pos = _varint(body, pos)
            end = pos + length
            if length < 1 or end > size:
                raise _corrupt(f"record of {length} bytes at {pos}: {size - pos} remain")
            _ts, p = _varint(body, pos + 1)
            off_delta, p = _varint(body, p)
            klen, p = _varint(body, p)
            if p + max(klen, 0) > end:
                raise _corrupt(f"a key runs past its record at {pos}")
            yield base_offset + off_delta, (body[p:p + klen] if klen >= 0 else None)
            pos = end
    except IndexError as exc:
        raise _corrupt(f"record truncated at {pos}") from exc


def scan_keys(batch: bytes, header: BatchHeader, max_bytes: int = MAX_DECOMPRESSED_BYTES
              ) -> tuple[list[int], list[bytes | None], list[bool]]:
    """The offsets, keys and tombstone flags (null value) of every record of the batch, in
    one loop without a call per one-byte varint: what the log cleaner decides a record's
    fate with (the offset map, then the filter), without building :class:`RawRecord` s."""
    start = header.position + HEADER_SIZE
    body = _decompress(header.compression, bytes(batch[start:header.position + header.size]),
                       max_bytes)
    base_offset, size = header.base_offset, len(body)
    offsets: list[int] = []
    keys: list[bytes | None] = []
    tombstones: list[bool] = []
    pos = 0
    try:
        for _ in range(header.records_count):
            b = body[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif body[pos + 1] < 0x80:  # a record of 64..8191 bytes
                b = (b & 0x7F) | (body[pos + 1] << 7)
                length, pos = (b >> 1) ^ -(b & 1), pos + 2
            else:
                length, pos = _varint(body, pos)
            end = pos + length
            if length < 1 or end > size:
                raise _corrupt(f"record of {length} bytes at {pos}: {size - pos} remain")
            p = pos + 1  # attributes
            while body[p] >= 0x80:  # the timestamp delta, skipped
                p += 1
            p += 1
            b = body[p]
            if b < 0x80:
                off_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                off_delta, p = _varint(body, p)
            b = body[p]
            if b < 0x80:
                klen, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                klen, p = _varint(body, p)
            if klen >= 0:
                keys.append(body[p:p + klen])
                p += klen
            else:
                keys.append(None)
            if p >= end:
                raise _corrupt(f"a key runs past its record at {pos}")
            b = body[p]
            tombstones.append(b == 1)  # zig-zag -1: a null value
            offsets.append(base_offset + off_delta)
            pos = end
    except IndexError as exc:
        raise _corrupt(f"record truncated at {pos}") from exc
    return offsets, keys, tombstones


def keyless_records(buf: bytes) -> list[int]:
    """Indexes (within their batch, as KIP-467's ``batch_index``) of the records without a key
    in the data batches of ``buf``; control batches are skipped."""
    missing: list[int] = []
    for header in iter_headers(buf):
        if header.is_control:
            continue
        for index, record in enumerate(decode_raw_records(buf, header)):
            if record.key is None:
                missing.append(index)
    return missing


class RecordValidationError(KafkaError):
    """INVALID_RECORD with KIP-467's per-record errors: (batch index, message) pairs (Kafka's
    ``RecordValidationException``)."""

    def __init__(self, message: str, record_errors: list[tuple[int, str | None]]) -> None:
        super().__init__(ErrorCode.invalid_record, message)
        self.record_errors = record_errors


def require_keys(topic_partition: object, buf: bytes) -> None:
    """A produce to a compacted topic: every record needs a key (Kafka's
    ``LogValidator.validateKey``), else RecordValidationError naming each keyless record."""
    missing = keyless_records(buf)
    if not missing:
        return
    message = ("Compacted topic cannot accept message without key in topic partition "
               f"{topic_partition}")
    errors: list[tuple[int, str | None]] = [(index, message) for index in missing]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]", errors)


# -- compression ---------------------------------------------------------------------------
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as Kafka's producers do: gzip, snappy in xerial framing (as the Java
    client's SnappyOutputStream), LZ4 frames with independent 64 KiB blocks and no content
    size (KafkaLZ4BlockOutputStream), zstd frames."""
    if codec == 0:
        return data
    if codec == 1:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == 2:
        import snappy

        parts = [_XERIAL_HEADER]
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = snappy.compress(data[i:i + _XERIAL_BLOCK])
            parts.append(struct.pack(">i", len(block)) + block)
        return b"".join(parts)
    if codec == 3:
        import lz4.frame

        return lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                  block_linked=False, store_size=False, content_checksum=False)
    if codec == 4:
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    raise _corrupt(f"unknown compression codec {codec}")


# -- building --------------------------------------------------------------------------------
def _assemble(header: BatchHeader, attributes: int, base_timestamp: int, max_timestamp: int,
              count: int, payload: bytes) -> bytes:
    body = _BODY.pack(attributes, header.last_offset_delta, base_timestamp, max_timestamp,
                      header.producer_id, header.producer_epoch, header.base_sequence,
                      count) + payload
    head = _HEAD.pack(header.base_offset, 4 + 1 + 4 + len(body),
                      header.partition_leader_epoch, 2)
    return head + struct.pack(">I", crc32c.crc32c(body)) + body


def build_batch_from(header: BatchHeader, records: list[RawRecord],
                     horizon_ms: int | None) -> bytes:
    """A batch like ``header``'s holding ``records`` (at least one), with the KIP-534 delete
    horizon ``horizon_ms`` if given."""
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
        base_ts = horizon_ms
    else:
        base_ts = header.base_timestamp
    if header.timestamp_type == LOG_APPEND_TIME:
        max_ts = header.max_timestamp
    else:
        max_ts = max(r.timestamp for r in records)
    if base_ts == header.base_timestamp:  # same bases: each record's bytes stay valid
        payload = b"".join(r.raw for r in records)
    else:
        payload = b"".join(r.encode(header.base_offset, base_ts) for r in records)
    return _assemble(header, attributes, base_ts, max_ts, len(records),
                     compress(header.compression, payload))


def empty_batch(header: BatchHeader) -> bytes:
    """The header alone (no records, uncompressed), kept for its producer id, epoch and
    sequence range and its last offset (Kafka's ``DefaultRecordBatch.writeEmptyHeader``)."""
    attributes = header.attributes & ~(DELETE_HORIZON_BIT | 0x07)
    return _assemble(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


@dataclass(slots=True)
class FilterResult:
    data: bytes  # b"" when the batch is dropped
    records_read: int
    records_kept: int
    copied: bool  # the original bytes, unchanged


def filter_batch(
    buf: bytes,
    header: BatchHeader,
    retention: BatchRetention,
    keep: Callable[[RawRecord], bool],
    *,
    now_ms: int,
    delete_retention_ms: int,
) -> FilterResult:
    """Filter one batch of ``buf`` (at ``header.position``) as Kafka's ``filterTo``.

    ``keep`` decides per record; a kept tombstone in a batch without a delete horizon gives
    the rebuilt batch the horizon ``now_ms + delete_retention_ms``."""
    if retention is BatchRetention.DELETE:
        return FilterResult(b"", header.records_count, 0, False)
    kept: list[RawRecord] = []
    read = 0
    tombstones = False
    for record in decode_raw_records(buf, header):
        read += 1
        if keep(record):
            kept.append(record)
            tombstones = tombstones or record.value is None
    horizon = delete_horizon_ms(header)
    set_horizon = tombstones and horizon is None and not header.is_control
    if kept:
        if len(kept) == read and not set_horizon:
            original = bytes(buf[header.position:header.position + header.size])
            return FilterResult(original, read, read, True)
        new_horizon = now_ms + delete_retention_ms if set_horizon else horizon
        return FilterResult(build_batch_from(header, kept, new_horizon), read, len(kept), False)
    if retention is BatchRetention.RETAIN_EMPTY:
        return FilterResult(empty_batch(header), read, 0, False)
    return FilterResult(b"", read, 0, False)

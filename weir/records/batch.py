"""Record batch (magic v2) headers: parse, validate, patch offsets — no per-record work.

A produce request carries one or more record batches back to back.  The broker treats a
batch as opaque bytes: it reads only the 61-byte header, checks the CRC32C and sizes,
and patches ``baseOffset`` / ``partitionLeaderEpoch`` (not CRC-covered) in place.  Only
``LogAppendTime`` requires re-computing the CRC, because it rewrites ``attributes`` and
``maxTimestamp``.  Compressed batches are stored exactly as they arrive.

Header layout (big-endian)::

    baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
    attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
    producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32

``batchLength`` counts the bytes after itself, so a batch occupies ``batchLength + 12``.
The CRC covers everything from ``attributes`` to the end of the batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from weir.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "BatchHeader",
    "assign_offsets",
    "batch_crc",
    "iter_headers",
    "parse_header",
    "scan_valid_prefix",
    "validate_batches",
    "validate_produce",
]

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes not counted by batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_PRODUCER_ID = -1
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
assert _HEADER.size == HEADER_SIZE


@dataclass(slots=True)
class BatchHeader:
    """The parsed v2 header of one batch located at ``position`` in some buffer/file."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies (header included)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        """Codec id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence number of the batch's last record (wraps after 2**31 - 1)."""
        if self.base_sequence < 0:
            return self.base_sequence
        return (self.base_sequence + self.last_offset_delta) % (INT32_MAX + 1)


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; the batch body need not be present."""
    if len(buf) - pos < HEADER_SIZE:
        raise _corrupt(f"record batch header truncated at position {pos}")
    fields = _HEADER.unpack_from(buf, pos)
    header = BatchHeader(*fields, position=pos)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise _corrupt(f"impossible batch length {header.batch_length} at position {pos}")
    return header


def batch_crc(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    """CRC32C of the batch's CRC-covered span (attributes .. end of batch)."""
    start = header.position + ATTRIBUTES_OFFSET
    end = header.position + header.size
    return crc32c.crc32c(memoryview(buf)[start:end])


def iter_headers(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[BatchHeader]:
    """Yield the headers of the complete batches from ``pos``; stop at a partial batch."""
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = parse_header(buf, pos)
        if pos + header.size > end:
            return
        yield header
        pos += header.size


def scan_valid_prefix(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify_crc: bool = True
) -> tuple[list[BatchHeader], int]:
    """Recovery helper: the well-formed batches from ``pos`` and where that prefix ends.

    Stops (without raising) at a torn batch, a bad magic/length or a CRC mismatch.
    """
    headers: list[BatchHeader] = []
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        try:
            header = parse_header(buf, pos)
        except KafkaError:
            break
        if header.magic != 2 or pos + header.size > end:
            break
        if verify_crc and batch_crc(buf, header) != header.crc:
            break
        headers.append(header)
        pos += header.size
    return headers, pos


def validate_batches(
    buf: bytes | bytearray | memoryview,
    max_batch_bytes: int | None = None,
    *,
    strict: bool = True,
) -> list[BatchHeader]:
    """Check every batch in ``buf`` and return their headers.

    ``strict`` adds the produce-only rules (at least one record, ``lastOffsetDelta`` equal
    to ``recordsCount - 1``); a follower's appends only need the structural checks.
    """
    headers: list[BatchHeader] = []
    pos, end = 0, len(buf)
    if end == 0:
        raise _corrupt("empty record set")
    while pos < end:
        if end - pos < HEADER_SIZE or buf[pos + MAGIC_OFFSET] != 2:
            _check_magic(buf, pos)  # the error of a short batch or another magic
            header = parse_header(buf, pos)
        else:  # parse_header, inline: this loop runs once per batch of every append
            header = BatchHeader(*_HEADER.unpack_from(buf, pos), position=pos)
            if header.batch_length < MIN_BATCH_LENGTH:
                raise _corrupt(f"impossible batch length {header.batch_length} at position "
                               f"{pos}")
        size = header.batch_length + LOG_OVERHEAD
        if pos + size > end:
            raise _corrupt(
                f"batch at position {pos} claims {header.size} bytes, only {end - pos} remain"
            )
        if max_batch_bytes is not None and size > max_batch_bytes:
            raise KafkaError(
                ErrorCode.message_too_large,
                f"batch of {size} bytes exceeds the limit of {max_batch_bytes}",
            )
        if crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + size]) != header.crc:
            raise _corrupt(f"CRC32C mismatch in batch at position {pos}")
        delta = header.last_offset_delta
        if delta < 0 or strict and delta != header.records_count - 1:
            _check_counts(header, strict)
        headers.append(header)
        pos += size
    return headers


def validate_produce(buf: bytes, max_batch_bytes: int) -> list[BatchHeader]:
    """Validate a produce request's records (magic 2, sizes, CRC32C, limits)."""
    return validate_batches(buf, max_batch_bytes, strict=True)


def _check_magic(buf: bytes | bytearray | memoryview, pos: int) -> None:
    if len(buf) - pos <= MAGIC_OFFSET:
        raise _corrupt(f"record batch truncated at position {pos}")
    magic = buf[pos + MAGIC_OFFSET]
    if magic in (0, 1):
        raise KafkaError(
            ErrorCode.unsupported_for_message_format,
            f"message format v{magic} is not supported; use magic v2",
        )
    if magic != 2:
        raise _corrupt(f"unknown magic byte {magic} at position {pos}")


def _check_counts(header: BatchHeader, strict: bool) -> None:
    if header.last_offset_delta < 0:
        raise _corrupt(f"negative lastOffsetDelta {header.last_offset_delta}")
    if not strict:
        return
    if header.records_count < 1:
        raise _corrupt("record batch must contain at least one record")
    if header.last_offset_delta != header.records_count - 1:
        raise _corrupt(
            f"lastOffsetDelta {header.last_offset_delta} inconsistent with "
            f"recordsCount {header.records_count}"
        )


def assign_offsets(
    buf: bytes | bytearray,
    headers: list[BatchHeader],
    base_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> bytearray:
    """Return a copy of ``buf`` with offsets and leader epoch assigned to every batch.

    Batches get consecutive offsets from ``base_offset``.  With ``log_append_time_ms`` the
    LogAppendTime bit and ``maxTimestamp`` are set and the CRC recomputed.  ``headers`` are
    updated in place to describe the returned buffer.
    """
    out = bytearray(buf)
    next_offset = base_offset
    for header in headers:
        pos = header.position
        _I64.pack_into(out, pos, next_offset)
        _I32.pack_into(out, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
        header.base_offset = next_offset
        header.partition_leader_epoch = leader_epoch
        if log_append_time_ms is not None:
            header.attributes |= TIMESTAMP_TYPE_BIT
            header.max_timestamp = log_append_time_ms
            _I16.pack_into(out, pos + ATTRIBUTES_OFFSET, header.attributes)
            _I64.pack_into(out, pos + MAX_TIMESTAMP_OFFSET, log_append_time_ms)
            header.crc = batch_crc(out, header)
            _U32.pack_into(out, pos + CRC_OFFSET, header.crc)
        next_offset += header.last_offset_delta + 1
    return out

"""Message formats v0 and v1 (magic 0 and 1), for Produce v0-2 and Fetch v0-3.

Kafka 3.9 still serves these versions (KIP-896 removed them in 4.0) and converts between
the old message sets and the magic-2 batches it stores (``LogValidator`` on produce,
``RecordsUtil.downConvert`` on fetch). Weir does the same, sans I/O:

* :func:`down_convert` turns stored v2 batches into a v0/v1 message set: control batches are
  skipped, records below the fetch offset dropped, a zstd batch is refused
  (UNSUPPORTED_COMPRESSION_TYPE, as Kafka: the old formats have no zstd), headers are lost.
  Messages are written uncompressed (Kafka recompresses with the batch's codec; consumers
  read both alike), with the batch's timestamp type and, for LogAppendTime, its time.
* :func:`up_convert` turns a v0/v1 message set from a producer into one uncompressed v2
  batch: each message's CRC32 is checked, compressed wrappers are opened (gzip, snappy
  with or without xerial framing, lz4), v0 messages get no timestamp (-1). A message set
  that does not parse is CORRUPT_MESSAGE.

Layout of one message (``LegacyRecord``): offset int64, size int32, then crc uint32 (CRC32
of the rest), magic int8, attributes int8 (codec in bits 0-2; v1: timestamp type in bit 3),
v1 only: timestamp int64, key bytes (int32 length, -1 null), value bytes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import LOG_APPEND_TIME, iter_headers
from weir.records.builder import build_batch
from weir.records.records import MAX_DECOMPRESSED_BYTES, _decompress, iter_records

__all__ = ["LegacyMessage", "down_convert", "encode_message", "iter_messages", "up_convert"]

_OFFSET_SIZE = struct.Struct(">qi")
_CRC_MAGIC_ATTR = struct.Struct(">Ibb")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ZSTD = 4
_TIMESTAMP_TYPE_BIT = 0x08
_CODEC_MASK = 0x07
_MAX_NESTING = 1  # a compressed wrapper holds plain messages only


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    offset: int
    magic: int
    timestamp: int  # -1 for v0
    key: bytes | None
    value: bytes | None
    log_append_time: bool = False


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


def _nullable_bytes(data: bytes | None) -> bytes:
    return _I32.pack(-1) if data is None else _I32.pack(len(data)) + data


def encode_message(offset: int, magic: int, timestamp: int, key: bytes | None,
                   value: bytes | None, attributes: int = 0) -> bytes:
    """One uncompressed (or, with a codec in ``attributes``, wrapper) message."""
    body = struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += _I64.pack(timestamp)
    body += _nullable_bytes(key) + _nullable_bytes(value)
    crc = zlib.crc32(body) & 0xFFFFFFFF
    message = struct.pack(">I", crc) + body
    return _OFFSET_SIZE.pack(offset, len(message)) + message


def down_convert(buf: bytes, magic: int, fetch_offset: int) -> bytes:
    """The whole v2 batches of ``buf`` as a message set of ``magic`` (0 or 1)."""
    if magic not in (0, 1):
        raise ValueError(f"magic {magic} is not an old message format")
    out = bytearray()
    for header in iter_headers(buf):
        if header.position + header.size > len(buf):
            break  # a partial batch at the end of a fetch: left out, as clients do
        if header.is_control:
            continue
        if header.compression == _ZSTD:
            raise KafkaError(ErrorCode.unsupported_compression_type,
                             "down-conversion of zstandard-compressed batches is not supported")
        append_time = header.timestamp_type == LOG_APPEND_TIME
        attributes = _TIMESTAMP_TYPE_BIT if (magic == 1 and append_time) else 0
        batch = buf[header.position:header.position + header.size]
        for record in iter_records(batch):
            if record.offset < fetch_offset:
                continue
            stamp = header.max_timestamp if append_time else record.timestamp
            out += encode_message(record.offset, magic, stamp, record.key, record.value,
                                  attributes)
    return bytes(out)


def iter_messages(buf: bytes, max_bytes: int = MAX_DECOMPRESSED_BYTES, _depth: int = 0
                  ) -> Iterator[LegacyMessage]:
    """The messages of a v0/v1 message set, compressed wrappers opened; CRCs checked."""
    pos = 0
    while pos < len(buf):
        if pos + _OFFSET_SIZE.size > len(buf):
            raise _corrupt(f"message set ends inside a message header at {pos}")
        offset, size = _OFFSET_SIZE.unpack_from(buf, pos)
        start, end = pos + _OFFSET_SIZE.size, pos + _OFFSET_SIZE.size + size
        if size < _CRC_MAGIC_ATTR.size + 8 or end > len(buf):
            raise _corrupt(f"message of {size} bytes at {pos}: {len(buf) - start} remain")
        crc, magic, attributes = _CRC_MAGIC_ATTR.unpack_from(buf, start)
        if magic == 2:
            # Kafka's ProduceRequest.validateRecords: v0-2 may carry magic 0 and 1 only.
            raise KafkaError(ErrorCode.invalid_record,
                             "Produce v0-2 may carry message format v0 and v1 only")
        if magic not in (0, 1):
            raise _corrupt(f"message at {pos} has magic {magic} in a v0/v1 message set")
        if zlib.crc32(buf[start + 4:end]) & 0xFFFFFFFF != crc:
            raise _corrupt(f"message at {pos} fails its CRC32")
        p = start + _CRC_MAGIC_ATTR.size
        timestamp = -1
        if magic == 1:
            if p + 8 > end:
                raise _corrupt(f"message at {pos} is too short for a timestamp")
            timestamp = _I64.unpack_from(buf, p)[0]
            p += 8
        key, p = _read_bytes(buf, p, end)
        value, p = _read_bytes(buf, p, end)
        codec = attributes & _CODEC_MASK
        append_time = magic == 1 and bool(attributes & _TIMESTAMP_TYPE_BIT)
        if codec == 0:
            yield LegacyMessage(offset, magic, timestamp, key, value, append_time)
        else:
            if _depth >= _MAX_NESTING or value is None:
                raise _corrupt(f"compressed message at {pos} is nested or has no value")
            if codec == _ZSTD:
                raise KafkaError(ErrorCode.unsupported_compression_type,
                                 "zstd needs message format v2")
            inner = list(iter_messages(_decompress(codec, value, max_bytes), max_bytes,
                                       _depth + 1))
            yield from _absolute(inner, offset, magic, timestamp if append_time else None)
        pos = end


def _absolute(inner: list[LegacyMessage], wrapper_offset: int, magic: int,
              append_time: int | None) -> Iterator[LegacyMessage]:
    """v1 inner offsets are relative (the wrapper has the last one's absolute offset)."""
    last = inner[-1].offset if inner else 0
    for m in inner:
        offset = m.offset if magic == 0 else wrapper_offset - last + m.offset
        stamp = append_time if append_time is not None else m.timestamp
        yield LegacyMessage(offset, m.magic, stamp, m.key, m.value, append_time is not None)


def _read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise _corrupt(f"message field runs past its message at {pos}")
    size = _I32.unpack_from(buf, pos)[0]
    pos += 4
    if size < 0:
        return None, pos
    if pos + size > end:
        raise _corrupt(f"a key or value of {size} bytes runs past its message at {pos}")
    return bytes(buf[pos:pos + size]), pos + size


def up_convert(buf: bytes) -> bytes:
    """A producer's v0/v1 message set as one uncompressed v2 batch (offsets from 0)."""
    messages = list(iter_messages(buf))
    if not messages:
        raise _corrupt("the message set holds no message")
    return build_batch([m.value for m in messages], keys=[m.key for m in messages],
                       timestamps=[m.timestamp for m in messages])

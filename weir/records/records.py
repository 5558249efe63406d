"""Record-level decoding of magic-v2 batches, compressed ones included.

The broker's hot path never looks inside a batch; only the group coordinator (loading a
``__consumer_offsets`` partition) and ListOffsets by timestamp (finding the first record at
or after a time inside the batch the time index points to) do.  Control batches
(transaction markers) are skipped.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass

from weir.records.batch import HEADER_SIZE, iter_headers

__all__ = ["Record", "decode_varint", "iter_records"]


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def decode_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos``: (value, next position)."""
    raw = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return gzip.decompress(data)
    if codec == 2:
        return _snappy(data)
    if codec == 3:
        import lz4.frame

        return lz4.frame.decompress(data)
    if codec == 4:
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    raise ValueError(f"unknown compression codec {codec}")


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy(data: bytes) -> bytes:
    """Raw snappy, or the xerial framing the Java client writes (blocks of size + data)."""
    import snappy

    if not data.startswith(_XERIAL_MAGIC):
        return snappy.decompress(data)
    pos, out = 16, []
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        out.append(snappy.decompress(data[pos + 4:pos + 4 + size]))
        pos += 4 + size
    return b"".join(out)


def _nullable(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    size, pos = decode_varint(buf, pos)
    if size < 0:
        return None, pos
    return bytes(buf[pos:pos + size]), pos + size


def _records(body: bytes, count: int, base_offset: int, base_ts: int) -> Iterator[Record]:
    pos = 0
    for _ in range(count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = decode_varint(body, pos)
        off_delta, pos = decode_varint(body, pos)
        key, pos = _nullable(body, pos)
        value, pos = _nullable(body, pos)
        yield Record(base_offset + off_delta, base_ts + ts_delta, key, value)
        pos = end  # headers are not needed


def iter_records(buf: bytes, *, skip_control: bool = True) -> Iterator[Record]:
    """Every record of the whole v2 batches in ``buf`` (a trailing partial batch is ignored)."""
    for header in iter_headers(buf):
        if header.position + header.size > len(buf):
            return
        if skip_control and header.is_control:
            continue
        start = header.position + HEADER_SIZE
        body = _decompress(header.compression, bytes(buf[start:header.position + header.size]))
        yield from _records(body, header.records_count, header.base_offset,
                            header.base_timestamp)

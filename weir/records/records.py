"""Record-level decoding of magic-v2 batches, compressed ones included.

The broker's hot path never looks inside a batch; only the group coordinator (loading a
``__consumer_offsets`` partition) and ListOffsets by timestamp (finding the first record at
or after a time inside the batch the time index points to) do.  Control batches
(transaction markers) are skipped.

The bytes come from clients (CRC32C protects only against accidents), so every failure to
decode is a ``KafkaError`` with CORRUPT_MESSAGE naming what is wrong, never an ``IndexError``
or a codec's own exception, and decompression stops at ``max_bytes`` of output: a small batch
that inflates to gigabytes (a decompression bomb) is rejected, not allocated.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import HEADER_SIZE, iter_headers

__all__ = ["MAX_DECOMPRESSED_BYTES", "Record", "decode_varint", "iter_records"]

# The most bytes one batch may decompress to. Kafka's broker validates compressed batches
# record by record while it streams them (LogValidator); Weir decodes records only to replay
# __consumer_offsets and to search a batch by timestamp, and bounds the output instead. The
# default is 64 times the default max.message.bytes (1 MiB).
MAX_DECOMPRESSED_BYTES = 64 << 20


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


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
        if pos >= len(buf):
            raise _corrupt(f"varint runs past the end of the records at position {pos}")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise _corrupt(f"varint longer than ten bytes at position {pos}")


_CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _decompress(codec: int, data: bytes, max_bytes: int) -> bytes:
    if codec == 0:
        return data
    name = _CODECS.get(codec)
    if name is None:
        raise _corrupt(f"unknown compression codec {codec}")
    try:
        out = _inflate(codec, data, max_bytes)
    except KafkaError:
        raise
    except Exception as exc:  # each codec library raises its own types
        raise _corrupt(f"{name} data does not decompress: {exc}") from exc
    if len(out) > max_bytes:
        raise _corrupt(f"{name} batch decompresses to more than {max_bytes} bytes")
    return out


def _inflate(codec: int, data: bytes, max_bytes: int) -> bytes:
    """At most ``max_bytes + 1`` bytes of output (one more tells that the limit is passed)."""
    if codec == 1:
        d = zlib.decompressobj(wbits=31)  # gzip framing
        return d.decompress(data, max_bytes + 1)
    if codec == 2:
        return _snappy(data, max_bytes)
    if codec == 3:
        import lz4.frame

        return lz4.frame.LZ4FrameDecompressor().decompress(data, max_length=max_bytes + 1)
    import io

    import zstandard

    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
        while len(out) <= max_bytes:
            chunk = reader.read(min(1 << 20, max_bytes + 1 - len(out)))
            if not chunk:
                break
            out += chunk
    return bytes(out)


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy(data: bytes, max_bytes: int) -> bytes:
    """Raw snappy, or the xerial framing the Java client writes (blocks of size + data).

    A raw block states its uncompressed length first, so it is checked before inflating."""
    import snappy

    def block(raw: bytes) -> bytes:
        if _snappy_length(raw) > max_bytes:
            raise _corrupt(f"snappy block claims more than {max_bytes} bytes")
        return snappy.decompress(raw)

    if not data.startswith(_XERIAL_MAGIC):
        return block(data)
    pos, out, total = 16, [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        chunk = block(data[pos + 4:pos + 4 + size])
        total += len(chunk)
        if total > max_bytes:
            raise _corrupt(f"snappy batch decompresses to more than {max_bytes} bytes")
        out.append(chunk)
        pos += 4 + size
    return b"".join(out)


def _snappy_length(raw: bytes) -> int:
    """The uncompressed length a raw snappy block starts with (an unsigned varint)."""
    value = shift = 0
    for b in raw[:5]:
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7
    raise _corrupt("snappy block has no valid length")


def _nullable(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    size, pos = decode_varint(buf, pos)
    if size < 0:
        return None, pos
    if pos + size > end:
        raise _corrupt(f"a key or value of {size} bytes runs past its record at {pos}")
    return bytes(buf[pos:pos + size]), pos + size


def _records(body: bytes, count: int, base_offset: int, base_ts: int) -> Iterator[Record]:
    pos = 0
    for _ in range(count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise _corrupt(f"record of {length} bytes at {pos}: {len(body) - pos} remain")
        pos += 1  # attributes
        ts_delta, pos = decode_varint(body, pos)
        off_delta, pos = decode_varint(body, pos)
        key, pos = _nullable(body, pos, end)
        value, pos = _nullable(body, pos, end)
        yield Record(base_offset + off_delta, base_ts + ts_delta, key, value)
        pos = end  # headers are not needed


def iter_records(buf: bytes, *, skip_control: bool = True,
                 max_bytes: int = MAX_DECOMPRESSED_BYTES) -> Iterator[Record]:
    """Every record of the whole v2 batches in ``buf`` (a trailing partial batch is ignored).

    Raises ``KafkaError`` (CORRUPT_MESSAGE) for bytes that are not valid records."""
    for header in iter_headers(buf):
        if header.position + header.size > len(buf):
            return
        if skip_control and header.is_control:
            continue
        start = header.position + HEADER_SIZE
        body = _decompress(header.compression, bytes(buf[start:header.position + header.size]),
                           max_bytes)
        yield from _records(body, header.records_count, header.base_offset,
                            header.base_timestamp)

"""Encoding of v2 record batches with headers and compression, for the decoder's tests."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Sequence

import crc32c

from weir.records.builder import encode_varint

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_HEAD = struct.Struct(">qiib")
_BODY = struct.Struct(">hiqqqhii")

Header = tuple[str, bytes | None]
Rec = tuple[bytes | None, bytes | None, Sequence[Header]]


def _field(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def encode_record(delta: int, ts_delta: int, key: bytes | None, value: bytes | None,
                  headers: Sequence[Header] = ()) -> bytes:
    body = (b"\x00" + encode_varint(ts_delta) + encode_varint(delta) + _field(key)
            + _field(value) + encode_varint(len(headers)))
    for hk, hv in headers:
        body += _field(hk.encode()) + _field(hv)
    return encode_varint(len(body)) + body


def compress(codec: str, data: bytes) -> bytes:
    if codec == "gzip":
        return gzip.compress(data)
    if codec == "snappy":
        import snappy

        return snappy.compress(data)
    if codec == "lz4":
        import lz4.frame

        return lz4.frame.compress(data)
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data


def encode_batch(base_offset: int, records: Sequence[Rec], *, codec: str = "none",
                 base_ts: int = 1_700_000_000_000, log_append_time: int | None = None,
                 control: bool = False, offset_step: int = 1) -> bytes:
    """One CRC-correct v2 batch; record i has offset base + i * offset_step, ts base + i."""
    body = b"".join(encode_record(i * offset_step, i, k, v, h)
                    for i, (k, v, h) in enumerate(records))
    body = compress(codec, body)
    attributes = CODECS[codec] | (0x08 if log_append_time is not None else 0)
    attributes |= 0x20 if control else 0
    last = (len(records) - 1) * offset_step
    max_ts = log_append_time if log_append_time is not None else base_ts + len(records) - 1
    after_crc = _BODY.pack(attributes, last, base_ts, max_ts, -1, -1, -1, len(records)) + body
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    return _HEAD.pack(base_offset, length, 0, 2) + struct.pack(">I", crc) + after_crc

"""Encode simple uncompressed v2 record batches — for tests, simulations and tools.

The broker itself never builds or decodes records; this exists so tests and the simulator
can produce real, CRC-correct batches without a Kafka client.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from weir.records.batch import ATTRIBUTES_OFFSET, CONTROL_BIT, TRANSACTIONAL_BIT

__all__ = ["build_batch", "encode_varint"]

_HEAD = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_BODY = struct.Struct(">hiqqqhii")  # attributes .. recordsCount


def encode_varint(value: int) -> bytes:
    """Zig-zag varint (protobuf style) as used inside v2 records."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return encode_varint(-1)
    return encode_varint(len(data)) + data


def _record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None):
    body = (
        b"\x00"
        + encode_varint(timestamp_delta)
        + encode_varint(offset_delta)
        + _bytes_field(key)
        + _bytes_field(value)
        + encode_varint(0)
    )
    return encode_varint(len(body)) + body


def build_batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    base_offset: int = 0,
    timestamp_ms: int = 0,
    timestamps: Sequence[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """One uncompressed magic-2 batch holding ``values`` (at least one)."""
    if not values:
        raise ValueError("a batch needs at least one record")
    stamps = list(timestamps) if timestamps is not None else [timestamp_ms] * len(values)
    key_list = list(keys) if keys is not None else [None] * len(values)
    first_ts = stamps[0]
    records = b"".join(
        _record(i, stamps[i] - first_ts, key_list[i], value) for i, value in enumerate(values)
    )
    attributes = (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
    body = (
        _BODY.pack(
            attributes,
            len(values) - 1,
            first_ts,
            max(stamps),
            producer_id,
            producer_epoch,
            base_sequence,
            len(values),
        )
        + records
    )
    crc = crc32c.crc32c(body)
    batch_length = 4 + 1 + 4 + len(body)  # partitionLeaderEpoch + magic + crc + body
    head = _HEAD.pack(base_offset, batch_length, partition_leader_epoch, 2)
    batch = head + struct.pack(">I", crc) + body
    assert len(head) + 4 == ATTRIBUTES_OFFSET
    return batch

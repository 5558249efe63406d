"""Control records (KIP-98): the COMMIT/ABORT markers that end a transaction.

A transaction marker is a v2 batch with the *control* and *transactional* attribute bits,
the producer's id and epoch, no sequence (-1), and exactly one record, as Kafka's
``MemoryRecords.withEndTransactionMarker``:

* key, Kafka's ``ControlRecordType``: ``version i16 (0) | type i16`` with type 0 = ABORT,
  1 = COMMIT (other types, e.g. KRaft's, are not transaction markers);
* value, Kafka's ``EndTransactionMarker``: ``version i16 (0) | coordinatorEpoch i32``.

Control batches are never compressed.  :func:`read_marker` decodes one from a batch's bytes
(used when the log replays producer state and by the log cleaner); :func:`build_marker`
builds one for the WriteTxnMarkers handler (offsets are assigned by the log).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import HEADER_SIZE, BatchHeader, parse_header
from weir.records.builder import build_batch
from weir.records.records import decode_varint

__all__ = [
    "ABORT",
    "COMMIT",
    "EndTxnMarker",
    "build_marker",
    "decode_marker_key",
    "decode_marker_value",
    "encode_marker_key",
    "encode_marker_value",
    "read_marker",
]

ABORT = 0  # Kafka's ControlRecordType.ABORT
COMMIT = 1  # Kafka's ControlRecordType.COMMIT
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """A decoded marker: ``committed`` (COMMIT) or not (ABORT) and the coordinator epoch."""

    committed: bool
    coordinator_epoch: int

    @property
    def control_type(self) -> int:
        return COMMIT if self.committed else ABORT


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


def encode_marker_key(committed: bool) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, COMMIT if committed else ABORT)


def encode_marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def decode_marker_key(key: bytes | None) -> int:
    """The control record type of a control record's key (Kafka's ``ControlRecordType.parse``:
    version 0 only; a longer key of a later version is read for its first four bytes)."""
    if key is None or len(key) < _KEY.size:
        raise _corrupt("control record key is shorter than 4 bytes")
    version, kind = _KEY.unpack_from(key)
    if version < 0:
        raise _corrupt(f"control record key has invalid version {version}")
    return kind


def decode_marker_value(value: bytes | None) -> int:
    """The coordinator epoch of an ``EndTransactionMarker`` value."""
    if value is None or len(value) < _VALUE.size:
        raise _corrupt("end transaction marker value is shorter than 6 bytes")
    version, epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise _corrupt(f"end transaction marker has invalid version {version}")
    return epoch


def build_marker(producer_id: int, producer_epoch: int, committed: bool,
                 coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """One COMMIT/ABORT control batch (offset 0: the log assigns the real one)."""
    return build_batch(
        [encode_marker_value(coordinator_epoch)],
        keys=[encode_marker_key(committed)],
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        transactional=True,
        control=True,
    )


def read_marker(batch: bytes | bytearray | memoryview,
                header: BatchHeader | None = None) -> EndTxnMarker | None:
    """The marker of one control batch starting at ``header.position`` in ``batch``.

    None for a control batch with no record (Kafka: its transaction was cleaned away) or
    of another control type; ``KafkaError(CORRUPT_MESSAGE)`` for bytes that do not decode.
    """
    if header is None:
        header = parse_header(batch, 0)
    if not header.is_control:
        raise _corrupt(f"batch at offset {header.base_offset} is not a control batch")
    if header.records_count < 1:
        return None
    if header.compression:
        raise _corrupt("control batch is compressed")
    body = memoryview(batch)[header.position + HEADER_SIZE:header.position + header.size]
    length, pos = decode_varint(body, 0)
    end = pos + length
    if length < 0 or end > len(body):
        raise _corrupt("control record runs past its batch")
    pos += 1  # attributes
    _ts, pos = decode_varint(body, pos)
    _off, pos = decode_varint(body, pos)
    key, pos = _field(body, pos, end)
    value, pos = _field(body, pos, end)
    kind = decode_marker_key(key)
    if kind not in (ABORT, COMMIT):
        return None
    return EndTxnMarker(kind == COMMIT, decode_marker_value(value))


def _field(body: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    size, pos = decode_varint(body, pos)
    if size < 0:
        return None, pos
    if pos + size > end:
        raise _corrupt("control record key or value runs past its record")
    return bytes(body[pos:pos + size]), pos + size

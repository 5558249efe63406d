"""Kafka's ``__transaction_state`` record formats (``TransactionLogKey`` /
``TransactionLogValue``) and the transactional id → partition placement.

Key: int16 version 0, then the transactional id (int16-length string).
Value: int16 version, then producer id (int64), producer epoch (int16), transaction timeout
(int32), state (int8), partitions (nullable array of topic + int32 array; null when Empty),
last update timestamp (int64), start timestamp (int64). Version 1 is the same fields in
the flexible encoding (compact strings and arrays, tagged fields); we write version 0, as
Kafka 3.9 does without ``transaction.version`` 2, and read both. A null value deletes the id.
"""

from __future__ import annotations

import struct

from weir.common import TopicPartition, partitions_by_topic
from weir.transactions.state import TxnState, TxnTransit

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">qhib")


class CorruptTxnRecord(ValueError):
    pass


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, wrapping to int32)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount``."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def _string(v: str) -> bytes:
    raw = v.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(t: TxnTransit) -> bytes:
    if t.state == TxnState.EMPTY and t.partitions:
        raise ValueError("an Empty transaction has no partitions")
    parts = [_I16.pack(VALUE_VERSION),
             _VALUE_HEAD.pack(t.producer_id, t.producer_epoch, t.txn_timeout_ms, int(t.state))]
    if t.state == TxnState.EMPTY:
        parts.append(_I32.pack(-1))
    else:
        by_topic = partitions_by_topic(sorted(t.partitions))
        parts.append(_I32.pack(len(by_topic)))
        for topic, indexes in by_topic.items():
            parts.append(_string(topic) + _I32.pack(len(indexes)))
            parts.extend(_I32.pack(i) for i in indexes)
    parts.append(_I64.pack(t.txn_last_update_timestamp) + _I64.pack(t.txn_start_timestamp))
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes, flexible: bool) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise CorruptTxnRecord("record ends early")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def varint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.data) or shift > 28:
                raise CorruptTxnRecord("bad varint")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def length(self, wide: struct.Struct) -> int:
        """A (nullable) length: int16/int32 classic, unsigned varint N+1 flexible."""
        return self.varint() - 1 if self.flexible else self.take(wide)

    def string(self) -> str:
        n = self.length(_I16)
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptTxnRecord("bad string length")
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw.decode()

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.varint()):
            self.varint()
            n = self.varint()
            self.pos += n
        if self.pos > len(self.data):
            raise CorruptTxnRecord("bad tagged fields")


def decode_key(data: bytes) -> str | None:
    """The transactional id of a key (None for a key version we do not know, which Kafka
    skips)."""
    if len(data) < 2:
        raise CorruptTxnRecord("key too short")
    (version,) = _I16.unpack_from(data)
    if version != KEY_VERSION:
        return None
    r = _Reader(data, flexible=False)
    r.pos = 2
    return r.string()


def decode_value(data: bytes) -> TxnTransit:
    if len(data) < 2:
        raise CorruptTxnRecord("value too short")
    (version,) = _I16.unpack_from(data)
    if version not in (0, 1):
        raise CorruptTxnRecord(f"unknown value version {version}")
    r = _Reader(data, flexible=version >= 1)
    r.pos = 2
    pid = r.take(_I64)
    epoch = r.take(_I16)
    timeout = r.take(_I32)
    state_id = r.take(struct.Struct(">b"))
    try:
        state = TxnState(state_id)
    except ValueError as exc:
        raise CorruptTxnRecord(f"unknown transaction state {state_id}") from exc
    partitions: set[TopicPartition] = set()
    topics = r.length(_I32)
    for _ in range(max(topics, 0)):
        topic = r.string()
        for _ in range(max(r.length(_I32), 0)):
            partitions.add(TopicPartition(topic, r.take(_I32)))
        r.skip_tags()
    last_update = r.take(_I64)
    start = r.take(_I64)
    return TxnTransit(producer_id=pid, last_producer_id=-1, producer_epoch=epoch,
                      last_producer_epoch=-1, txn_timeout_ms=timeout, state=state,
                      partitions=frozenset(partitions), txn_start_timestamp=start,
                      txn_last_update_timestamp=last_update)

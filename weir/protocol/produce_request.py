"""Hand-written decoder of the Produce request body (v3-v11), the broker's hottest request.

The guard walk plus kio's reader cost about as much as the append itself for a request of
one 16 KiB batch.  This reads the same wire format (Kafka's ``ProduceRequest.json``) in one
pass with every length checked against the frame, and gives the handler the attributes it
reads of kio's object (``transactional_id``, ``acks``, ``timeout``, ``topic_data`` of
``name`` and ``partition_data`` of ``index`` and ``records``).

Anything unusual returns None, and the caller decodes the request with kio as before (so
malformed input meets exactly the same checks and errors): a version outside v3-v11, a
null or negative-length array or topic name, tagged fields present, a string that is not
UTF-8, a length running past the frame.  ``tests/unit/protocol`` checks it against kio on
every version and on truncated and corrupted frames.
"""

from __future__ import annotations

import datetime
import struct

_I16_I32 = struct.Struct(">hi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
MIN_VERSION = 3
MAX_VERSION = 11


class PartitionProduceData:
    __slots__ = ("index", "records")

    def __init__(self, index: int, records: bytes | None) -> None:
        self.index = index
        self.records = records


class TopicProduceData:
    __slots__ = ("name", "partition_data")

    def __init__(self, name: str, partition_data: tuple[PartitionProduceData, ...]) -> None:
        self.name = name
        self.partition_data = partition_data


class ProduceRequest:
    __slots__ = ("acks", "timeout_ms", "topic_data", "transactional_id")

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int,
                 topic_data: tuple[TopicProduceData, ...]) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data

    @property
    def timeout(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=self.timeout_ms)


class _Unusual(Exception):
    """Not the common shape: let kio decode it."""


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= end or shift > 28:
            raise _Unusual
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def decode(buf: bytes, offset: int, version: int) -> ProduceRequest | None:
    """The Produce request body of ``version`` at ``offset`` in ``buf``, or None when it is
    not of the usual shape (decode it with kio then).  Bytes after the body are ignored, as
    :func:`weir.protocol.codec.decode_body` does."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        return None
    try:
        if version >= 9:
            return _decode_flexible(buf, offset)
        return _decode_classic(buf, offset)
    except (_Unusual, UnicodeDecodeError):
        return None


def _decode_classic(buf: bytes, pos: int) -> ProduceRequest:
    end = len(buf)
    if pos + 2 > end:
        raise _Unusual
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    transactional_id = None
    if n >= 0:
        if pos + n > end:
            raise _Unusual
        transactional_id = str(buf[pos:pos + n], "utf-8")
        pos += n
    elif n != -1:
        raise _Unusual
    if pos + 10 > end:
        raise _Unusual
    acks, timeout_ms = _I16_I32.unpack_from(buf, pos)
    (topic_count,) = _I32.unpack_from(buf, pos + 6)
    pos += 10
    if topic_count < 0:
        raise _Unusual
    topics = []
    for _ in range(topic_count):
        if pos + 2 > end:
            raise _Unusual
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
        if n < 0 or pos + n + 4 > end:
            raise _Unusual
        name = str(buf[pos:pos + n], "utf-8")
        pos += n
        (part_count,) = _I32.unpack_from(buf, pos)
        pos += 4
        if part_count < 0:
            raise _Unusual
        parts = []
        for _ in range(part_count):
            if pos + 8 > end:
                raise _Unusual
            index, size = _I32_I32.unpack_from(buf, pos)
            pos += 8
            if size < 0:
                if size != -1:
                    raise _Unusual
                records = None
            else:
                if pos + size > end:
                    raise _Unusual
                records = bytes(buf[pos:pos + size])  # one copy from a memoryview
                pos += size
            parts.append(PartitionProduceData(index, records))
        topics.append(TopicProduceData(name, tuple(parts)))
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics))


_I32_I32 = struct.Struct(">ii")


def _decode_flexible(buf: bytes, pos: int) -> ProduceRequest:
    end = len(buf)
    if pos >= end:
        raise _Unusual
    n = buf[pos]  # lengths and counts below 128 take one byte
    pos += 1
    if n >= 0x80:
        n, pos = _uvarint(buf, pos - 1, end)
    transactional_id = None
    if n > 0:
        n -= 1
        if pos + n > end:
            raise _Unusual
        transactional_id = str(buf[pos:pos + n], "utf-8")
        pos += n
    if pos + 6 > end:
        raise _Unusual
    acks, timeout_ms = _I16_I32.unpack_from(buf, pos)
    pos += 6
    topic_count = buf[pos] if pos < end else 0x80
    pos += 1
    if topic_count >= 0x80:
        topic_count, pos = _uvarint(buf, pos - 1, end)
    if topic_count == 0:  # a null array
        raise _Unusual
    topics = []
    for _ in range(topic_count - 1):
        n = buf[pos] if pos < end else 0x80
        pos += 1
        if n >= 0x80:
            n, pos = _uvarint(buf, pos - 1, end)
        if n == 0:  # a null name
            raise _Unusual
        n -= 1
        if pos + n > end:
            raise _Unusual
        name = str(buf[pos:pos + n], "utf-8")
        pos += n
        part_count = buf[pos] if pos < end else 0x80
        pos += 1
        if part_count >= 0x80:
            part_count, pos = _uvarint(buf, pos - 1, end)
        if part_count == 0:
            raise _Unusual
        parts = []
        for _ in range(part_count - 1):
            if pos + 4 > end:
                raise _Unusual
            (index,) = _I32.unpack_from(buf, pos)
            size, pos = _uvarint(buf, pos + 4, end)
            if size == 0:
                records = None
            else:
                size -= 1
                if pos + size > end:
                    raise _Unusual
                records = bytes(buf[pos:pos + size])  # one copy from a memoryview
                pos += size
            if pos >= end or buf[pos] != 0:  # the partition's tagged fields: none
                raise _Unusual
            pos += 1
            parts.append(PartitionProduceData(index, records))
        if pos >= end or buf[pos] != 0:  # the topic's tagged fields: none
            raise _Unusual
        pos += 1
        topics.append(TopicProduceData(name, tuple(parts)))
    if pos >= end or buf[pos] != 0:  # the request's tagged fields: none
        raise _Unusual
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics))

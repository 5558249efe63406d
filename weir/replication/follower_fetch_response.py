"""A follower's Fetch response (v12, or v13 with topics by id; Kafka's FetchResponse.json)
read in one pass.

The replica fetcher receives one of these per leader append under ``acks=all``; kio's
reader (after the malformed-input guard's walk) copies each partition's records out of the
frame.  :func:`decode` reads the common shape by hand and leaves the records where they
are, a read-only view of the frame (the frame is received into a buffer of its own by
:class:`weir.protocol.client.ResponseFrames`), which the follower's append validates and
writes as it is.  Anything else (a tagged field such as a diverging epoch (KIP-320) or a
current leader, aborted transactions, a null array, a length past the frame) gives None,
and the caller decodes the frame with kio instead: same values, same errors.
"""

from __future__ import annotations

import struct
import uuid

__all__ = ["FastFetchResponse", "FastPartition", "FastTopic", "decode", "decode_v13"]

_HEAD = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PARTITION = struct.Struct(">ihqqq")  # index, error, high watermark, LSO, log start
_I32 = struct.Struct(">i")


class FastPartition:
    """The fields of a FetchResponse partition a follower reads (kio's attribute names)."""

    __slots__ = ("error_code", "high_watermark", "last_stable_offset", "log_start_offset",
                 "partition_index", "records")
    diverging_epoch = None  # present only as a tagged field: such frames go to kio

    def __init__(self, partition_index: int, error_code: int, high_watermark: int,
                 last_stable_offset: int, log_start_offset: int,
                 records: memoryview | None) -> None:
        self.partition_index = partition_index
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.records = records


class FastTopic:
    """A topic of the answer: by name (v12, ``topic``) or by id (v13, ``topic_id``)."""

    __slots__ = ("partitions", "topic", "topic_id")

    def __init__(self, topic: str | None, topic_id: uuid.UUID | None,
                 partitions: list[FastPartition]) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partitions = partitions


class FastFetchResponse:
    __slots__ = ("error_code", "responses", "session_id", "throttle_time_ms")

    def __init__(self, throttle_time_ms: int, error_code: int, session_id: int,
                 responses: list[FastTopic]) -> None:
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        self.session_id = session_id
        self.responses = responses


class _Unusual(Exception):
    """The frame is not of the common shape (or is malformed): kio decides."""


def _uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 28:
            raise _Unusual
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def decode(frame: bytes | memoryview, pos: int) -> FastFetchResponse | None:
    """The v12 response body at ``pos`` of ``frame``; None when kio must decode it."""
    try:
        return _decode(memoryview(frame), pos, False)
    except (_Unusual, struct.error, UnicodeDecodeError):
        return None


def decode_v13(frame: bytes | memoryview, pos: int) -> FastFetchResponse | None:
    """The same for v13, whose topics are named by id (KIP-516)."""
    try:
        return _decode(memoryview(frame), pos, True)
    except (_Unusual, struct.error, UnicodeDecodeError):
        return None


def _decode(buf: memoryview, pos: int, by_id: bool) -> FastFetchResponse:
    end = len(buf)
    throttle, error, session = _HEAD.unpack_from(buf, pos)
    pos += _HEAD.size
    n_topics, pos = _uvarint(buf, pos, end)
    if n_topics == 0:
        raise _Unusual  # null array
    topics = []
    for _ in range(n_topics - 1):
        name: str | None = None
        topic_id: uuid.UUID | None = None
        if by_id:
            if pos + 16 > end:
                raise _Unusual
            topic_id = uuid.UUID(bytes=bytes(buf[pos:pos + 16]))
            pos += 16
        else:
            size, pos = _uvarint(buf, pos, end)
            if size == 0 or pos + size - 1 > end:
                raise _Unusual
            name = str(buf[pos:pos + size - 1], "utf-8")
            pos += size - 1
        n_parts, pos = _uvarint(buf, pos, end)
        if n_parts == 0:
            raise _Unusual
        parts = []
        for _ in range(n_parts - 1):
            index, perr, hw, lso, log_start = _PARTITION.unpack_from(buf, pos)
            pos += _PARTITION.size
            aborted, pos = _uvarint(buf, pos, end)
            if aborted > 1:  # aborted transactions: a consumer's, not a follower's
                raise _Unusual
            pos += _I32.size  # preferred_read_replica
            size, pos = _uvarint(buf, pos, end)
            records = None
            if size:
                if pos + size - 1 > end:
                    raise _Unusual
                records = buf[pos:pos + size - 1]
                pos += size - 1
            tags, pos = _uvarint(buf, pos, end)
            if tags:  # diverging epoch, current leader, snapshot id
                raise _Unusual
            parts.append(FastPartition(index, perr, hw, lso, log_start, records))
        tags, pos = _uvarint(buf, pos, end)
        if tags:
            raise _Unusual
        topics.append(FastTopic(name, topic_id, parts))
    tags, pos = _uvarint(buf, pos, end)
    if tags or pos > end:
        raise _Unusual
    return FastFetchResponse(throttle, error, session, topics)

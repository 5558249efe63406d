"""Kafka's ``__consumer_offsets`` record formats and the group → partition placement.

Keys start with an int16 version: 0 and 1 are offset-commit keys (group, topic,
partition), 2 is a group-metadata key (group).  Values are versioned the same way; we write
offset values at version 3 and group values at version 3 (as Kafka 2.3+ does) and read
versions 0–3 of both.  A null value (tombstone) deletes the key.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from weir.common import TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


# -- placement ---------------------------------------------------------------------------


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, wrapping to int32)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % numPartitions`` (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# -- primitive writer/reader ---------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> _Writer:
        self.parts.append(_I16.pack(v))
        return self

    def i32(self, v: int) -> _Writer:
        self.parts.append(_I32.pack(v))
        return self

    def i64(self, v: int) -> _Writer:
        self.parts.append(_I64.pack(v))
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        raw = v.encode()
        self.parts.append(_I16.pack(len(raw)) + raw)
        return self

    def bytes_(self, v: bytes | None) -> _Writer:
        if v is None:
            return self.i32(-1)
        self.parts.append(_I32.pack(len(v)) + v)
        return self

    def done(self) -> bytes:
        return b"".join(self.parts)


class CorruptGroupRecord(ValueError):
    """A ``__consumer_offsets`` key or value that cannot be decoded (the message says why)."""


class _Reader:
    """Reads Kafka's classic (non-flexible) types; anything out of bounds or undecodable is a
    :class:`CorruptGroupRecord`, never a ``struct.error`` or a silently short slice."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptGroupRecord(
                f"{what} of {n} bytes at position {self.pos}: {len(self.buf) - self.pos} remain")
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def _unpack(self, s: struct.Struct) -> int:
        (v,) = s.unpack(self._take(s.size, "integer"))
        return v

    def i16(self) -> int:
        return self._unpack(_I16)

    def i32(self) -> int:
        return self._unpack(_I32)

    def i64(self) -> int:
        return self._unpack(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        raw = self._take(n, "string")
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise CorruptGroupRecord(f"string at position {self.pos - n} is not UTF-8") from exc

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        return bytes(self._take(n, "bytes"))

    def count(self, least: int) -> int:
        """An array length, each item taking at least ``least`` bytes."""
        n = self.i32()
        if n * least > len(self.buf) - self.pos:
            raise CorruptGroupRecord(f"array of {n} items at position {self.pos} does not fit")
        return max(n, 0)


# -- keys ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def encode_offset_key(group: str, tp: TopicPartition) -> bytes:
    return (_Writer().i16(OFFSET_KEY_VERSION).string(group).string(tp.topic)
            .i32(tp.partition).done())


def encode_group_key(group: str) -> bytes:
    return _Writer().i16(GROUP_KEY_VERSION).string(group).done()


def decode_key(buf: bytes) -> OffsetKey | GroupKey | None:
    """The key of a ``__consumer_offsets`` record; None for versions we do not know."""
    r = _Reader(buf)
    version = r.i16()
    if version in (0, 1):
        group, topic, partition = r.string() or "", r.string() or "", r.i32()
        return OffsetKey(group, TopicPartition(topic, partition))
    if version == 2:
        return GroupKey(r.string() or "")
    return None


# -- offset values ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int = -1  # only in value version 1
    record_offset: int = -1  # where in __consumer_offsets it was written (not serialised)


def encode_offset_value(o: OffsetAndMetadata) -> bytes:
    return (_Writer().i16(OFFSET_VALUE_VERSION).i64(o.offset).i32(o.leader_epoch)
            .string(o.metadata).i64(o.commit_timestamp).done())


def decode_offset_value(buf: bytes) -> OffsetAndMetadata:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= OFFSET_VALUE_VERSION:
        raise CorruptGroupRecord(f"unknown offset commit value version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    return OffsetAndMetadata(offset, epoch, metadata, commit_ts, expire_ts)


# -- group metadata values -----------------------------------------------------------------


@dataclass(slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberRecord] = field(default_factory=list)


def encode_group_value(g: GroupRecord) -> bytes:
    w = (_Writer().i16(GROUP_VALUE_VERSION).string(g.protocol_type).i32(g.generation)
         .string(g.protocol).string(g.leader).i64(g.current_state_timestamp)
         .i32(len(g.members)))
    for m in g.members:
        (w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
         .string(m.client_host).i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms)
         .bytes_(m.subscription).bytes_(m.assignment))
    return w.done()


def decode_group_value(buf: bytes) -> GroupRecord:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= GROUP_VALUE_VERSION:
        raise CorruptGroupRecord(f"unknown group metadata value version {version}")
    g = GroupRecord(r.string() or "", r.i32(), r.string(), r.string())
    if version >= 2:
        g.current_state_timestamp = r.i64()
    for _ in range(r.count(least=20)):  # four strings, two int32s, two bytes at least
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id, host = r.string() or "", r.string() or ""
        session = r.i32()
        rebalance = session
        if version >= 1:
            rebalance, session = session, r.i32()
        g.members.append(MemberRecord(member_id, instance_id, client_id, host, rebalance,
                                      session, r.bytes_(), r.bytes_()))
    return g


# -- consumer protocol ---------------------------------------------------------------------


def subscribed_topics(protocol_type: str, subscription: bytes) -> set[str]:
    """Topics in a ``consumer`` protocol subscription (version i16, topics [string], ...)."""
    if protocol_type != "consumer" or len(subscription) < 6:
        return set()
    try:
        r = _Reader(subscription)
        r.i16()
        return {r.string() or "" for _ in range(r.count(least=2))}
    except CorruptGroupRecord:
        return set()

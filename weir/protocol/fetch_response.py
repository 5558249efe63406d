"""Hand-written encoder of the Fetch response (v0-v17) as a list of chunks.

Record bytes are not copied through Python: a partition's records are a
:class:`FileRegion` (a slice of a segment file) that the socket server sends with
``sendfile``.  Everything else is encoded here directly; ``tests/unit/protocol`` checks
every version against kio's decoder.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from weir.protocol.codec import encode_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_PARTITION_OLD = struct.Struct(">ihq")  # v0-3: index, error, high watermark
_I64 = struct.Struct(">q")
_EPOCH_END = struct.Struct(">iq")
_LEADER = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``size`` bytes of ``path`` from ``position``: sent with sendfile.

    ``inode`` (0: unchecked) is the file's when it was read: the log cleaner replaces a
    segment by a new file of the same name (Kafka's replaceSegments), and the region must not
    be read from that one."""

    path: str
    position: int
    size: int
    inode: int = 0


@dataclass(slots=True)
class PartitionData:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    preferred_read_replica: int = -1
    records: bytes | FileRegion | None = b""
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset)
    current_leader: tuple[int, int] | None = None  # (leader id, leader epoch)
    # v4+: (producer id, first offset) of each aborted transaction a read_committed consumer
    # must drop (KIP-98); None (null) for read_uncommitted.
    aborted_transactions: list[tuple[int, int]] | None = None


Chunk = bytes | FileRegion


@dataclass
class _Writer:
    flexible: bool
    chunks: list[Chunk] = field(default_factory=list)
    buf: bytearray = field(default_factory=bytearray)

    def raw(self, data: bytes) -> None:
        self.buf += data

    def count(self, n: int) -> None:
        self.buf += encode_uvarint(n + 1) if self.flexible else _I32.pack(n)

    def string(self, value: str) -> None:
        raw = value.encode()
        self.buf += (encode_uvarint(len(raw) + 1) if self.flexible else _I16.pack(len(raw))) + raw

    def records(self, value: bytes | FileRegion | None) -> None:
        if value is None:
            self.buf += b"\x00" if self.flexible else _I32.pack(-1)
            return
        size = value.size if isinstance(value, FileRegion) else len(value)
        self.buf += encode_uvarint(size + 1) if self.flexible else _I32.pack(size)
        if isinstance(value, FileRegion):
            if size:
                self.chunks.append(bytes(self.buf))
                self.buf = bytearray()
                self.chunks.append(value)
        else:
            self.buf += value

    def done(self) -> list[Chunk]:
        if self.buf:
            self.chunks.append(bytes(self.buf))
        return self.chunks


def _tagged_fields(p: PartitionData) -> bytes:
    fields = []
    if p.diverging_epoch is not None:
        fields.append((0, _EPOCH_END.pack(*p.diverging_epoch) + b"\x00"))
    if p.current_leader is not None:
        fields.append((1, _LEADER.pack(*p.current_leader) + b"\x00"))
    out = bytearray(encode_uvarint(len(fields)))
    for tag, data in fields:
        out += encode_uvarint(tag) + encode_uvarint(len(data)) + data
    return bytes(out)


def encode(version: int, topics: list[tuple[str | uuid.UUID, list[PartitionData]]],
           error_code: int = 0, session_id: int = 0,
           node_endpoints: list[tuple[int, str, int, str | None]] = ()) -> list[Chunk]:
    """The body of a FetchResponse of ``version`` (0-17), as chunks.

    A topic is its name before v13 and its topic id (KIP-516) from v13. ``node_endpoints``
    (v16+, KIP-951: ``(node id, host, port, rack)``) tell a client where the current leaders
    named in partitions' ``current_leader`` are.
    """
    w = _Writer(flexible=version >= 12)
    if version >= 1:
        w.raw(_I32.pack(0))  # throttle time
    if version >= 7:
        w.raw(_I16.pack(error_code) + _I32.pack(session_id))
    w.count(len(topics))
    for topic, partitions in topics:
        if version >= 13:
            w.raw(topic.bytes if isinstance(topic, uuid.UUID) else bytes(16))
        else:
            w.string(str(topic))
        w.count(len(partitions))
        for p in partitions:
            if version < 4:  # no last stable offset, log start or aborted transactions
                w.raw(_PARTITION_OLD.pack(p.partition_index, p.error_code, p.high_watermark))
                w.records(p.records)
                continue
            w.raw(_PARTITION_HEAD.pack(p.partition_index, p.error_code, p.high_watermark,
                                       p.last_stable_offset))
            if version >= 5:
                w.raw(_I64.pack(p.log_start_offset))
            w.raw(_aborted(p.aborted_transactions, w.flexible))
            if version >= 11:
                w.raw(_I32.pack(p.preferred_read_replica))
            w.records(p.records)
            if w.flexible:
                w.raw(_tagged_fields(p))
        if w.flexible:
            w.raw(b"\x00")
    if w.flexible:
        if version >= 16 and node_endpoints:
            w.raw(b"\x01" + _node_endpoints(node_endpoints))
        else:
            w.raw(b"\x00")
    return w.done()


_ABORTED = struct.Struct(">qq")


def _aborted(txns: list[tuple[int, int]] | None, flexible: bool) -> bytes:
    """The AbortedTransactions array (v4+): null, or (producer id, first offset) entries."""
    if txns is None:
        return b"\x00" if flexible else _I32.pack(-1)
    out = bytearray(encode_uvarint(len(txns) + 1) if flexible else _I32.pack(len(txns)))
    for producer_id, first_offset in txns:
        out += _ABORTED.pack(producer_id, first_offset)
        if flexible:
            out += b"\x00"
    return bytes(out)


def _node_endpoints(nodes: list[tuple[int, str, int, str | None]]) -> bytes:
    """The top-level tagged field 0 of v16+."""
    out = bytearray(encode_uvarint(len(nodes) + 1))
    for node_id, host, port, rack in nodes:
        raw_host = host.encode()
        out += _I32.pack(node_id) + encode_uvarint(len(raw_host) + 1) + raw_host
        out += _I32.pack(port)
        if rack is None:
            out += b"\x00"
        else:
            raw_rack = rack.encode()
            out += encode_uvarint(len(raw_rack) + 1) + raw_rack
        out += b"\x00"
    return encode_uvarint(0) + encode_uvarint(len(out)) + bytes(out)

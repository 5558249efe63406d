"""Committed records of a partition's log, decoded into the topic table's columns.

Runs in a translator worker process (never on the broker's event loop).  Its input is what a
``read_committed`` fetch gets (KIP-98): whole v2 batches below the last stable offset, and the
aborted transactions overlapping them.  As a Kafka consumer (the Java client's
``Fetcher.CompletedFetch``), it drops control batches and the batches of a producer inside an
aborted transaction: an aborted transaction starts at its ``first_offset`` and ends at the
producer's ABORT marker.  Records keep Kafka's timestamp semantics: with ``LogAppendTime``
every record carries the batch's max timestamp.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from weir.records.batch import HEADER_SIZE, LOG_APPEND_TIME, BatchHeader, iter_headers
from weir.records.control import ABORT, read_marker
from weir.records.records import MAX_DECOMPRESSED_BYTES, _decompress, decode_varint

__all__ = ["Columns", "decode_committed"]


@dataclass
class Columns:
    """The table's columns (TABLE_SCHEMA order, topic and partition aside), one row a
    record; ``next_offset``: the offset after the last batch looked at."""

    key: list[bytes | None] = field(default_factory=list)
    value: list[bytes | None] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    timestamp_us: list[int] = field(default_factory=list)
    timestamp_type: list[int] = field(default_factory=list)
    headers: list[list[dict] | None] = field(default_factory=list)
    next_offset: int = -1

    def __len__(self) -> int:
        return len(self.offset)


def _nullable(body: bytes, pos: int) -> tuple[bytes | None, int]:
    size, pos = decode_varint(body, pos)
    if size < 0:
        return None, pos
    return body[pos:pos + size], pos + size


def _records(out: Columns, header: BatchHeader, body: bytes, start: int, upper: int) -> None:
    pos = 0
    append_time = header.timestamp_type == LOG_APPEND_TIME
    for _ in range(header.records_count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = decode_varint(body, pos)
        off_delta, pos = decode_varint(body, pos)
        key, pos = _nullable(body, pos)
        value, pos = _nullable(body, pos)
        count, pos = decode_varint(body, pos)
        headers = []
        for _h in range(count):
            hkey, pos = _nullable(body, pos)
            hvalue, pos = _nullable(body, pos)
            headers.append({"key": (hkey or b"").decode("utf-8", "replace"), "value": hvalue})
        pos = end
        offset = header.base_offset + off_delta
        if offset < start or offset >= upper:
            continue  # a batch straddling the range's ends: only the records inside it
        ts = header.max_timestamp if append_time else header.base_timestamp + ts_delta
        out.key.append(key)
        out.value.append(value)
        out.offset.append(offset)
        out.timestamp_us.append(ts * 1000)
        out.timestamp_type.append(header.timestamp_type)
        out.headers.append(headers or None)


def decode_committed(chunks: Iterable[tuple[bytes, list[tuple[int, int]]]], start: int,
                     upper: int, max_bytes: int = MAX_DECOMPRESSED_BYTES) -> Columns:
    """The committed records with ``start <= offset < upper`` in ``chunks``: each the bytes
    of whole batches read in offset order and the aborted transactions overlapping them as
    (producer id, first offset).  Raises ``KafkaError`` (CORRUPT_MESSAGE) for bytes that are
    not valid batches."""
    out = Columns(next_offset=start)
    aborted: list[tuple[int, int]] = []  # (first offset, producer id), a heap
    seen: set[tuple[int, int]] = set()
    ongoing: set[int] = set()  # producers inside an aborted transaction
    for buf, txns in chunks:
        for pid, first in txns:
            if (pid, first) not in seen:
                seen.add((pid, first))
                heapq.heappush(aborted, (first, pid))
        for header in _whole_batches(buf):
            while aborted and aborted[0][0] <= header.last_offset:
                ongoing.add(heapq.heappop(aborted)[1])
            if header.last_offset >= out.next_offset:
                out.next_offset = min(header.next_offset, upper)
            if header.is_control:
                if header.producer_id in ongoing and _marker(buf, header) == ABORT:
                    ongoing.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in ongoing:
                continue
            if header.last_offset < start:
                continue
            raw = bytes(buf[header.position + HEADER_SIZE:header.position + header.size])
            _records(out, header, _decompress(header.compression, raw, max_bytes), start, upper)
    return out


def _whole_batches(buf: bytes) -> Iterator[BatchHeader]:
    for header in iter_headers(buf):
        if header.position + header.size > len(buf):
            return
        yield header


def _marker(buf: bytes, header: BatchHeader) -> int | None:
    marker = read_marker(buf, header)
    return None if marker is None else marker.control_type

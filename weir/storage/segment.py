"""One log segment: ``<base offset>.log`` plus its ``.index`` and ``.timeindex``.

The segment appends whole batches (already validated and offset-assigned by the log),
keeps the sparse indexes up to date every ``index.interval.bytes``, locates batches by
offset or timestamp (index hint, then a header scan), truncates, and recovers itself by
validating every batch header and CRC and cutting a torn or corrupt tail.

Files are accessed with ``pread`` / ``pwrite`` at explicit positions, and synced, through
the seam of :mod:`weir.storage.file_io` (where a simulated disk can fail); the segment's
size in memory is the truth for where the next append goes.

The headers of the last :data:`RECENT_BATCHES` batches appended are also kept in memory:
a follower fetching at the previous log end, and a consumer reading at the tail, find their
batch (and the high watermark's) there with no read of the file. Kafka's reads walk batch
headers from the offset index's entry (``FileRecords.searchForOffsetWithSize``) but its
``DelayedFetch`` checks a parked fetch by the positions it saved (``positionDiff``); before
this, each follower's fetch of an append read the batch header twice, once for the
purgatory's check and once for the answer.
"""

from __future__ import annotations

import collections
import io
import logging
import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from weir.protocol.errors import KafkaError
from weir.records.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, batch_crc, parse_header
from weir.storage import file_io
from weir.storage.index import IndexCorruptError, OffsetIndex, TimeIndex
from weir.storage.txn_index import TransactionIndex

__all__ = ["LogSegment", "SegmentSpan", "segment_file_name"]

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1

RECENT_BATCHES = 8
"""Headers of the latest batches appended to a segment that it keeps in memory while it is
the active segment (about 2.5 KB: 25 MB for 10,000 partitions all written to; a follower or
a consumer at the tail is a few appends behind the log end, one batch per partition each)."""


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's 20-digit zero-padded file name, e.g. ``00000000000000000042.log``."""
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class SegmentSpan:
    """A run of whole batches inside one segment file."""

    position: int
    size: int
    first_offset: int
    last_offset: int


class LogSegment:
    """A single ``.log`` file with its offset and time indexes."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        created_ms: int,
        suffix: str = "",
        load_txn_index: bool = True,
    ) -> None:
        # ``suffix``: ".cleaned" / ".swap" for the log cleaner's replacement segments (Kafka's
        # UnifiedLog.replaceSegments); see weir.storage.swap.
        self.base_offset = base_offset
        self.suffix = suffix
        self.log_path = directory / (segment_file_name(base_offset, ".log") + suffix)
        self.index = OffsetIndex(
            directory / (segment_file_name(base_offset, ".index") + suffix), base_offset,
            max_index_bytes,
        )
        self.time_index = TimeIndex(
            directory / (segment_file_name(base_offset, ".timeindex") + suffix), base_offset,
            max_index_bytes,
        )
        # The aborted transactions whose ABORT marker is in this segment (KIP-98).
        self.txn_index = TransactionIndex(
            directory / (segment_file_name(base_offset, ".txnindex") + suffix), base_offset,
            load=load_txn_index)
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.file = io.FileIO(fd, "r+", closefd=True)
        self._size = os.fstat(fd).st_size
        # Written (appended or truncated) since the last fsync; close skips the fsync of a
        # clean segment (a broker with 10,000 idle replicas would fsync 10,000 files at
        # every clean shutdown; what a crash left unsynced lies past the log's recovery
        # point, which Log.flush and Log.close sync).
        self._unsynced = False
        self._next_offset = base_offset
        self._max_timestamp = -1
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_index = 0
        # The latest batches appended (absolute positions, contiguous, ending at _size);
        # emptied when the segment is truncated, recovered or rolled.
        self._recent: collections.deque[BatchHeader] = collections.deque(
            maxlen=RECENT_BATCHES)

    # -- construction ------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        suffix: str = "",
    ) -> LogSegment:
        """A new, empty segment (any stale files with the same name are emptied)."""
        seg = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
            created_ms=now_ms,
            suffix=suffix,
        )
        if seg._size > 0:  # stale bytes: emptied
            seg._unsynced = True
            seg.file.truncate(0)
            seg._size = 0
            _consume_auto_da_alloc(seg.log_path)
        seg.index.reset()
        seg.time_index.reset()
        seg.txn_index.reset()
        return seg

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        now_ms: int,
        recover: bool,
        suffix: str = "",
        present: Collection[str] | None = None,
    ) -> tuple[LogSegment, int]:
        """Load an existing segment; returns it and the bytes cut off by recovery.

        Without ``recover`` the indexes are trusted if they validate; a missing or corrupt
        index (or a log that does not end on a batch boundary) triggers recovery anyway.
        ``present``: the names in ``directory`` if the caller listed it (a segment without
        aborted transactions has no ``.txnindex`` file: not looked for).
        """
        txn_name = segment_file_name(base_offset, ".txnindex") + suffix
        seg = cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
            created_ms=now_ms,
            suffix=suffix,
            load_txn_index=present is None or txn_name in present,
        )
        truncated = seg.recover() if recover else seg._load_or_recover()
        try:
            first = seg.header_at(0)
        except KafkaError:
            first = None  # a trusted segment's damage: the log's header walk finds it
        if first is not None and first.max_timestamp >= 0:
            seg.created_ms = first.max_timestamp
        return seg, truncated

    def _load_or_recover(self) -> int:
        """Trust the indexes if they pass Kafka's sanity check (and the batches after the
        last offset-index entry are well formed); otherwise recover the segment, which
        rebuilds both indexes (Kafka's LogLoader does the same on a failed sanityCheck).

        An empty ``.log`` has empty indexes whatever their files hold: they are not read
        (an idle replica's segment costs no index I/O at startup; the first flush rewrites
        a file that held stale entries, see ``_SparseIndex.flush``)."""
        if self._size == 0:
            return 0
        try:
            self.index.load()
            self.time_index.load()
            self.index.check_positions(self._size)
            self._load_tail_state()
        except IndexCorruptError as exc:
            log.warning(
                "corrupt index for log segment %s: %s; recovering the segment and rebuilding "
                "its indexes",
                self.log_path,
                exc,
            )
            return self.recover()
        return 0

    # -- properties --------------------------------------------------------------------
    @property
    def size(self) -> int:
        return self._size

    @property
    def next_offset(self) -> int:
        """One past the last offset in this segment (its base offset when empty)."""
        return self._next_offset

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._offset_of_max_timestamp

    @property
    def max_timestamp(self) -> int:
        """Largest batch maxTimestamp in the segment, -1 if none."""
        return self._max_timestamp

    @property
    def is_empty(self) -> bool:
        return self._size == 0

    # -- low-level reads ---------------------------------------------------------------
    def read_bytes(self, position: int, size: int) -> bytes:
        return file_io.current().pread(self.log_path, self.file.fileno(), size, position)

    def header_at(self, position: int) -> BatchHeader | None:
        if self._size - position < HEADER_SIZE:
            return None
        raw = self.read_bytes(position, HEADER_SIZE)
        header = parse_header(raw)
        header.position = position
        return header

    def headers_from(self, position: int = 0) -> Iterator[BatchHeader]:
        """Headers of the complete batches from ``position`` (a batch boundary) onwards."""
        while True:
            header = self.header_at(position)
            if header is None or position + header.size > self._size:
                return
            yield header
            position += header.size

    # -- append ------------------------------------------------------------------------
    def append(self, buf: bytes | bytearray, headers: list[BatchHeader]) -> None:
        """Append batches (positions in ``headers`` are relative to ``buf``)."""
        if not headers:
            return
        if headers[0].base_offset < self._next_offset:
            raise ValueError(
                f"append at offset {headers[0].base_offset} below segment end {self._next_offset}"
            )
        start = self._size
        for header in headers:
            self._track(header, start + header.position)
        file_io.current().pwrite(self.log_path, self.file.fileno(), buf, start)
        self._unsynced = True
        self._size = start + len(buf)
        recent = self._recent
        for h in headers[-RECENT_BATCHES:]:
            # copies: the caller's headers keep their positions within ``buf``
            recent.append(replace(h, position=start + h.position))

    def _track(self, header: BatchHeader, position: int) -> None:
        """Index bookkeeping for one batch about to sit at ``position``."""
        if self._bytes_since_index > self.index_interval_bytes:
            self.index.append(header.base_offset, position)
            if self._max_timestamp >= 0:
                self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += header.batch_length + LOG_OVERHEAD
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = header.base_offset
        self._next_offset = header.base_offset + header.last_offset_delta + 1

    # -- lookups -----------------------------------------------------------------------
    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset is ≥ ``offset`` (None if past the end)."""
        recent = self._recent
        if recent and recent[0].base_offset <= offset:
            for header in recent:  # the latest batches: no read of the file
                if header.base_offset + header.last_offset_delta >= offset:
                    return header
            return None
        hint = self.index.lookup(offset)
        position = hint[1] if hint else 0
        for header in self.headers_from(position):
            if header.last_offset >= offset:
                return header
        return None

    def span_from(
        self, first: BatchHeader, *, max_offset: int | None, max_bytes: int, min_one_batch: bool
    ) -> SegmentSpan | None:
        """Whole batches from ``first`` while below ``max_offset`` and within ``max_bytes``.

        Both bounds are found through the sparse offset index and a short header walk from
        the nearest entry (at most ``index.interval.bytes`` of headers), not by reading every
        header of the span: a 4 MiB fetch of 16 KiB batches costs a few small reads."""
        if max_offset is not None and first.last_offset >= max_offset:
            return None
        end = self._size
        if max_offset is not None:
            bound = self.find_batch(max_offset)
            if bound is not None:
                end = bound.position
        limit = first.position + max_bytes
        if limit < end:
            end = self._last_boundary_at_or_before(limit, first.position)
        if end <= first.position:
            if not min_one_batch:
                return None
            end = first.position + first.size
        last = self._last_offset_before(end)
        return SegmentSpan(first.position, end - first.position, first.base_offset, last)

    def _last_boundary_at_or_before(self, limit: int, start: int) -> int:
        """The largest batch boundary ≤ ``limit``, walking from the nearest index entry."""
        recent = self._recent
        if recent and recent[0].position <= start:
            boundary = start
            for header in recent:  # the latest batches: no read of the file
                if header.position < start:
                    continue
                if header.position + header.size > limit:
                    break
                boundary = header.position + header.size
            return boundary
        hint = self.index.lookup_position(limit)
        position = max(hint[1], start) if hint else start
        boundary = position
        for header in self.headers_from(position):
            if header.position + header.size > limit:
                break
            boundary = header.position + header.size
        return boundary

    def _last_offset_before(self, end: int) -> int:
        """The last offset of the batch that ends at ``end`` (a batch boundary)."""
        if end >= self._size:
            return self.next_offset - 1
        recent = self._recent
        if recent and recent[0].position <= end:
            for header in recent:
                if header.position == end:
                    return header.base_offset - 1
        header = self.header_at(end)
        return header.base_offset - 1 if header is not None else self.next_offset - 1

    def find_by_timestamp(self, timestamp: int) -> BatchHeader | None:
        """The first batch with maxTimestamp ≥ ``timestamp``."""
        position = 0
        entry = self.time_index.lookup(timestamp - 1)
        if entry is not None:
            hint = self.index.lookup(entry[1])
            position = hint[1] if hint else 0
        for header in self.headers_from(position):
            if header.max_timestamp >= timestamp:
                return header
        return None

    # -- truncation and recovery -------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Drop the batch containing ``offset`` and everything after it; bytes removed."""
        header = self.find_batch(offset)
        if header is None:
            return 0
        removed = self._size - header.position
        self._recent.clear()
        self.index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self.file.truncate(header.position)
        if header.position == 0:
            _consume_auto_da_alloc(self.log_path)
        self._unsynced = True
        self._size = header.position
        self._load_tail_state()
        return removed

    def _load_tail_state(self) -> None:
        """Derive next offset, max timestamp and index spacing from the last index entry."""
        last = self.index.last_entry()
        start = last[1] if last else 0
        next_offset, end = self.base_offset, start
        if last is not None:
            next_offset = last[0]
        max_ts_entry = self.time_index.last_entry()
        max_ts, max_off = max_ts_entry if max_ts_entry else (-1, self.base_offset)
        try:
            for header in self.headers_from(start):
                if header.magic != 2 or header.base_offset < next_offset:
                    raise IndexCorruptError(f"{self.log_path}: bad batch at {header.position}")
                if last is not None and header.position == start and header.base_offset != last[0]:
                    raise IndexCorruptError(
                        f"{self.index.path}: last entry ({last[0]}, {start}) but the batch "
                        f"there starts at offset {header.base_offset}"
                    )
                next_offset, end = header.next_offset, header.position + header.size
                if header.max_timestamp > max_ts:
                    max_ts, max_off = header.max_timestamp, header.base_offset
        except KafkaError as exc:  # an unparseable header where the index points
            raise IndexCorruptError(f"{self.index.path}: last entry {last}: {exc}") from exc
        if end != self._size:
            raise IndexCorruptError(f"{self.log_path}: log does not end on a batch boundary")
        if max_ts_entry and max_ts_entry[1] >= max(next_offset, self.base_offset + 1):
            raise IndexCorruptError(f"{self.time_index.path} points past the log end")
        if max_ts_entry and max_off < max_ts_entry[1]:
            raise IndexCorruptError(
                f"{self.time_index.path}: last entry {max_ts_entry} but offset {max_off} "
                f"has the newer timestamp {max_ts}"
            )
        self._next_offset = next_offset
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, max_off
        self._bytes_since_index = self._size - start

    def recover(self) -> int:
        """Validate every batch (magic, length, offsets, CRC32C), cut the invalid tail,
        rebuild both indexes.  Returns the number of bytes truncated.

        An empty segment's index files are left as they are (never read for an empty
        ``.log``): recovering thousands of idle replicas after a crash writes no file."""
        self.index.reset(file=self._size > 0)
        self.time_index.reset(file=self._size > 0)
        self._recent.clear()
        self._next_offset = self.base_offset
        self._max_timestamp, self._offset_of_max_timestamp = -1, self.base_offset
        self._bytes_since_index = 0
        position = 0
        while True:
            header, invalid = self._valid_batch_at(position)
            if header is None:
                break
            self._track(header, position)
            position += header.size
        truncated = self._size - position
        if truncated:
            log.warning(
                "found invalid data in log segment %s at byte %d (%s): truncating %d bytes, "
                "the segment now ends at offset %d",
                self.log_path,
                position,
                invalid,
                truncated,
                self._next_offset,
            )
            self.file.truncate(position)
            if position == 0:
                _consume_auto_da_alloc(self.log_path)
            self._unsynced = True
            self._size = position
        return truncated

    def _valid_batch_at(self, position: int) -> tuple[BatchHeader | None, str]:
        """The valid batch at ``position``, or None and why not."""
        try:
            header = self.header_at(position)
        except KafkaError as exc:
            return None, exc.message
        if header is None:
            return None, "torn batch header"
        if header.magic != 2:
            return None, f"magic {header.magic}"
        if header.last_offset_delta < 0 or header.base_offset < self._next_offset:
            return None, f"offsets {header.base_offset}+{header.last_offset_delta} out of order"
        if position + header.size > self._size:
            return None, f"batch of {header.size} bytes runs past the end of the file"
        if header.last_offset - self.base_offset > INT32_MAX:
            return None, "offset too far above the segment's base offset"
        body = self.read_bytes(position, header.size)
        header.position = 0
        valid = batch_crc(body, header) == header.crc
        header.position = position
        return (header, "") if valid else (None, "CRC mismatch")

    # -- roll, flush, close ------------------------------------------------------------
    def should_roll(
        self,
        *,
        incoming_bytes: int,
        last_offset: int,
        now_ms: int | None,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Kafka's roll conditions for an append of ``incoming_bytes`` ending at ``last_offset``."""
        if self._size == 0:  # empty
            return False
        if self._size + incoming_bytes > segment_bytes:
            return True
        if now_ms is not None and now_ms - self.created_ms > segment_ms:
            return True
        if self.index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > INT32_MAX

    def on_become_inactive(self) -> None:
        """Record the final max timestamp in the time index when the segment stops growing;
        its latest headers are no longer kept (reads of it walk the file)."""
        self._recent.clear()
        if self._max_timestamp >= 0:
            self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)

    def flush(self) -> None:
        file_io.current().fsync(self.log_path, self.file.fileno())
        self._unsynced = False
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self, *, sync: bool = False) -> None:
        """Write the final index entries and close; fsync if anything was written since
        the last fsync, or if ``sync`` (the log's caller knows of unsynced data)."""
        if self.file.closed:
            return
        self.on_become_inactive()
        if sync or self._unsynced:
            self.flush()
        else:
            self.index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        self.index.close()
        self.time_index.close()
        self.file.close()

    def release(self) -> None:
        """Close the files without writing anything (a load about to be retried)."""
        if not self.file.closed:
            self.file.close()
        self.index.release()
        self.time_index.release()

    def change_suffix(self, suffix: str) -> None:
        """Rename the three files to the same names with ``suffix`` instead of the current
        one (``.cleaned`` → ``.swap`` → ""); open descriptors stay valid."""
        for attr in (self.index, self.time_index, self.txn_index, self):  # .log last (swap.py)
            path = attr.log_path if attr is self else attr.path
            stem = path.name[: len(path.name) - len(self.suffix)] if self.suffix else path.name
            new = path.with_name(stem + suffix)
            if path.exists() or attr is self:
                os.replace(path, new)
            if attr is self:
                self.log_path = new
            else:
                attr.path = new
        self.suffix = suffix

    def delete(self) -> None:
        """Close and remove the segment's files."""
        if not self.file.closed:
            self.file.close()
        self.index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self._next_offset}, size={self._size})"


def _consume_auto_da_alloc(path: Path) -> None:
    """Open and close ``path`` once, right after it was truncated to empty (a new segment
    over stale bytes, a truncation or recovery to its first byte) and before anything is
    written to it again.

    ext4 marks a file truncated to size 0 (even one that was empty already) so that the
    next close of any descriptor of it forces the allocation and writeback of its dirty
    pages (``auto_da_alloc``, for programs that rewrite a file in place without fsync).
    A segment is written for minutes through the descriptor it keeps open, and the first
    descriptor closed afterwards is a Fetch response's (the socket server opens the file
    by path for sendfile): that close wrote back every byte appended since the segment
    was created, tens to hundreds of milliseconds on the broker's event loop at the first
    consumer fetch after a roll.  Closed now, the mark is spent while nothing is dirty.
    Kafka's FileRecords keeps one FileChannel per segment and never meets this."""
    os.close(os.open(path, os.O_RDONLY | os.O_CLOEXEC))

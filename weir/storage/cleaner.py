"""One cleaning of one compacted log — Kafka's ``Cleaner`` (``LogCleaner.scala``).

Runs in a cleaner worker process, never on the event loop (nor in the broker's process:
decoding records holds the GIL, a thread would stall the event loop).  The event loop
prepares a :class:`CleanJob` (a snapshot of the log's non-active segments and offsets);
:meth:`CleanJob.portable` strips it to paths and plain values, and :func:`clean_files`, in
the worker, reads the old segments and writes new ``.cleaned`` segments no one else sees,
returning a :class:`FileResult` (base offsets, stats).  Back in the broker,
:func:`open_result` opens the ``.cleaned`` segments and the event loop swaps them in
(:meth:`weir.storage.log.Log.replace_segments`, :mod:`weir.storage.swap`), after checking
the log did not change under the job.  An abort (truncation, deletion, shutdown) reaches
the worker through the job's ``abort_path``: a file whose existence means "stop".

A cleaning (Kafka's ``doClean``):

1. **offset map** over the dirty section ``[first dirty, first uncleanable)``: key → latest
   offset, batch by batch until the map is full (:class:`OffsetMap`); ``end`` is the next
   offset after the last batch mapped — the next cleaning's first dirty offset;
2. the segments below ``end`` are **grouped** so that each group fits one segment
   (``segment.bytes``, ``segment.index.bytes``, offsets within 2**31 of the base), Kafka's
   ``groupSegmentsBySize``;
3. each group is **filtered** into one new segment (Kafka's ``cleanInto``/``filterTo``): a
   record is kept if its offset is past the map, or it is the latest for its key and not an
   expired tombstone (KIP-534 delete horizon, see :mod:`weir.records.filter`); keyless
   records go.  A batch emptied of records is dropped, except (as an empty header) the last
   batch of a producer still in the producer state (idempotence needs its sequence and
   epoch) and the batch just below the first uncleanable offset (the last offset of the
   round stays known), as Kafka.

Transactions (KIP-98): the data of aborted transactions is dropped (a batch of producer P
inside the range of one of P's entries in the ``.txnindex`` files: from the transaction's
first offset to its ABORT marker), as Kafka; the producer's last batch keeps its header.
Committed transactional batches and control batches (markers) are copied untouched, their
keys are not put in the offset map, and the aborted-transaction index entries of a
group's segments are carried to the new segment.  Kafka also compacts committed
transactional records like others and removes markers after ``delete.retention.ms`` once
their transaction's data is gone; Weir keeps them (a safe subset: nothing a consumer must
see is lost, only less is reclaimed).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from weir.common import TopicPartition
from weir.records.batch import HEADER_SIZE, BatchHeader, parse_header
from weir.records.control import ABORT, COMMIT, read_marker
from weir.records.filter import (
    BatchRetention,
    RawRecord,
    build_batch_from,
    decode_raw_records,
    delete_horizon_ms,
    empty_batch,
    filter_batch,
    scan_keys,
)
from weir.storage.cleaned_txn import CleanedTransactionMetadata
from weir.storage.config import LogConfig
from weir.storage.offset_map import OffsetMap
from weir.storage.segment import LogSegment, segment_file_name
from weir.storage.swap import CLEANED_SUFFIX
from weir.storage.txn_index import AbortedTxn

__all__ = [
    "CleanJob",
    "CleanResult",
    "Cleaner",
    "CleanerStats",
    "CleaningAborted",
    "FileResult",
    "SegmentView",
    "Throttler",
    "clean_in_worker",
    "delete_cleaned",
    "group_segments",
    "open_result",
]

log = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
IO_BUFFER_BYTES = 512 * 1024  # Kafka's log.cleaner.io.buffer.size default
_WRITE_CHUNK = 1 << 20


class CleaningAborted(Exception):
    """The job was aborted (truncation, deletion, a log dir move, shutdown)."""


@dataclass(frozen=True, slots=True)
class SegmentView:
    """A non-active segment as it was when the job was made."""

    segment: LogSegment | None  # None in a worker process (CleanJob.portable)
    base_offset: int
    next_offset: int
    size: int
    index_entries: int
    path: Path
    # the segment's aborted transactions (its .txnindex), carried to the cleaned segment
    txn_entries: tuple[AbortedTxn, ...] = ()


@dataclass(slots=True)
class CleanJob:
    tp: TopicPartition
    directory: Path
    config: LogConfig
    segments: list[SegmentView]  # every non-active segment, oldest first
    first_dirty_offset: int
    first_uncleanable_offset: int
    producer_last_offsets: dict[int, int]  # active producers: id → last data offset
    now_ms: int
    generation: int  # the log's truncation count when the job was made
    aborted: bool = False
    # every aborted transaction of the log (its .txnindex entries, oldest first)
    aborted_txns: list[AbortedTxn] = field(default_factory=list)
    # active producers whose last entry is a marker: id → epoch
    marker_producers: dict[int, int] = field(default_factory=dict)
    # a file that, once it exists, aborts the job in a worker process (see abort())
    abort_path: str | None = None

    def abort(self) -> None:
        """Stop the cleaning: its result will not be swapped in."""
        self.aborted = True
        if self.abort_path is not None:
            try:
                with open(self.abort_path, "wb"):
                    pass
            except OSError:  # the cleaner's scratch dir is gone (shutdown)
                pass

    def is_aborted(self) -> bool:
        if self.aborted:
            return True
        if self.abort_path is not None and os.path.exists(self.abort_path):
            self.aborted = True
        return self.aborted

    def portable(self) -> CleanJob:
        """This job without live objects (segments), for a worker process."""
        views = [replace(v, segment=None) for v in self.segments]
        return replace(self, segments=views)



@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_records: int = 0
    map_bytes: int = 0
    start_s: float = field(default_factory=time.monotonic)
    end_s: float = 0.0
    buffer_utilization: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return (self.end_s or time.monotonic()) - self.start_s

    @property
    def recopy_percent(self) -> float:
        return 100.0 * self.bytes_written / self.bytes_read if self.bytes_read else 0.0


@dataclass(slots=True)
class FileResult:
    """What a worker process hands back: the ``.cleaned`` segments it wrote (closed), each
    as (base offset, index of the group's first and last old segment in the job)."""

    groups: list[tuple[int, int, int]]
    end_offset: int
    stats: CleanerStats


@dataclass(slots=True)
class CleanResult:
    groups: list[tuple[LogSegment, list[LogSegment]]]  # (new .cleaned segment, old ones)
    end_offset: int
    stats: CleanerStats


class Throttler:
    """Bytes per second at most (``log.cleaner.io.max.bytes.per.second``), Kafka's
    ``Throttler``: after each chunk, sleep until the average rate is back under the limit."""

    def __init__(self, max_bytes_per_s: float, check_cancel: Callable[[], bool] | None = None):
        self.rate = max_bytes_per_s
        self._start = time.monotonic()
        self._bytes = 0
        self._cancelled = check_cancel or (lambda: False)

    def throttle(self, nbytes: int) -> None:
        if self.rate <= 0 or self.rate >= 2**62:
            return
        self._bytes += nbytes
        while True:
            elapsed = time.monotonic() - self._start
            wait = self._bytes / self.rate - elapsed
            if wait <= 0 or self._cancelled():
                break
            time.sleep(min(wait, 0.1))
        if elapsed > 1.0:  # a fresh window now and then: a past idle period is no credit
            self._start, self._bytes = time.monotonic(), 0


def group_segments(segments: list[SegmentView], max_size: int, max_index_bytes: int,
                   first_uncleanable: int) -> list[list[SegmentView]]:
    """Consecutive segments whose sizes, index sizes and offset span fit one segment
    (Kafka's ``groupSegmentsBySize``)."""
    groups: list[list[SegmentView]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        size, index = group[0].size, group[0].index_entries * 8
        while rest:
            nxt = rest[0]
            last_offset = (rest[1].base_offset - 1 if len(rest) > 1
                           else min(nxt.next_offset, first_uncleanable) - 1)
            if (size + nxt.size > max_size or index + nxt.index_entries * 8 > max_index_bytes
                    or last_offset - group[0].base_offset > INT32_MAX):
                break
            size += nxt.size
            index += nxt.index_entries * 8
            group.append(rest.pop(0))
        groups.append(group)
    return groups


def _batches(fd: int, size: int, chunk: int = IO_BUFFER_BYTES
             ) -> Iterator[tuple[bytes, BatchHeader]]:
    """(buffer, header) of every batch of a segment file of ``size`` bytes, reading
    ``chunk`` bytes at a time (more for a bigger batch)."""
    position = 0
    while position < size:
        buf = os.pread(fd, min(chunk, size - position), position)
        if len(buf) < HEADER_SIZE:
            return
        pos = 0
        while len(buf) - pos >= HEADER_SIZE:
            header = parse_header(buf, pos)
            if pos + header.size > len(buf):
                if pos == 0:  # one batch larger than the chunk
                    buf = os.pread(fd, header.size, position)
                    if len(buf) < header.size:
                        return
                    header.position = 0
                    yield buf, header
                    pos = header.size
                break
            yield buf, header
            pos += header.size
        if pos == 0:
            return
        position += pos


class Cleaner:
    """Cleans one log at a time with its own offset map (one per cleaner thread)."""

    def __init__(self, offset_map: OffsetMap, max_io_bytes_per_s: float) -> None:
        self.offset_map = offset_map
        self.max_io_bytes_per_s = max_io_bytes_per_s

    def clean(self, job: CleanJob) -> CleanResult:
        """:meth:`clean_files` and :func:`open_result` in the calling thread (tests,
        benchmarks, tools; the broker runs the first in a worker process)."""
        return open_result(job, self.clean_files(job))

    def clean_files(self, job: CleanJob) -> FileResult:
        """Build the map, clean every group into closed ``.cleaned`` segments; the caller
        opens and swaps them in.  Raises CleaningAborted if the job is aborted (new segments
        removed).  Needs no live object of the log: runs in a worker process."""
        stats = CleanerStats()
        throttler = Throttler(self.max_io_bytes_per_s, job.is_aborted)
        try:
            end = self._build_offset_map(job, stats, throttler)
            stats.buffer_utilization = self.offset_map.utilization
            if end <= job.first_dirty_offset:  # no whole batch below the bound: nothing to do
                stats.end_s = time.monotonic()
                return FileResult([], end, stats)
            to_clean = [v for v in job.segments if v.base_offset < end]
            groups = group_segments(to_clean, job.config.segment_bytes,
                                    job.config.segment_index_bytes,
                                    job.first_uncleanable_offset)
            done: list[LogSegment] = []
            out: list[tuple[int, int, int]] = []
            try:
                first = 0
                txns = CleanedTransactionMetadata(job.aborted_txns)  # carried across groups
                for group in groups:
                    cleaned = self._clean_group(job, group, txns, stats, throttler)
                    done.append(cleaned)
                    cleaned.close()
                    out.append((cleaned.base_offset, first, first + len(group)))
                    first += len(group)
            except BaseException:
                for cleaned in done:
                    cleaned.delete()
                raise
            stats.end_s = time.monotonic()
            return FileResult(out, end, stats)
        finally:
            self.offset_map.clear()

    def _check(self, job: CleanJob) -> None:
        if job.is_aborted():
            raise CleaningAborted(f"cleaning of {job.tp} aborted")

    # -- 1. the offset map -------------------------------------------------------------
    def _build_offset_map(self, job: CleanJob, stats: CleanerStats,
                          throttler: Throttler) -> int:
        omap = self.offset_map
        omap.clear()
        start, stop = job.first_dirty_offset, job.first_uncleanable_offset
        end = start
        txns = CleanedTransactionMetadata(t for t in job.aborted_txns if t.last_offset >= start)
        for view in job.segments:
            if view.next_offset <= start or view.base_offset >= stop:
                continue
            fd = os.open(view.path, os.O_RDONLY)
            try:
                for buf, header in _batches(fd, view.size):
                    if header.last_offset < start:
                        continue
                    if header.next_offset > stop:  # never past the HW / LSO / lag bound
                        break
                    if len(omap) and len(omap) + header.records_count > omap.max_entries:
                        return end  # full: the rest is the next cleaning's
                    self._check(job)
                    if header.is_control:
                        txns.on_marker(header, _control_type(buf, header))
                    elif not txns.on_batch(header):  # aborted data is not mapped
                        offsets, keys, _tombstones = scan_keys(buf, header)
                        stats.map_records += omap.put_all(offsets, keys)
                    omap.update_latest(header.last_offset)
                    end = header.next_offset
                    stats.map_bytes += header.size
                    throttler.throttle(header.size)
            finally:
                os.close(fd)
        return end

    # -- 3. filtering a group into one new segment -------------------------------------
    def _clean_group(self, job: CleanJob, group: list[SegmentView],
                     txns: CleanedTransactionMetadata, stats: CleanerStats,
                     throttler: Throttler) -> LogSegment:
        cfg = job.config
        cleaned = LogSegment.create(job.directory, group[0].base_offset,
                                    index_interval_bytes=cfg.index_interval_bytes,
                                    max_index_bytes=cfg.segment_index_bytes, now_ms=job.now_ms,
                                    suffix=CLEANED_SUFFIX)
        try:
            out = bytearray()
            out_headers: list[BatchHeader] = []
            last_view = group[-1]
            for view in group:
                fd = os.open(view.path, os.O_RDONLY)
                try:
                    for buf, header in _batches(fd, view.size):
                        self._check(job)
                        last = header.next_offset == job.first_uncleanable_offset
                        data = self._filter(job, buf, header, last, txns, stats)
                        stats.bytes_read += header.size
                        if data:
                            written = parse_header(data)
                            written.position = len(out)
                            out += data
                            out_headers.append(written)
                            stats.bytes_written += len(data)
                        if len(out) >= _WRITE_CHUNK:
                            cleaned.append(out, out_headers)
                            out, out_headers = bytearray(), []
                        throttler.throttle(header.size + len(data))
                finally:
                    os.close(fd)
            if out_headers:
                cleaned.append(out, out_headers)
            entries = txns.take_entries()  # the aborted transactions whose marker stays
            if entries:
                cleaned.txn_index.replace(entries)
            cleaned.on_become_inactive()
            cleaned.flush()
            # Kafka keeps the last modified time of the group's newest segment.
            mtime = os.stat(last_view.path).st_mtime if last_view.path.exists() else None
            if mtime is not None:
                os.utime(cleaned.log_path, (mtime, mtime))
            return cleaned
        except BaseException:
            cleaned.delete()
            raise

    def _filter_marker(self, job: CleanJob, buf: bytes, header: BatchHeader,
                       last_of_round: bool, txns: CleanedTransactionMetadata,
                       stats: CleanerStats) -> bytes:
        """A COMMIT/ABORT marker (Kafka's ``checkBatchRetention`` for control batches): kept
        while data of its transaction may remain; then given a delete horizon (KIP-534) and
        removed by the first cleaning past it."""
        original = bytes(buf[header.position:header.position + header.size])
        stats.records_read += header.records_count
        removable = txns.on_marker(header, _control_type(buf, header))
        # the producer's last entry (its epoch fences zombies), or the round's last offset
        retain_empty = last_of_round or (
            header.has_producer_id
            and job.marker_producers.get(header.producer_id) == header.producer_epoch)
        horizon = delete_horizon_ms(header)
        if not removable or (header.records_count and horizon is not None
                             and job.now_ms < horizon):
            stats.records_kept += header.records_count
            return original
        if header.records_count and horizon is None:  # the horizon starts now
            stats.records_kept += header.records_count
            return build_batch_from(header, list(decode_raw_records(buf, header)),
                                    job.now_ms + job.config.delete_retention_ms)
        if retain_empty:
            return original if header.records_count == 0 else empty_batch(header)
        return b""

    def _filter(self, job: CleanJob, buf: bytes, header: BatchHeader, last_of_round: bool,
                txns: CleanedTransactionMetadata, stats: CleanerStats) -> bytes:
        if header.is_control:
            return self._filter_marker(job, buf, header, last_of_round, txns, stats)
        producer_last = (header.has_producer_id and
                         job.producer_last_offsets.get(header.producer_id) == header.last_offset)
        if txns.on_batch(header):  # aborted data (KIP-98): dropped, its header kept if needed
            stats.records_read += header.records_count
            return empty_batch(header) if producer_last or last_of_round else b""
        omap = self.offset_map
        if header.base_offset > omap.latest_offset:  # past the map: nothing to decide
            stats.records_read += header.records_count
            stats.records_kept += header.records_count
            return bytes(buf[header.position:header.position + header.size])
        if producer_last or last_of_round:
            retention = BatchRetention.RETAIN_EMPTY
        else:
            retention = BatchRetention.DELETE_EMPTY
        horizon = delete_horizon_ms(header)
        now = job.now_ms
        # Decide from keys alone (no RawRecord per record): most batches of a dirty log are
        # wholly superseded (dropped) or wholly current (copied as they are).
        offsets, keys, tombstones = scan_keys(buf, header)
        latest = omap.latest_offset
        expired = horizon is not None and now >= horizon
        keeps = [o > latest or (k is not None and o >= m and not (t and expired))
                 for o, k, t, m in zip(offsets, keys, tombstones, omap.get_all(keys),
                                       strict=True)]
        kept = sum(keeps)
        if kept == 0 and retention is BatchRetention.DELETE_EMPTY:
            stats.records_read += len(keeps)
            return b""
        if kept == len(keeps) and (horizon is not None or not any(tombstones)):
            stats.records_read += kept
            stats.records_kept += kept
            return bytes(buf[header.position:header.position + header.size])

        def keep(record: RawRecord) -> bool:
            if record.offset > omap.latest_offset:
                return True
            if record.key is None:
                return False
            if record.offset < omap.get(record.key):
                return False
            return record.value is not None or horizon is None or now < horizon

        result = filter_batch(buf, header, retention, keep, now_ms=now,
                              delete_retention_ms=job.config.delete_retention_ms)
        stats.records_read += result.records_read
        stats.records_kept += result.records_kept
        return result.data


def open_result(job: CleanJob, result: FileResult) -> CleanResult:
    """The ``.cleaned`` segments a worker wrote, opened (their indexes trusted), each with
    the job's old segments it replaces.  Blocking file work: not on the event loop."""
    cfg = job.config
    groups: list[tuple[LogSegment, list[LogSegment]]] = []
    try:
        for base, first, stop in result.groups:
            seg, _cut = LogSegment.open(job.directory, base,
                                        index_interval_bytes=cfg.index_interval_bytes,
                                        max_index_bytes=cfg.segment_index_bytes,
                                        now_ms=job.now_ms, recover=False,
                                        suffix=CLEANED_SUFFIX)
            old = [v.segment for v in job.segments[first:stop] if v.segment is not None]
            groups.append((seg, old))
            if len(old) != stop - first:
                raise ValueError("open_result needs the job with its live segments")
    except BaseException:
        for seg, _old in groups:
            seg.delete()
        for base, _first, _stop in result.groups[len(groups):]:
            delete_cleaned(job.directory, base)
        raise
    return CleanResult(groups, result.end_offset, result.stats)


def delete_cleaned(directory: Path, base_offset: int) -> None:
    """Remove the ``.cleaned`` files of the segment at ``base_offset`` (a result dropped)."""
    for ext in (".log", ".index", ".timeindex", ".txnindex"):
        (directory / (segment_file_name(base_offset, ext) + CLEANED_SUFFIX)).unlink(
            missing_ok=True)


# -- the worker process side -------------------------------------------------------------
_WORKER_MAPS: dict[tuple[int, float], OffsetMap] = {}


def clean_in_worker(job: CleanJob, buffer_bytes: int, load_factor: float,
                    max_io_bytes_per_s: float) -> FileResult:
    """A cleaning in a worker process (a ProcessPoolExecutor's): ``job`` is
    :meth:`CleanJob.portable`; the offset map is kept between jobs (one per process)."""
    omap = _WORKER_MAPS.get((buffer_bytes, load_factor))
    if omap is None:
        _WORKER_MAPS.clear()
        omap = _WORKER_MAPS[(buffer_bytes, load_factor)] = OffsetMap(buffer_bytes, load_factor)
    return Cleaner(omap, max_io_bytes_per_s).clean_files(job)


def _control_type(buf: bytes, header: BatchHeader) -> int | None:
    """ABORT / COMMIT of a control batch, None if it has no record (cleaned already), -1
    for another control type."""
    if header.records_count < 1:
        return None
    marker = read_marker(buf, header)
    if marker is None:
        return -1
    return COMMIT if marker.committed else ABORT

"""Offset arithmetic of the ``weir`` data source: pure functions, no client, no Spark.

Offsets travel as Spark's Kafka JSON shape ``{"topic": {"0": 42}}`` (the next offset to
read per partition).  Ranges are half-open ``[from_offset, until_offset)``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

from weir.common import TopicPartition

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Records a query should have read are gone (retention, deletion, truncation)."""


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records ``[from_offset, until_offset)`` of one topic partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(self.until_offset - self.from_offset, 0)


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{TopicPartition: offset} → ``{"topic": {"0": offset}}`` (sorted, deterministic)."""
    result: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def from_json(doc: Mapping[str, Mapping[str, int]] | None) -> Offsets:
    """Inverse of :func:`to_json`."""
    return {TopicPartition(t, int(p)): int(o) for t, parts in (doc or {}).items()
            for p, o in parts.items()}


def report_data_loss(message: str, fail: bool) -> None:
    """Raise :class:`DataLossError` (``failOnDataLoss`` true) or log a warning."""
    hint = (" Some data may have been lost because it is no longer in Weir (for instance"
            " deleted by retention). If you want the query to go on, set failOnDataLoss=false.")
    if fail:
        raise DataLossError(message + hint)
    log.warning("%s Skipping the missing records (failOnDataLoss=false).", message)


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_rows: int) -> Offsets:
    """End offsets admitting at most ``max_rows`` records, spread in proportion to the lag.

    Partitions missing from ``start`` start at 0 for this purpose.  Every partition with a
    lag gets at least one record while the budget lasts, so a query always progresses.
    """
    lags = {tp: max(latest[tp] - start.get(tp, 0), 0) for tp in latest}
    total = sum(lags.values())
    if total <= max_rows:
        return dict(latest)
    quota = {tp: (lag * max_rows) // total for tp, lag in lags.items()}
    left = max_rows - sum(quota.values())
    for tp in sorted(lags, key=lambda t: (-lags[t], t)):
        if left <= 0:
            break
        if lags[tp] > quota[tp]:
            quota[tp] += 1
            left -= 1
    return {tp: (start.get(tp, 0) + quota[tp] if lags[tp] else latest[tp]) for tp in latest}


def byte_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               bytes_per_record: Mapping[TopicPartition, float], max_bytes: int) -> Offsets:
    """End offsets admitting about ``max_bytes`` of record batches, spread by byte lag.

    ``bytes_per_record`` is each partition's estimated batch bytes per offset (sampled at
    its start).  As with :func:`rate_limit`, every partition with a lag gets at least one
    record, so a query always progresses even when one record exceeds the budget.
    """
    lags = {tp: max(latest[tp] - start.get(tp, 0), 0) for tp in latest}
    size = {tp: max(float(bytes_per_record.get(tp, 1.0)), 1.0) for tp in latest}
    total = sum(lags[tp] * size[tp] for tp in latest)
    if total <= max_bytes:
        return dict(latest)
    end = {}
    for tp in latest:
        if not lags[tp]:
            end[tp] = latest[tp]
            continue
        share = max_bytes * (lags[tp] * size[tp]) / total
        end[tp] = start.get(tp, 0) + min(lags[tp], max(1, int(share // size[tp])))
    return end


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None,
                 max_records: int | None) -> list[OffsetRange]:
    """Cut ranges so there are at least ``min_partitions`` and none exceeds ``max_records``.

    Large ranges are cut first (in proportion to their size); empty ranges are dropped.
    """
    kept = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in kept)
    if not kept:
        return []
    chunk = total
    if min_partitions and min_partitions > len(kept):
        chunk = math.ceil(total / min_partitions)
    if max_records:
        chunk = min(chunk, max_records)
    result: list[OffsetRange] = []
    for r in kept:
        pieces = max(1, math.ceil(r.size / chunk))
        bounds = [r.from_offset + (r.size * i) // pieces for i in range(pieces + 1)]
        result += [OffsetRange(r.topic, r.partition, a, b)
                   for a, b in pairwise(bounds) if b > a]
    return result


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                earliest: Callable[[list[TopicPartition]], Offsets], fail_on_data_loss: bool,
                new_partitions_from_zero: bool = True) -> list[OffsetRange]:
    """Ranges to read between two offset maps, checking for lost data.

    ``earliest`` looks up the log start offsets of the partitions it is given (only called
    when needed).  A partition in ``end`` but not in ``start`` is new and is read from its
    log start, which should be 0 (otherwise records were lost).  A partition in ``start``
    missing from ``end`` was deleted.  Offsets below the log start were deleted.  Each case
    raises :class:`DataLossError` when ``fail_on_data_loss`` is true, else logs a warning.
    """
    for tp in sorted(set(start) - set(end)):
        report_data_loss(f"{tp} is gone: the topic or partition was deleted.",
                         fail_on_data_loss)
    floors = earliest(sorted(end)) if end else {}
    ranges = []
    for tp in sorted(end):
        floor = floors[tp]
        if tp in start:
            begin = start[tp]
        else:
            begin = 0 if new_partitions_from_zero else floor
        until = end[tp]
        if begin > until:
            report_data_loss(f"{tp}: the offset went back from {begin} to {until}; the"
                             " partition was recreated or truncated.", fail_on_data_loss)
            continue
        if begin < floor and begin < until:
            report_data_loss(f"{tp}: offsets {begin} to {min(floor, until)} are below the log"
                             f" start offset {floor}.", fail_on_data_loss)
            begin = min(floor, until)
        ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
    return ranges

"""Filters Spark pushes down to a batch read (``DataSourceReader.pushFilters``, PySpark ≥ 4.1).

A query such as ``df.where("partition = 3 AND offset >= 1000000")`` or ``df.where(col(
"timestamp") >= "2026-11-23 05:00")`` would otherwise fetch and decode every record of
every subscribed partition, only for Spark to drop most rows (Spark's own Kafka source
does that).  With pushdown the plan reads less:

* ``topic`` and ``partition``: comparisons, ``IN``, ``NOT``, ``IS [NOT] NULL`` and (topic)
  ``LIKE`` prefix/suffix/substring filters are evaluated on each partition's name and
  number on the driver; partitions that cannot match are not read.  Exact: Spark does not
  evaluate them again.
* ``offset``: ``=``, ``<``, ``<=``, ``>``, ``>=`` narrow each partition's offset range
  (exact); ``IN`` narrows it to ``[min, max]`` (Spark checks the rest).
* ``timestamp``: ``>``, ``>=`` and ``=`` move each partition's start to the first offset
  whose timestamp is at or after the bound (ListOffsets by timestamp, KIP-79, as for
  ``startingTimestamp``): every record before it is older.  Spark still evaluates the
  filter, because timestamps need not grow with offsets.  Upper bounds are not pushed for
  the same reason: a later record may be older.

Everything else (key, value, headers, timestampType, ``OR`` of different columns) is left
to Spark.  Spark only pushes filters when ``spark.sql.python.filterPushdown.enabled`` is
true; see :func:`weir.spark.register`.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from weir.common import TopicPartition

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_COMPARISONS = (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan,
                LessThanOrEqual)


@dataclass
class Pushed:
    """What the pushed filters say about the records a read must return."""

    per_partition: list[Filter] = field(default_factory=list)  # on topic / partition
    offset_from: int = 0  # offsets below are not wanted
    offset_until: int | None = None  # offsets at or above are not wanted
    timestamp_from_ms: int | None = None  # records older than this are not wanted

    @property
    def empty(self) -> bool:
        return (not self.per_partition and self.offset_from == 0
                and self.offset_until is None and self.timestamp_from_ms is None)

    def wants(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` can hold a wanted record (its topic and number pass the filters)."""
        return all(_holds(f, {"topic": tp.topic, "partition": tp.partition})
                   for f in self.per_partition)


def _column(f: Filter) -> str | None:
    attr = getattr(f, "attribute", None)
    return attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None


def _holds(f: Filter, row: Mapping[str, Any]) -> bool:
    """``f`` on a row of non-null ``topic`` and ``partition`` values."""
    if isinstance(f, Not):
        return not _holds(f.child, row)
    value = row[_column(f)]  # type: ignore[index]
    if isinstance(f, IsNotNull):
        return True
    if isinstance(f, IsNull):
        return False
    if isinstance(f, EqualTo | EqualNullSafe):
        return bool(value == f.value)
    if isinstance(f, GreaterThan):
        return bool(value > f.value)
    if isinstance(f, GreaterThanOrEqual):
        return bool(value >= f.value)
    if isinstance(f, LessThan):
        return bool(value < f.value)
    if isinstance(f, LessThanOrEqual):
        return bool(value <= f.value)
    if isinstance(f, In):
        return value in f.value
    if isinstance(f, StringStartsWith):
        return bool(value.startswith(f.value))
    if isinstance(f, StringEndsWith):
        return bool(value.endswith(f.value))
    if isinstance(f, StringContains):
        return f.value in value
    raise TypeError(f"not a partition filter: {f!r}")


def _per_partition(f: Filter) -> bool:
    """Whether ``f`` is a filter on topic or partition that :func:`_holds` evaluates."""
    if isinstance(f, Not):
        return _per_partition(f.child)
    column = _column(f)
    if column == "partition":
        if isinstance(f, IsNull | IsNotNull):
            return True
        if isinstance(f, _COMPARISONS):
            return _is_int(f.value)
        return isinstance(f, In) and all(_is_int(v) for v in f.value)
    if column == "topic":
        if isinstance(f, IsNull | IsNotNull):
            return True
        if isinstance(f, _COMPARISONS + (StringStartsWith, StringEndsWith, StringContains)):
            return isinstance(f.value, str)
        return isinstance(f, In) and all(isinstance(v, str) for v in f.value)
    return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def timestamp_ms(value: Any) -> int | None:
    """Milliseconds since the epoch of a filter's timestamp (naive: UTC), rounded down."""
    if not isinstance(value, datetime.datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    micros = (value - _EPOCH) // datetime.timedelta(microseconds=1)
    return micros // 1000


def push(filters: Iterable[Filter]) -> tuple[Pushed, list[Filter]]:
    """Split Spark's filters into what the read applies and what Spark must still check.

    Returns the constraints and the filters to give back to Spark (the unsupported ones
    and those applied only in part), as the same objects Spark passed in."""
    pushed = Pushed()
    left: list[Filter] = []
    for f in filters:
        column = _column(f)
        if _per_partition(f):
            pushed.per_partition.append(f)
        elif column == "offset" and _offset_bound(pushed, f):
            if isinstance(f, In):
                left.append(f)
        elif column == "timestamp" and isinstance(f, GreaterThan | GreaterThanOrEqual
                                                  | EqualTo | EqualNullSafe):
            ms = timestamp_ms(f.value)
            if ms is not None:
                current = pushed.timestamp_from_ms
                pushed.timestamp_from_ms = ms if current is None else max(current, ms)
            left.append(f)
        else:
            left.append(f)
    return pushed, left


def _offset_bound(pushed: Pushed, f: Filter) -> bool:
    """Narrow the offset bounds by ``f``; False if ``f`` is not a bound on offsets."""
    if isinstance(f, In):
        values = list(f.value)
        if not values or not all(_is_int(v) for v in values):
            return False
        low, high = min(values), max(values) + 1
    elif isinstance(f, _COMPARISONS) and _is_int(f.value):
        v = f.value
        low, high = {
            EqualTo: (v, v + 1), EqualNullSafe: (v, v + 1), GreaterThan: (v + 1, None),
            GreaterThanOrEqual: (v, None), LessThan: (None, v), LessThanOrEqual: (None, v + 1),
        }[type(f)]
    else:
        return False
    if low is not None:
        pushed.offset_from = max(pushed.offset_from, low)
    if high is not None:
        pushed.offset_until = high if pushed.offset_until is None else min(
            pushed.offset_until, high)
    return True


def narrow(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
           pushed: Pushed, by_timestamp: Mapping[TopicPartition, int | None] | None = None,
           ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Planned ``[start, end)`` per partition narrowed by the pushed filters.

    ``by_timestamp``: each partition's first offset at or after the pushed timestamp bound
    (None: no record that late).  A partition with nothing left gets an empty range
    ``[end, end)``; partitions the filters rule out are left out."""
    new_start: dict[TopicPartition, int] = {}
    new_end: dict[TopicPartition, int] = {}
    for tp in end:
        if not pushed.wants(tp):
            continue
        until = end[tp]
        if pushed.offset_until is not None:
            until = min(until, pushed.offset_until)
        begin = start.get(tp)
        if begin is not None:
            begin = max(begin, pushed.offset_from)
            if by_timestamp is not None:
                found = by_timestamp.get(tp)
                begin = until if found is None else max(begin, found)
            if begin >= until:  # nothing wanted: an empty range at the planned end
                begin = until = end[tp]
            new_start[tp] = begin
        new_end[tp] = until
    return new_start, new_end

"""``weir.spark.read``: a topic's history from its Iceberg table, the rest from the log.

A batch read of a topic that has a table (``docs/spark.md``, "Reading history from topic
tables") is stitched from two DataFrames:

* the offsets the table holds (below its ``weir.next-offsets``), read by Spark's own
  vectorized Parquet reader from the data files PyIceberg plans for the offset ranges
  (``spark.read.parquet(files)``, filtered to the ranges);
* the offsets above them, read over the Kafka protocol by ``format("weir")`` with
  per-partition ``startingOffsets``/``endingOffsets`` (``assign``).

Both parts have the Kafka source's columns, so the union has the rows a read over the
protocol alone would give.  The planning (which offsets come from where) is the pure
function :func:`split`; :func:`read` does the I/O and builds the DataFrame.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition
from weir.spark import driver, registration, tables
from weir.spark.metadata import PartitionMetadata
from weir.spark.options import EARLIEST, OptionError, ReadOptions, parse_read_options
from weir.spark.schema import kafka_schema

log = logging.getLogger(__name__)

Range = tuple[int, int]
# Options of the whole read that the log part must not see: it gets its own assignment
# and offsets.
_PLANNED_KEYS = ("subscribe", "subscribepattern", "assign", "startingoffsets",
                 "endingoffsets", "startingtimestamp", "endingtimestamp",
                 "startingoffsetsbytimestampstrategy", "history", driver.OPTION.lower(),
                 *tables.CATALOG_KEYS)


@dataclass
class Plan:
    """Which offsets of each partition come from the table and which from the log."""

    table: dict[TopicPartition, Range] = field(default_factory=dict)
    log: dict[TopicPartition, Range] = field(default_factory=dict)


def split(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
          next_offsets: Mapping[str, Mapping[int, int]],
          from_table_start: Mapping[TopicPartition, bool]) -> Plan:
    """Split each partition's ``[start, end)`` at the table's next offset ``c``.

    ``next_offsets`` maps a topic with a table to its ``weir.next-offsets``.  The table
    serves ``[start, min(end, c))``, the log ``[max(start, c), end)``.  Where the read
    starts at ``earliest`` (``from_table_start``), the table serves from its first row:
    records that retention has since deleted from the log are still history."""
    plan = Plan()
    for tp in sorted(start):
        lo, hi = start[tp], end[tp]
        held = next_offsets.get(tp.topic)
        if held is None:
            if lo < hi:
                plan.log[tp] = (lo, hi)
            continue
        c = held.get(tp.partition, 0)
        if from_table_start.get(tp, False) and c > 0:
            # From the table's first row; the log from c even below its start offset, so
            # the log part reports records lost between the two (failOnDataLoss).
            table_lo, log_lo = 0, c
        else:
            table_lo, log_lo = lo, max(lo, c)
        if table_lo < min(hi, c):
            plan.table[tp] = (table_lo, min(hi, c))
        if log_lo < hi:
            plan.log[tp] = (log_lo, hi)
    return plan


def read(spark: Any, options: Mapping[str, str] | None = None, /, **more: str) -> Any:
    """A batch DataFrame of the topics' records, as ``spark.read.format("weir")`` with the
    same options would give, with the history read from the topics' tables.

    Options are those of ``format("weir")`` plus ``history`` (``table``, the default when a
    subscribed topic has a table, or ``log``) and, to name the catalog instead of asking a
    broker, ``weir.iceberg.catalog.type``, ``weir.iceberg.catalog.uri``,
    ``weir.iceberg.warehouse`` and ``weir.iceberg.namespace``; and
    ``weir.driverReadMaxRecords``: a read spanning at most that many offsets (5000) is read
    on the driver into a local relation (:mod:`weir.spark.driver`), 0 never."""
    given = {str(k): str(v) for k, v in {**(options or {}), **more}.items() if v is not None}
    opts = parse_read_options(given, streaming=False)
    lowered = {k.lower(): v for k, v in given.items()}
    small = driver.max_records(lowered)
    if opts.min_partitions or opts.max_records_per_partition:
        small = 0  # Spark partitions asked for: read in Spark's tasks
    if opts.history == "log" and not small:
        return _log_read(spark, given, None)
    meta = PartitionMetadata(opts.client_conf, opts.subscription)
    tps = meta.partitions()
    start = meta.resolve(opts.starting, tps, "startingOffsets", opts.timestamp_strategy)
    assert opts.ending is not None
    end = meta.resolve(opts.ending, tps, "endingOffsets")
    backwards = sorted(tp for tp in tps if start[tp] > end[tp])
    if backwards:
        tp = backwards[0]
        raise OptionError(f"starting offset {start[tp]} of {tp} is after its ending offset"
                          f" {end[tp]}")
    snapshots = ({} if opts.history == "log"
                 else _snapshots(opts, lowered, sorted({tp.topic for tp in tps})))
    if not snapshots:
        if opts.history == "table":
            raise OptionError("history=table: no subscribed topic has a table (no"
                              " weir.iceberg.catalog.uri from the brokers or the options, or"
                              " no table in that catalog)")
        log_only = {tp: (start[tp], end[tp]) for tp in tps if start[tp] < end[tp]}
        if small and driver.span(log_only) <= small:
            return driver.read(spark, opts, meta, {}, {}, log_only)
        return _log_read(spark, given, None)
    earliest = {tp: opts.starting.kind == "earliest" or (
        opts.starting.kind == "specific" and opts.starting.offsets.get(tp) == EARLIEST)
        for tp in tps}
    plan = split(start, end, {t: s.next_offsets for t, s in snapshots.items()}, earliest)
    log.info("weir.spark.read: %d partitions from tables, %d from the log", len(plan.table),
             len(plan.log))
    if small and driver.span(plan.table, plan.log) <= small:
        # Small enough to read here: no Spark task, so no Python daemon or worker starts.
        return driver.read(spark, opts, meta, snapshots, plan.table, plan.log)
    parts = []
    if plan.table:
        parts.append(_table_read(spark, opts, snapshots, plan.table))
    if plan.log or not parts:
        parts.append(_log_read(spark, given, plan.log))
    result = parts[0]
    for other in parts[1:]:
        result = result.unionByName(other)
    return result


def _snapshots(opts: ReadOptions, lowered: Mapping[str, str],
               topics: list[str]) -> dict[str, tables.TableSnapshot]:
    named = {k: lowered[k] for k in tables.CATALOG_KEYS if k in lowered}
    try:
        settings = (tables.catalog_settings(named) if named
                    else tables.describe_catalog(opts.client_conf))
    except tables.TableError as exc:
        raise OptionError(str(exc)) from None
    if settings is None:
        return {}
    catalog = tables.load_catalog(settings)
    found = {}
    for topic in topics:
        snap = tables.table_snapshot(catalog, settings, topic)
        if snap is not None:
            found[topic] = snap
    return found


def _table_read(spark: Any, opts: ReadOptions, snapshots: Mapping[str, tables.TableSnapshot],
                ranges: Mapping[TopicPartition, Range]) -> Any:
    """The table part: Spark's Parquet reader over the planned files, filtered to ranges.

    A file of a partition read whole (``[0, next offset)``: every row the table holds for
    it) needs no filter; when every file is such, Spark scans without one, and a ``count``
    is answered from the Parquet footers as for any Parquet table."""
    from pyspark.sql import functions as F

    files: list[str] = []
    whole = True
    for topic, snap in sorted(snapshots.items()):
        mine = {tp.partition: r for tp, r in ranges.items() if tp.topic == topic}
        for path, partition in snap.files(mine):
            files.append(path)
            full = (0, snap.next_offsets.get(partition, 0)) if partition is not None else None
            whole = whole and partition in mine and mine[partition] == full
    schema = kafka_schema(opts.include_headers)
    if not files:
        return spark.createDataFrame([], schema)
    df = spark.read.parquet(*files)
    if not whole:
        condition = None
        for tp, (lo, hi) in sorted(ranges.items()):
            term = ((F.col("topic") == tp.topic) & (F.col("partition") == tp.partition)
                    & (F.col("offset") >= lo) & (F.col("offset") < hi))
            condition = term if condition is None else condition | term
        df = df.where(condition)
    columns = [F.col(f.name).cast(f.dataType) for f in schema.fields if f.name != "headers"]
    if opts.include_headers:
        # Spark's Kafka source gives null, not an empty array, for a record without headers.
        columns.append(F.when(F.size("headers") > 0, F.col("headers"))
                       .cast(schema["headers"].dataType).alias("headers"))
    return df.select(*columns)


def _log_read(spark: Any, given: Mapping[str, str],
              ranges: Mapping[TopicPartition, Range] | None) -> Any:
    """The log part: ``format("weir")``, with the read's own options when ``ranges`` is
    None, else assigned exactly ``ranges``."""
    if ranges is None:
        options = {k: v for k, v in given.items()
                   if k.lower() not in ("history", driver.OPTION.lower(), *tables.CATALOG_KEYS)}
    elif ranges:
        options = {k: v for k, v in given.items() if k.lower() not in _PLANNED_KEYS}
        assigned: dict[str, list[int]] = {}
        starting: dict[str, dict[str, int]] = {}
        ending: dict[str, dict[str, int]] = {}
        for tp, (lo, hi) in sorted(ranges.items()):
            assigned.setdefault(tp.topic, []).append(tp.partition)
            starting.setdefault(tp.topic, {})[str(tp.partition)] = lo
            ending.setdefault(tp.topic, {})[str(tp.partition)] = hi
        options.update(assign=json.dumps(assigned), startingOffsets=json.dumps(starting),
                       endingOffsets=json.dumps(ending))
    else:  # everything came from tables: an empty read with the right schema
        headers = {k.lower(): v for k, v in given.items()}.get("includeheaders", "false")
        return spark.createDataFrame([], kafka_schema(headers.strip().lower() == "true"))
    # Registered here, so that weir.spark.read needs no weir.spark.register: registering a
    # Python data source makes Spark look up the installed ones first (a Python daemon and
    # worker, once per JVM), a cost a read done on the driver does not pay.  The load is the
    # data source's own, past the wrapper register() puts on format("weir") reads.
    return registration.load_source(spark, options)

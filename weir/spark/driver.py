"""Small reads on the driver: ``weir.spark.read`` of at most a few thousand records.

A Python data source costs a Spark session three Python daemons and their workers the
first time it is used (``create_data_source`` at ``load()``, ``plan_data_source_read`` at
the action, ``pyspark.worker`` for each task): each a fresh interpreter importing PySpark,
seconds of CPU that a session's first ``spark.range(10).count()`` never pays.  When the
whole read is small, ``weir.spark.read`` skips them: the driver, which plans the read
anyway (Metadata, ListOffsets, the table's snapshot), reads the records itself, the table
part with PyIceberg and the log part with the same Fetch reader the tasks use
(:func:`weir.spark.consume.read_range`), and hands Spark one Arrow table:
``spark.createDataFrame(arrow_table)``, a local relation with no Python worker at all.

The rows, schema and types are those of the data-source read: the Arrow columns are cast to
the Kafka source's schema (:func:`weir.spark.schema.arrow_schema`), a record without headers
has null headers (the table stores ``[]``), and lost records are reported as a read over the
protocol reports them (``failOnDataLoss``, :func:`weir.spark.offsets.plan_ranges`).

The option ``weir.driverReadMaxRecords`` (default :data:`DEFAULT_MAX_RECORDS`; 0 turns it
off) bounds the offsets such a read may span, counted before reading (the offsets of a
compacted or transactional topic hold fewer records than that).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir.common import TopicPartition
from weir.spark import offsets as off
from weir.spark.options import OptionError, ReadOptions

OPTION = "weir.driverReadMaxRecords"
# Below the record kernel's plain-Python threshold (weir.spark.kernel): a driver read never
# waits for numba, and the decode takes tens of milliseconds.
DEFAULT_MAX_RECORDS = 5000

Range = tuple[int, int]


def max_records(lowered: Mapping[str, str]) -> int:
    """The read's ``weir.driverReadMaxRecords`` (options with lower-cased keys)."""
    raw = lowered.get(OPTION.lower())
    if raw is None:
        return DEFAULT_MAX_RECORDS
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise OptionError(f"option '{OPTION}' must be a whole number >= 0 (0: never read on"
                          f" the driver), got {raw!r}")
    return value


def span(*plans: Mapping[TopicPartition, Range]) -> int:
    """The offsets the ranges cover: an upper bound of their records."""
    return sum(hi - lo for ranges in plans for lo, hi in ranges.values())


def read(spark: Any, opts: ReadOptions, meta: Any, snapshots: Mapping[str, Any],
         table_ranges: Mapping[TopicPartition, Range],
         log_ranges: Mapping[TopicPartition, Range]) -> Any:
    """A DataFrame (a local relation) of the table's rows in ``table_ranges`` (topic →
    :class:`weir.spark.tables.TableSnapshot` in ``snapshots``) and the log's records in
    ``log_ranges``, sorted by topic, partition and offset."""
    import pyarrow as pa

    from weir.spark.schema import arrow_schema, kafka_schema

    schema = arrow_schema(opts.include_headers)
    parts: list[Any] = []
    for topic, snap in sorted(snapshots.items()):
        mine = {tp.partition: r for tp, r in table_ranges.items() if tp.topic == topic}
        if mine:
            parts.append(_table_rows(snap, mine, schema))
    if log_ranges:
        parts.append(_log_rows(opts, meta, log_ranges, schema))
    data = pa.concat_tables(parts) if parts else schema.empty_table()
    if data.num_rows > 1:
        data = data.sort_by([("topic", "ascending"), ("partition", "ascending"),
                             ("offset", "ascending")])
    return spark.createDataFrame(data, kafka_schema(opts.include_headers))


def _log_rows(opts: ReadOptions, meta: Any, ranges: Mapping[TopicPartition, Range],
              schema: Any) -> Any:
    import pyarrow as pa

    from weir.spark.consume import read_range

    planned = off.plan_ranges({tp: lo for tp, (lo, _) in ranges.items()},
                              {tp: hi for tp, (_, hi) in ranges.items()},
                              meta.earliest, opts.fail_on_data_loss)
    batches = [batch for rng in planned
               for batch in read_range(opts.client_conf, rng,
                                       include_headers=opts.include_headers,
                                       fail_on_data_loss=opts.fail_on_data_loss,
                                       poll_timeout_ms=opts.poll_timeout_ms)]
    return pa.Table.from_batches(batches, schema=schema)


def _table_rows(snap: Any, ranges: Mapping[int, Range], schema: Any) -> Any:
    """The rows of ``{partition: [from, until)}`` from a pinned table, in ``schema``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = snap.rows(ranges, [f.name for f in schema])
    columns = []
    for f in schema:
        column = rows.column(f.name).combine_chunks()
        if f.name == "headers":
            # Spark's Kafka source gives null, not an empty array, for a record without
            # headers; the table stores [].
            empty = pc.fill_null(pc.equal(pc.list_value_length(column), 0), True)
            column = pa.ListArray.from_arrays(column.offsets, column.values, mask=empty)
        columns.append(column.cast(f.type))
    return pa.Table.from_arrays(columns, schema=schema)

"""The ``weir`` PySpark data source: batch and streaming readers and writers.

Driver side (options, partitions, offsets) is planned here with :mod:`weir.spark.metadata`;
executors read with :mod:`weir.spark.consume` and write with :mod:`weir.spark.produce`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from weir.common import TopicPartition
from weir.spark import offsets as off
from weir.spark import worker
from weir.spark.consume import read_range
from weir.spark.metadata import PartitionMetadata
from weir.spark.options import (
    OptionError,
    ReadOptions,
    WriteOptions,
    parse_read_options,
    parse_write_options,
)
from weir.spark.produce import write_batches, write_batches_exactly_once
from weir.spark.schema import check_user_schema, kafka_schema

log = logging.getLogger(__name__)
SHORT_NAME = "weir"  # weir.spark.registration.SHORT_NAME


class RangePartition(InputPartition):
    """One Spark partition: one offset range of one topic partition."""

    def __init__(self, rng: off.OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


class WeirDataSource(DataSource):
    """Spark's Kafka source and sink, over the Kafka protocol, as a Python data source."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def _include_headers(self) -> bool:
        raw = str(self.options.get("includeHeaders", "false")).strip().lower()
        if raw not in ("true", "false"):
            raise OptionError(f"option 'includeHeaders' must be true or false, got {raw!r}")
        return raw == "true"

    def schema(self) -> StructType:
        return kafka_schema(self._include_headers())

    def _read_options(self, schema: StructType, streaming: bool) -> ReadOptions:
        opts = parse_read_options(self.options, streaming)
        if schema is not None:
            check_user_schema(schema, opts.include_headers)
        return opts

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = self._read_options(schema, streaming=False)
        if opts.history == "table":
            # A Python data source hands Spark rows, never another relation: reading the
            # table's Parquet files with Spark's own reader is done before Spark plans the
            # source, by spark.read.format("weir") of a registered session (weir.spark.session)
            # or weir.spark.read; SQL (USING weir) reaches the source itself.
            raise OptionError("this read reached the weir Python data source, which reads the"
                              " log over the Kafka protocol; history=table needs"
                              " spark.read.format('weir') in a (classic, not Connect) session"
                              " given to weir.spark.register(spark), or"
                              " weir.spark.read(spark, options)")
        return WeirBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return WeirStreamReader(self._read_options(schema, streaming=True))

    def _write_options(self, schema: StructType, overwrite: bool,
                       streaming: bool = False) -> WriteOptions:
        columns = {f.name: f.dataType.simpleString() for f in schema.fields}
        return parse_write_options(self.options, columns, overwrite, streaming)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return WeirBatchWriter(self._write_options(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        return WeirStreamWriter(self._write_options(schema, overwrite=False, streaming=True))


def _read(opts: ReadOptions, partition: InputPartition) -> Iterator[Any]:
    if not isinstance(partition, RangePartition):  # Spark's placeholder when there are none
        return iter(())
    worker.prepare("read")
    return read_range(opts.client_conf, partition.range, include_headers=opts.include_headers,
                      fail_on_data_loss=opts.fail_on_data_loss,
                      poll_timeout_ms=opts.poll_timeout_ms)


def _split(opts: ReadOptions, ranges: list[off.OffsetRange]) -> list[RangePartition]:
    pieces = off.split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
    return [RangePartition(r) for r in pieces]


class WeirBatchReader(DataSourceReader):
    """Reads ``[startingOffsets, endingOffsets)`` of every subscribed partition once."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.meta = PartitionMetadata(opts.client_conf, opts.subscription)

    def partitions(self) -> list[RangePartition]:
        opts = self.opts
        tps = self.meta.partitions()
        start = self.meta.resolve(opts.starting, tps, "startingOffsets", opts.timestamp_strategy)
        assert opts.ending is not None
        end = self.meta.resolve(opts.ending, tps, "endingOffsets")
        backwards = sorted(tp for tp in tps if start[tp] > end[tp])
        if backwards:
            tp = backwards[0]
            raise OptionError(f"starting offset {start[tp]} of {tp} is after its ending offset"
                              f" {end[tp]}")
        ranges = off.plan_ranges(start, end, self.meta.earliest, opts.fail_on_data_loss)
        return _split(opts, ranges)

    def read(self, partition: RangePartition) -> Iterator[Any]:
        return _read(self.opts, partition)


class WeirStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over the subscribed partitions, with Spark's Kafka offsets.

    Offsets are ``{"topic": {"partition": next offset}}``.  Each micro-batch reads from the
    previous batch's end (restored from the checkpoint after a restart) to the high
    watermarks seen when it was planned, possibly capped by ``maxOffsetsPerTrigger``; Spark
    writes the end to its offset log before the batch runs, so a restarted query re-runs the
    same range and then goes on: every record exactly once.
    """

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self.meta = PartitionMetadata(opts.client_conf, opts.subscription)
        self._target: dict[TopicPartition, int] | None = None

    def initialOffset(self) -> dict:
        tps = self.meta.partitions()
        start = self.meta.resolve(self.opts.starting, tps, "startingOffsets",
                                  self.opts.timestamp_strategy)
        return off.to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.max_bytes_per_trigger:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.meta.latest(self.meta.partitions())
        log.info("Trigger.AvailableNow: reading up to %s", off.to_json(self._target))

    def _available(self) -> dict[TopicPartition, int]:
        if self._target is not None:
            return dict(self._target)
        return self.meta.latest(self.meta.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = off.from_json(start)
        available = self._available()
        end = available
        if isinstance(limit, ReadMaxRows):
            end = off.rate_limit(begin, available, int(limit.max_rows))
        max_bytes = (int(limit.max_bytes) if isinstance(limit, ReadMaxBytes)
                     else self.opts.max_bytes_per_trigger)
        if max_bytes and not isinstance(limit, ReadAllAvailable):
            from weir.spark.fetch import sample_bytes_per_record

            sizes = sample_bytes_per_record(self.opts.client_conf, begin, end)
            end = off.byte_limit(begin, end, sizes, max_bytes)
        return off.to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return off.to_json(self.meta.latest(self.meta.partitions()))

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        ranges = off.plan_ranges(off.from_json(start), off.from_json(end), self.meta.earliest,
                                 self.opts.fail_on_data_loss)
        return _split(self.opts, ranges)

    def read(self, partition: RangePartition) -> Iterator[Any]:
        return _read(self.opts, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, no consumer group is used."""

    def stop(self) -> None:
        self.meta = PartitionMetadata(self.opts.client_conf, self.opts.subscription)


@dataclass
class WriteResult(WriterCommitMessage):
    """What one write task did."""

    records: int
    batch_id: int = -1


class WeirBatchWriter(DataSourceArrowWriter):
    """``df.write.format("weir")``: appends every row as a record."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriteResult:
        worker.prepare("write")
        return WriteResult(write_batches(self.opts.client_conf, self.opts.topic, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("weir: wrote %d records", total)


class WeirStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("weir")``: appends every micro-batch's rows as records."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriteResult:
        worker.prepare("write")
        batch_id = current_batch_id()
        if self.opts.exactly_once:
            assert self.opts.topic is not None  # checked with the options
            count = write_batches_exactly_once(self.opts.client_conf, self.opts.topic,
                                               iterator, task_transactional_id(), batch_id)
        else:
            count = write_batches(self.opts.client_conf, self.opts.topic, iterator)
        return WriteResult(count, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("weir: micro-batch %d wrote %d records", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("weir: micro-batch %d failed; records already written stay written",
                    batchId)


def task_transactional_id() -> str:
    """``weir-spark-<query id>-<partition>``: the query id survives restarts from the
    checkpoint, and a micro-batch replayed after a failure is planned into the same
    partitions, so a retried or replayed task finds its own transactional id."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
    if ctx is None or not query:
        raise RuntimeError("exactlyOnce writes run only in a streaming query's tasks")
    return f"weir-spark-{query}-{ctx.partitionId()}"


def current_batch_id() -> int:
    """The micro-batch id of the running write task (Spark sets it as a local property)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    raw = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
    return int(raw) if raw is not None else -1

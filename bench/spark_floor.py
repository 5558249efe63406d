"""The floor of a Python data source in Spark: rows of the Kafka schema served from memory.

``format("weir_floor")`` yields, per input partition, Arrow record batches of the same
shape as Weir's reads of the benchmark topic (same topic name, keys ``"0".."999"``,
100-byte values, offsets, timestamps; 65 536 rows per batch, about what one 8 MiB Fetch
holds), built once per Python worker and kept in memory. No broker, no Fetch, no decoding:
what is left is what Spark itself does with a Python data source (planning, Python
workers, sending Arrow to the JVM, turning it into rows). No Python data source can be
faster than this on the same machine, so floor/Parquet is the bound of weir/Parquet.

Options: ``topic``, ``rows`` (comma-separated row counts, one per input partition).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

BATCH_ROWS = 65_536
_CACHE: dict[tuple[str, int, int], Any] = {}


class FloorPartition(InputPartition):
    def __init__(self, index: int, rows: int) -> None:
        super().__init__(index)
        self.index = index
        self.rows = rows


def _batch(topic: str, partition: int, start: int, n: int) -> Any:
    """One Arrow batch of ``n`` rows (cached: built once per worker)."""
    key = (topic, partition, n)
    if key not in _CACHE:
        import numpy as np
        import pyarrow as pa

        from weir.spark.schema import arrow_schema

        schema = arrow_schema(False)
        ids = np.arange(n)
        _CACHE[key] = pa.RecordBatch.from_arrays([
            pa.array([b"%d" % (i % 1000) for i in range(n)], pa.binary()),
            pa.array([b"x" * 90 + b"%010d" % i for i in range(n)], pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array(np.full(n, partition, np.int32)),
            pa.array(ids + start),
            pa.array(np.full(n, 1_700_000_000_000_000, np.int64), schema.field("timestamp").type),
            pa.array(np.zeros(n, np.int32)),
        ], schema=schema)
    return _CACHE[key]


class FloorReader(DataSourceReader):
    def __init__(self, topic: str, rows: list[int]) -> None:
        self.topic = topic
        self.rows = rows

    def partitions(self) -> list[FloorPartition]:
        return [FloorPartition(i, n) for i, n in enumerate(self.rows)]

    def read(self, partition: FloorPartition) -> Iterator[Any]:
        from weir.spark import worker

        worker.prepare("read")  # the same Python worker set-up as the weir source
        left = partition.rows
        while left > 0:
            n = min(BATCH_ROWS, left)
            yield _batch(self.topic, partition.index, 0, n)
            left -= n


class FloorDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "weir_floor"

    def schema(self) -> Any:
        from weir.spark.schema import kafka_schema

        return kafka_schema(False)

    def reader(self, schema: Any) -> FloorReader:
        rows = [int(x) for x in str(self.options["rows"]).split(",")]
        return FloorReader(str(self.options["topic"]), rows)


def register(spark: Any) -> None:
    """Register the floor source; its code travels to the workers by value."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(FloorDataSource)

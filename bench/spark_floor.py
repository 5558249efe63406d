"""The floor of a Python data source in Spark: rows of the Kafka schema served from memory.

``format("weir_floor")`` yields, per input partition, Arrow record batches of the same
shape as Weir's reads of the benchmark topic (same topic name, keys ``"0".."999"``,
100-byte values, offsets, timestamps; 65 536 rows per batch, about what one 8 MiB Fetch
holds), built once per Python worker and kept in memory. No broker, no Fetch, no decoding:
what is left is what Spark itself does with a Python data source (planning, Python
workers, sending Arrow to the JVM, turning it into rows). No Python data source can be
faster than this on the same machine, so floor/Parquet is the bound of weir/Parquet.

Options: ``topic``, ``rows`` (comma-separated row counts, one per input partition), and,
for ``bench/spark_cost.py``'s variants (defaults: the Kafka schema as Weir serves it):
``batchRows`` (rows per yielded Arrow batch), ``valueBytes`` (bytes per value),
``columns`` (``kafka``: the whole Kafka schema; ``value``: only ``value``, what a source
with column pruning would send for ``length(value)``; ``none``: one int column, what it
would send for ``count``), ``nullable`` (``false``: every column but key and value declared
non-nullable).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

BATCH_ROWS = 65_536
_CACHE: dict[tuple, Any] = {}


class FloorPartition(InputPartition):
    def __init__(self, index: int, rows: int) -> None:
        super().__init__(index)
        self.index = index
        self.rows = rows


def floor_schema(columns: str = "kafka", nullable: bool = True) -> Any:
    from pyspark.sql.types import IntegerType, StructField, StructType

    from weir.spark.schema import kafka_schema

    if columns == "none":
        return StructType([StructField("partition", IntegerType(), nullable)])
    schema = kafka_schema(False)
    fields = [StructField(f.name, f.dataType, nullable or f.name in ("key", "value"))
              for f in schema.fields if columns == "kafka" or f.name == "value"]
    return StructType(fields)


def _batch(topic: str, partition: int, n: int, value_bytes: int, columns: str,
           nullable: bool) -> Any:
    """One Arrow batch of ``n`` rows (cached: built once per worker)."""
    key = (topic, partition, n, value_bytes, columns, nullable)
    if key not in _CACHE:
        import numpy as np
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(floor_schema(columns, nullable), timezone="UTC")
        ids = np.arange(n)
        pad = b"x" * max(value_bytes - 10, 0)
        cols = {
            "key": pa.array([b"%d" % (i % 1000) for i in range(n)], pa.binary()),
            "value": pa.array([(pad + b"%010d" % i)[-value_bytes:] if value_bytes else b""
                               for i in range(n)], pa.binary()),
            "topic": pa.array([topic] * n, pa.string()),
            "partition": pa.array(np.full(n, partition, np.int32)),
            "offset": pa.array(ids),
            "timestamp": pa.array(np.full(n, 1_700_000_000_000_000, np.int64),
                                  pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array(np.zeros(n, np.int32)),
        }
        _CACHE[key] = pa.RecordBatch.from_arrays([cols[f.name] for f in schema],
                                                 schema=schema)
    return _CACHE[key]


class FloorReader(DataSourceReader):
    def __init__(self, topic: str, rows: list[int], batch_rows: int = BATCH_ROWS,
                 value_bytes: int = 100, columns: str = "kafka",
                 nullable: bool = True) -> None:
        self.topic = topic
        self.rows = rows
        self.batch_rows = batch_rows
        self.value_bytes = value_bytes
        self.columns = columns
        self.nullable = nullable

    def partitions(self) -> list[FloorPartition]:
        return [FloorPartition(i, n) for i, n in enumerate(self.rows)]

    def read(self, partition: FloorPartition) -> Iterator[Any]:
        from weir.spark import worker

        worker.prepare("read")  # the same Python worker set-up as the weir source
        left = partition.rows
        while left > 0:
            n = min(self.batch_rows, left)
            yield _batch(self.topic, partition.index, n, self.value_bytes, self.columns,
                         self.nullable)
            left -= n


class FloorDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "weir_floor"

    def _variant(self) -> tuple[str, bool]:
        return (str(self.options.get("columns", "kafka")),
                str(self.options.get("nullable", "true")).lower() == "true")

    def schema(self) -> Any:
        return floor_schema(*self._variant())

    def reader(self, schema: Any) -> FloorReader:
        rows = [int(x) for x in str(self.options["rows"]).split(",")]
        columns, nullable = self._variant()
        return FloorReader(str(self.options["topic"]), rows,
                           int(self.options.get("batchRows", BATCH_ROWS)),
                           int(self.options.get("valueBytes", 100)), columns, nullable)


def register(spark: Any) -> None:
    """Register the floor source; its code travels to the workers by value."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(FloorDataSource)

"""Topic tables as the topic-table contract says, written with PyIceberg (tests, benchmarks).

The brokers' own writer is not needed: a table holds the rows of a topic read over the
protocol below its ``weir.next-offsets``, which the snapshot summary records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa


def catalog_options(root: Path) -> dict[str, str]:
    """Read options naming an SQL catalog on SQLite under ``root`` (created)."""
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    return {"weir.iceberg.catalog.uri": f"sqlite:///{root}/catalog.db",
            "weir.iceberg.warehouse": str(root / "warehouse")}


def open_catalog(options: dict[str, str]) -> Any:
    from pyiceberg.catalog import load_catalog

    # Named "weir" as the writer names it: an SQL catalog keeps tables under its name.
    return load_catalog("weir", type="sql", uri=options["weir.iceberg.catalog.uri"],
                        warehouse="file://" + options["weir.iceberg.warehouse"])


def schema() -> Any:
    """The contract's table schema (Iceberg), the Kafka source's columns."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    return Schema(
        NestedField(1, "key", BinaryType(), required=False),
        NestedField(2, "value", BinaryType(), required=False),
        NestedField(3, "topic", StringType(), required=True),
        NestedField(4, "partition", IntegerType(), required=True),
        NestedField(5, "offset", LongType(), required=True),
        NestedField(6, "timestamp", TimestamptzType(), required=True),
        NestedField(7, "timestampType", IntegerType(), required=True),
        NestedField(8, "headers", ListType(
            9, StructType(NestedField(10, "key", StringType(), required=True),
                          NestedField(11, "value", BinaryType(), required=False)),
            element_required=True), required=False),
    )


def write_table(catalog: Any, topic: str, rows: list[dict] | pa.Table,
                next_offsets: dict[int, int]) -> None:
    """The contract's table of ``topic``: partitioned by partition and day(timestamp), zstd,
    the rows below ``next_offsets`` appended in one snapshot carrying the marker.  A list of
    dicts gets ``[]`` for a record without headers (where Kafka gives null); an Arrow table
    (all of it kept) is cast to the table's schema."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform, IdentityTransform

    spec = PartitionSpec(
        PartitionField(source_id=4, field_id=1000, transform=IdentityTransform(),
                       name="partition"),
        PartitionField(source_id=6, field_id=1001, transform=DayTransform(),
                       name="timestamp_day"))
    catalog.create_namespace_if_not_exists("weir")
    table = catalog.create_table(("weir", topic), schema=schema(), partition_spec=spec,
                                 properties={"format-version": "2",
                                             "write.parquet.compression-codec": "zstd"})
    if isinstance(rows, pa.Table):
        data = rows.cast(table.schema().as_arrow())
    else:
        kept = [dict(r, headers=r["headers"] or []) for r in rows
                if r["offset"] < next_offsets.get(r["partition"], 0)]
        data = pa.Table.from_pylist(kept, schema=table.schema().as_arrow())
    table.append(data, snapshot_properties={
        "weir.next-offsets": json.dumps({str(p): o for p, o in next_offsets.items()})})



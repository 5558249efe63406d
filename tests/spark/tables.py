"""Topic tables as the topic-table contract says, written with PyIceberg (tests, benchmarks).

The brokers' own writer is not needed: a table holds the rows of a topic read over the
protocol below its ``weir.next-offsets``, which the snapshot summary records.  The contract
(schema, partition spec, table properties, catalog, identifier, marker) is the writer's own,
:mod:`weir.tables.catalog`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from weir.tables import catalog as contract


def catalog_options(root: Path) -> dict[str, str]:
    """Read options naming an SQL catalog on SQLite under ``root`` (created)."""
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    return {contract.CATALOG_URI: f"sqlite:///{root}/catalog.db",
            contract.WAREHOUSE: str(root / "warehouse")}


def open_catalog(options: dict[str, str]) -> Any:
    """The catalog the options name, opened as the writer opens it."""
    return contract.load_catalog(contract.catalog_settings(options))


def write_table(catalog: Any, topic: str, rows: list[dict] | pa.Table,
                next_offsets: dict[int, int], namespace: str = contract.DEFAULT_NAMESPACE,
                ) -> None:
    """The contract's table of ``topic``: its schema, partition spec and properties, the rows
    below ``next_offsets`` appended in one snapshot carrying the marker.  A list of dicts gets
    ``[]`` for a record without headers (where Kafka gives null); an Arrow table (all of it
    kept) is cast to the table's schema."""
    settings = contract.CatalogSettings(namespace=namespace)
    catalog.create_namespace_if_not_exists(namespace)
    table = catalog.create_table(contract.table_identifier(settings, topic),
                                 schema=contract.TABLE_SCHEMA,
                                 partition_spec=contract.PARTITION_SPEC,
                                 properties=contract.TABLE_PROPERTIES)
    if isinstance(rows, pa.Table):
        data = rows.cast(table.schema().as_arrow())
    else:
        kept = [dict(r, headers=r["headers"] or []) for r in rows
                if r["offset"] < next_offsets.get(r["partition"], 0)]
        data = pa.Table.from_pylist(kept, schema=table.schema().as_arrow())
    table.append(data, snapshot_properties={
        contract.NEXT_OFFSETS: json.dumps({str(p): o for p, o in next_offsets.items()})})

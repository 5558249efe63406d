"""The topic-table contract: where a topic's Iceberg table lives and what it holds.

Shared by the writer (the brokers' translator processes, :mod:`weir.tables.writer`) and every
reader (``weir table``, the Spark source, tests).  See ``docs/tables.md``.

- Broker configs (Weir-only, hence ``weir.``): ``weir.iceberg.catalog.type`` (``sql``, the
  default, or ``rest``), ``weir.iceberg.catalog.uri`` (an SQLAlchemy URL for ``sql``, such as
  ``sqlite:////abs/iceberg/catalog.db``; the REST endpoint for ``rest``),
  ``weir.iceberg.warehouse`` (a path or a pyarrow/fsspec URL), ``weir.iceberg.namespace``
  (``weir``).  The table of topic ``T`` is ``(<namespace>, T)``.
- Schema (Iceberg format v2): the Kafka source's columns (Spark's Kafka source schema), with
  ``timestamp`` a ``timestamptz`` in microseconds; partitioned by identity(``partition``) and
  day(``timestamp``).
- Exactly-once marker: the summary of every snapshot the writer commits carries
  ``weir.next-offsets``, a JSON object mapping each partition (as a string) to the first
  offset NOT in the table; the table's rows of partition ``p`` are exactly the log's committed
  records (read_committed: below the LSO, aborted and control records excluded) with
  ``offset < next-offsets[p]``.  A partition missing from the map is at 0.

This module imports PyIceberg; the broker's event loop never imports it (only the
translator's worker processes and the tools do).  The settings part, without PyIceberg, is
:mod:`weir.tables.settings` (re-exported here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, IdentityTransform
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

from weir.tables.settings import (
    CATALOG_TYPE,
    CATALOG_TYPES,
    CATALOG_URI,
    DEFAULT_NAMESPACE,
    NAMESPACE,
    WAREHOUSE,
    CatalogSettings,
    catalog_settings,
    default_catalog_properties,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = [
    "CATALOG_TYPE",
    "CATALOG_TYPES",
    "CATALOG_URI",
    "DEFAULT_NAMESPACE",
    "NAMESPACE",
    "NEXT_OFFSETS",
    "PARTITION_SPEC",
    "TABLE_PROPERTIES",
    "TABLE_SCHEMA",
    "WAREHOUSE",
    "CatalogSettings",
    "catalog_settings",
    "committed_offsets",
    "default_catalog_properties",
    "load_catalog",
    "table_identifier",
]

NEXT_OFFSETS = "weir.next-offsets"
"""The snapshot summary property of the exactly-once marker (see the module docstring)."""

TABLE_SCHEMA = Schema(
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

PARTITION_SPEC = PartitionSpec(
    PartitionField(source_id=4, field_id=1000, transform=IdentityTransform(), name="partition"),
    PartitionField(source_id=6, field_id=1001, transform=DayTransform(), name="timestamp_day"),
)

TABLE_PROPERTIES = {
    "format-version": "2",
    # The writer retries a failed commit itself, after checking the table's offsets again:
    # PyIceberg's own retry would re-apply the append onto a newer snapshot with a stale
    # weir.next-offsets (a duplicate, the exactly-once argument's one hole).
    "commit.retry.num-retries": "0",
    "write.parquet.compression-codec": "zstd",
    # Snapshots older than a day are expired by the writer (Iceberg's own keys, which other
    # engines' expire procedures read too); the table's data files are all still live.
    "history.expire.max-snapshot-age-ms": str(24 * 3600 * 1000),
    "history.expire.min-snapshots-to-keep": "10",
}


REST_TIMEOUT_S = (10.0, 120.0)
"""Connect and read timeouts of every request to a REST catalog.  PyIceberg sets none, so a
catalog that accepts and never answers would hold a broker's translator worker (every table
it writes) for ever; with them the job fails, the table falls behind and is retried."""


def _rest_catalog(name: str, **properties: str) -> Catalog:
    """PyIceberg's REST catalog with :data:`REST_TIMEOUT_S` on each session it makes (the
    configuration request's and the catalog's).  Imported here: the SQL catalog's readers
    (the Spark source) do not pay for the REST client."""
    from pyiceberg.catalog.rest import RestCatalog
    from requests.adapters import HTTPAdapter

    class TimeoutAdapter(HTTPAdapter):
        def send(self, request, **kwargs):  # type: ignore[no-untyped-def]
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = REST_TIMEOUT_S
            return super().send(request, **kwargs)

    class TimedRestCatalog(RestCatalog):
        def _create_session(self):  # type: ignore[no-untyped-def]
            session = super()._create_session()
            for scheme in ("http://", "https://"):
                session.mount(scheme, TimeoutAdapter())
            return session

    return TimedRestCatalog(name, **properties)


def load_catalog(settings: CatalogSettings) -> Catalog:
    """The PyIceberg catalog of ``settings`` (an SQLite catalog's directory and tables are
    created when missing).  ValueError when the settings name no catalog."""
    from pyiceberg.catalog import load_catalog as pyiceberg_load_catalog

    if settings.uri is None:
        raise ValueError(f"{CATALOG_URI} is not set: no Iceberg catalog to use")
    props: dict[str, str] = {"type": settings.type, "uri": settings.uri}
    if settings.warehouse:
        warehouse = settings.warehouse
        if "://" not in warehouse:
            Path(warehouse).mkdir(parents=True, exist_ok=True)
            warehouse = "file://" + str(Path(warehouse).absolute())
        props["warehouse"] = warehouse
    if settings.type == "sql" and settings.uri.startswith("sqlite:///"):
        Path(settings.uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    if settings.type == "rest":
        return _rest_catalog("weir", **props)
    return pyiceberg_load_catalog("weir", **props)


def table_identifier(settings: CatalogSettings, topic: str) -> tuple[str, str]:
    """The identifier of ``topic``'s table: (namespace, topic name)."""
    return (settings.namespace, topic)


def committed_offsets(table: Table) -> dict[int, int]:
    """The next offset per partition recorded in the table's current snapshot (the first
    offset not in the table); {} for a table without snapshots.  ValueError if the marker is
    not a JSON object of partition → offset."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return {}
    raw = snapshot.summary.additional_properties.get(NEXT_OFFSETS)
    if raw is None:
        return {}
    try:
        decoded = json.loads(raw)
        return {int(p): int(o) for p, o in decoded.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"snapshot {snapshot.snapshot_id}: {NEXT_OFFSETS}={raw!r} is not a "
                         f"JSON object of partition to offset") from exc

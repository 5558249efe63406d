"""The reader's side of the topic-table contract: find a topic's Iceberg table and what it
holds, without Spark (PyIceberg and the Kafka protocol only).

A topic's table is ``(<weir.iceberg.namespace>, <topic>)`` in the catalog the brokers
describe with their configs ``weir.iceberg.catalog.type`` (``sql`` or ``rest``),
``weir.iceberg.catalog.uri`` and ``weir.iceberg.warehouse`` (DescribeConfigs of a BROKER
resource, KIP-133 style: the reader asks any broker).  The same keys given as read options
override what the brokers say.  Each snapshot's summary carries ``weir.next-offsets``, a
JSON object of partition → the first offset not in the table: the table's rows of partition
``p`` are exactly the log's committed records with ``offset < next-offsets[p]`` (read
committed: no aborted records, no control records).  See ``docs/spark.md``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

CATALOG_TYPE = "weir.iceberg.catalog.type"
CATALOG_URI = "weir.iceberg.catalog.uri"
WAREHOUSE = "weir.iceberg.warehouse"
NAMESPACE = "weir.iceberg.namespace"
CATALOG_KEYS = (CATALOG_TYPE, CATALOG_URI, WAREHOUSE, NAMESPACE)
NEXT_OFFSETS = "weir.next-offsets"
REQUEST_TIMEOUT_S = 30.0


class TableError(ValueError):
    """A topic table that cannot be read as the contract says (bad marker, delete files)."""


@dataclass(frozen=True)
class CatalogSettings:
    """Where topic tables live."""

    type: str = "sql"
    uri: str | None = None
    warehouse: str | None = None
    namespace: str = "weir"


def catalog_settings(configs: Mapping[str, str | None]) -> CatalogSettings | None:
    """The settings named by ``configs`` (broker configs or read options); None when they
    name no catalog (no ``weir.iceberg.catalog.uri``: Apache Kafka, or tables not set up)."""
    uri = (configs.get(CATALOG_URI) or "").strip()
    if not uri:
        return None
    kind = (configs.get(CATALOG_TYPE) or "sql").strip().lower()
    if kind not in ("sql", "rest"):
        raise TableError(f"{CATALOG_TYPE}={kind!r}: must be 'sql' or 'rest'")
    namespace = (configs.get(NAMESPACE) or "weir").strip()
    if not namespace or "." in namespace:
        raise TableError(f"{NAMESPACE}={namespace!r}: a non-empty name without dots")
    return CatalogSettings(kind, uri, (configs.get(WAREHOUSE) or "").strip() or None, namespace)


def describe_catalog(client_conf: Mapping[str, str]) -> CatalogSettings | None:
    """Ask a broker for its ``weir.iceberg.*`` configs (DescribeConfigs, BROKER resource)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient(dict(client_conf))
    brokers = sorted(admin.list_topics(timeout=REQUEST_TIMEOUT_S).brokers)
    if not brokers:
        return None
    resource = ConfigResource(ResourceType.BROKER, str(brokers[0]))
    entries = admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S)[
        resource].result(REQUEST_TIMEOUT_S)
    return catalog_settings({k: e.value for k, e in entries.items() if k in CATALOG_KEYS})


def load_catalog(settings: CatalogSettings) -> Any:
    """The PyIceberg catalog of ``settings`` (read only: nothing is created).  It is named
    ``weir``, as the writer names it: an SQL catalog keeps each table under its catalog's
    name."""
    from pyiceberg.catalog import load_catalog as pyiceberg_catalog

    props = {"type": settings.type, "uri": settings.uri or ""}
    if settings.warehouse:
        warehouse = settings.warehouse
        props["warehouse"] = warehouse if "://" in warehouse else "file://" + warehouse
    return pyiceberg_catalog("weir", **props)


def load_table(catalog: Any, settings: CatalogSettings, topic: str) -> Any | None:
    """The table of ``topic``, or None when there is none."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        return catalog.load_table((settings.namespace, topic))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None


def committed_offsets(snapshot: Any) -> dict[int, int]:
    """``weir.next-offsets`` of a snapshot: partition → first offset not in the table."""
    if snapshot is None or snapshot.summary is None:
        return {}
    raw = snapshot.summary.additional_properties.get(NEXT_OFFSETS)
    if raw is None:
        return {}
    try:
        return {int(p): int(o) for p, o in json.loads(raw).items()}
    except (ValueError, AttributeError, TypeError):
        raise TableError(f"snapshot {snapshot.snapshot_id}: {NEXT_OFFSETS}={raw!r} is not a"
                         " JSON object of partition to offset") from None


@dataclass(frozen=True)
class TableSnapshot:
    """One topic's table pinned at one snapshot: what it holds and its Parquet files."""

    topic: str
    table: Any
    snapshot_id: int | None
    next_offsets: Mapping[int, int]

    def files(self, ranges: Mapping[int, tuple[int, int]]) -> list[tuple[str, int | None]]:
        """The data files holding rows of ``{partition: [from, until)}``, each with its
        Kafka partition (None if the file's partition spec does not say), planned by
        PyIceberg from the manifests' partition values and column bounds.  TableError when a
        file has delete files: the rows would need merge-on-read, which the Parquet path
        lacks."""
        from pyiceberg.expressions import (
            AlwaysFalse,
            And,
            EqualTo,
            GreaterThanOrEqual,
            LessThan,
            Or,
        )

        if not ranges or self.snapshot_id is None:
            return []
        condition: Any = AlwaysFalse()
        for partition, (lo, hi) in sorted(ranges.items()):
            condition = Or(condition, And(EqualTo("partition", partition),
                                          And(GreaterThanOrEqual("offset", lo),
                                              LessThan("offset", hi))))
        scan = self.table.scan(row_filter=condition, snapshot_id=self.snapshot_id,
                               selected_fields=("partition", "offset"))
        specs = self.table.specs()
        found = []
        for task in scan.plan_files():
            if task.delete_files:
                raise TableError(f"table of {self.topic}: {task.file.file_path} has delete"
                                 " files; read with history=log")
            found.append((task.file.file_path, _kafka_partition(specs, task.file)))
        return found


def _kafka_partition(specs: Mapping[int, Any], data_file: Any) -> int | None:
    """The identity(``partition``) value of a data file's Iceberg partition, if any."""
    spec = specs.get(data_file.spec_id)
    if spec is None:
        return None
    names = [f.name for f in spec.fields]
    if "partition" not in names:
        return None
    value = data_file.partition[names.index("partition")]
    return None if value is None else int(value)


def table_snapshot(catalog: Any, settings: CatalogSettings, topic: str) -> TableSnapshot | None:
    """``topic``'s table at its current snapshot, or None when it has no table."""
    table = load_table(catalog, settings, topic)
    if table is None:
        return None
    snapshot = table.current_snapshot()
    return TableSnapshot(topic, table, None if snapshot is None else snapshot.snapshot_id,
                         committed_offsets(snapshot))

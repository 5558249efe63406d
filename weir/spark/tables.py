"""The reader's side of the topic-table contract: find a topic's Iceberg table and what it
holds, without Spark (PyIceberg and the Kafka protocol only).

The contract itself (the ``weir.iceberg.*`` configs, the catalog named ``weir``, the table
``(<weir.iceberg.namespace>, <topic>)``, the ``weir.next-offsets`` marker of each snapshot)
lives once, in :mod:`weir.tables.catalog` (its PyIceberg-free part in
:mod:`weir.tables.settings`), shared with the writer; this module adds what a reader needs:
asking a broker for its catalog (DescribeConfigs of a BROKER resource, KIP-133 style: the
reader asks any broker; the same keys given as read options override what the brokers say),
and pinning a table at one snapshot to plan the Parquet files of offset ranges.  The table's
rows of partition ``p`` are exactly the log's committed records with
``offset < next-offsets[p]`` (read committed).  See ``docs/spark.md``.

PyIceberg is imported only when a table is read: ``import weir.spark`` stays light for
Spark's Python workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir.tables import settings as contract
from weir.tables.settings import CATALOG_KEYS, CatalogSettings

__all__ = ["CATALOG_KEYS", "CatalogSettings", "TableError", "TableSnapshot", "catalog_settings",
           "committed_offsets", "describe_catalog", "load_catalog", "load_table",
           "table_snapshot"]

REQUEST_TIMEOUT_S = 30.0


class TableError(ValueError):
    """A topic table that cannot be read as the contract says (bad settings or marker,
    delete files)."""


def catalog_settings(configs: Mapping[str, str | None]) -> CatalogSettings | None:
    """The settings named by ``configs`` (broker configs or read options), as the writer
    reads them (:func:`weir.tables.settings.catalog_settings`); None when they name no
    catalog (no ``weir.iceberg.catalog.uri``: Apache Kafka, or tables not set up).
    TableError names an unusable key."""
    try:
        settings = contract.catalog_settings(configs)
    except ValueError as exc:
        raise TableError(str(exc)) from None
    return settings if settings.uri else None


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
    """The PyIceberg catalog of ``settings``, opened as the writer opens it
    (:func:`weir.tables.catalog.load_catalog`: named ``weir``, since an SQL catalog keeps
    each table under its catalog's name)."""
    from weir.tables import catalog

    return catalog.load_catalog(settings)


def load_table(catalog: Any, settings: CatalogSettings, topic: str) -> Any | None:
    """The table of ``topic``, or None when there is none."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    from weir.tables.catalog import table_identifier

    try:
        return catalog.load_table(table_identifier(settings, topic))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None


def committed_offsets(table: Any) -> dict[int, int]:
    """``weir.next-offsets`` of the table's current snapshot (partition → first offset not
    in the table; :func:`weir.tables.catalog.committed_offsets`).  TableError when the
    marker is not a JSON object of partition to offset."""
    from weir.tables import catalog

    try:
        return catalog.committed_offsets(table)
    except ValueError as exc:
        raise TableError(f"table {'.'.join(table.name())}: {exc}") from None


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
        if not ranges or self.snapshot_id is None:
            return []
        scan = self.table.scan(row_filter=_ranges_filter(ranges), snapshot_id=self.snapshot_id,
                               selected_fields=("partition", "offset"))
        specs = self.table.specs()
        found = []
        for task in scan.plan_files():
            if task.delete_files:
                raise TableError(f"table of {self.topic}: {task.file.file_path} has delete"
                                 " files; read with history=log")
            found.append((task.file.file_path, _kafka_partition(specs, task.file)))
        return found


    def rows(self, ranges: Mapping[int, tuple[int, int]], columns: list[str]) -> Any:
        """The rows of ``{partition: [from, until)}`` as a ``pyarrow.Table`` of ``columns``
        (the table's own types), read by PyIceberg on this process: for reads small enough
        to need no Spark task.  TableError on delete files, as :meth:`files`."""
        if self.snapshot_id is None:
            raise TableError(f"table of {self.topic} has no snapshot")
        scan = self.table.scan(row_filter=_ranges_filter(ranges), snapshot_id=self.snapshot_id,
                               selected_fields=tuple(columns))
        tasks = list(scan.plan_files())
        for task in tasks:
            if task.delete_files:
                raise TableError(f"table of {self.topic}: {task.file.file_path} has delete"
                                 " files; read with history=log")
        return scan.to_arrow().select(columns)


def _ranges_filter(ranges: Mapping[int, tuple[int, int]]) -> Any:
    """A PyIceberg row filter keeping ``{partition: [from, until)}``."""
    from pyiceberg.expressions import (
        AlwaysFalse,
        And,
        EqualTo,
        GreaterThanOrEqual,
        LessThan,
        Or,
    )

    condition: Any = AlwaysFalse()
    for partition, (lo, hi) in sorted(ranges.items()):
        condition = Or(condition, And(EqualTo("partition", partition),
                                      And(GreaterThanOrEqual("offset", lo),
                                          LessThan("offset", hi))))
    return condition


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
    # A loaded PyIceberg table holds one metadata file: its current snapshot and the marker
    # read from it are the same snapshot, which the read then keeps (snapshot_id).
    snapshot = table.current_snapshot()
    return TableSnapshot(topic, table, None if snapshot is None else snapshot.snapshot_id,
                         committed_offsets(table))

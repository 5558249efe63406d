"""Appends a partition's committed records to its topic's Iceberg table, exactly once.

Runs in a translator worker process.  One commit covers, for each of some partitions of one
topic (those this broker leads and has records for), the offsets ``[start, end)``.  The
exactly-once argument (docs/tables.md):

1. The table's current snapshot says, in ``weir.next-offsets``, where each partition stands.
2. A partition's records are appended only if the table's offset of the partition is
   ``start``, and the commit records ``end`` in the full, merged map.
3. The catalog's commit is a compare-and-swap of the table's metadata pointer (PyIceberg's
   ``AssertRefSnapshotId`` requirement on ``main``): it fails if any other writer committed
   in between, whatever partition it wrote.  Then the table is loaded again and step 2 runs
   again: a partition another writer (a new leader, or the old one before its death) has
   moved past ``start`` is left out, and its caller resumes from the table.

So two writers of one partition never both add one range, and a writer that dies mid-commit
leaves at most unreferenced data files (no rows).  PyIceberg's own retry is switched off on
the table (``commit.retry.num-retries=0``): it would rebase the append onto the newer
snapshot with a stale marker.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table import Table

from weir.tables.catalog import (
    NEXT_OFFSETS,
    PARTITION_SPEC,
    TABLE_PROPERTIES,
    TABLE_SCHEMA,
    CatalogSettings,
    committed_offsets,
    table_identifier,
)
from weir.tables.decode import Columns

log = logging.getLogger(__name__)

ARROW_SCHEMA = schema_to_pyarrow(TABLE_SCHEMA)
COMMIT_ATTEMPTS = 8


@dataclass(frozen=True)
class CommitResult:
    """``offsets``: the table's map after the attempt; ``rows``: rows this commit added per
    partition; ``stale``: partitions the table had already moved past their ``start`` (by
    another writer), left out; ``metadata_location``: the table's current metadata."""

    offsets: dict[int, int]
    rows: dict[int, int]
    stale: frozenset[int]
    metadata_location: str


def open_table(catalog: Catalog, settings: CatalogSettings, topic: str) -> Table:
    """The topic's table, created (with its namespace) if missing; a concurrent creation by
    another broker is no error."""
    identifier = table_identifier(settings, topic)
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        try:
            catalog.create_namespace(settings.namespace)
        except NamespaceAlreadyExistsError:
            pass
        try:
            table = catalog.create_table(identifier, TABLE_SCHEMA, partition_spec=PARTITION_SPEC,
                                         properties=TABLE_PROPERTIES)
            log.info("created Iceberg table %s.%s", *identifier)
        except TableAlreadyExistsError:
            table = catalog.load_table(identifier)
    if table.properties.get("commit.retry.num-retries") != "0":
        # A table created elsewhere: PyIceberg's rebasing retry must stay off (module doc).
        with table.transaction() as txn:
            txn.set_properties({"commit.retry.num-retries": "0"})
        table = catalog.load_table(identifier)
    return table


def to_arrow(topic: str, partition: int, columns: Columns) -> pa.Table:
    n = len(columns)
    return pa.table({
        "key": pa.array(columns.key, pa.large_binary()),
        "value": pa.array(columns.value, pa.large_binary()),
        "topic": pa.array([topic] * n, pa.large_string()),
        "partition": pa.array([partition] * n, pa.int32()),
        "offset": pa.array(columns.offset, pa.int64()),
        "timestamp": pa.array(columns.timestamp_us, pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array(columns.timestamp_type, pa.int32()),
        "headers": pa.array(columns.headers, ARROW_SCHEMA.field("headers").type),
    }, schema=ARROW_SCHEMA)


def commit(catalog: Catalog, settings: CatalogSettings, topic: str,
           batches: dict[int, tuple[int, Columns]]) -> CommitResult:
    """Append, in one snapshot, each partition's ``columns`` (the records of
    ``[start, columns.next_offset)``, ``batches[partition] = (start, columns)``) whose table
    offset is still ``start``; the others are stale (see the module docstring)."""
    arrow = {p: to_arrow(topic, p, columns) for p, (_start, columns) in batches.items()}
    table = open_table(catalog, settings, topic)
    for attempt in range(COMMIT_ATTEMPTS):
        offsets = committed_offsets(table)
        stale = frozenset(p for p, (start, _c) in batches.items() if offsets.get(p, 0) != start)
        ready = sorted(p for p, (start, columns) in batches.items()
                       if p not in stale and columns.next_offset > start)
        if not ready:
            return CommitResult(offsets, {}, stale, table.metadata_location)
        merged = dict(offsets)
        merged.update({p: batches[p][1].next_offset for p in ready})
        marker = json.dumps({str(p): o for p, o in sorted(merged.items())})
        data = pa.concat_tables([arrow[p] for p in ready])
        try:
            # An append without rows (only aborted or control records) still commits a
            # snapshot, so the marker moves past them.
            table.append(data, snapshot_properties={NEXT_OFFSETS: marker})
        except CommitFailedException as exc:
            log.info("%s: table commit conflict (attempt %d): %s", topic, attempt + 1, exc)
            table = catalog.load_table(table_identifier(settings, topic))
            continue
        expire_snapshots(table)
        return CommitResult(committed_offsets(table), {p: len(arrow[p]) for p in ready}, stale,
                            table.metadata_location)
    raise CommitFailedException(f"{topic}: {COMMIT_ATTEMPTS} commits lost to concurrent "
                                f"writers")


def expire_snapshots(table: Table, now_ms: int | None = None) -> int:
    """Expire the snapshots older than ``history.expire.max-snapshot-age-ms``, keeping the
    newest ``history.expire.min-snapshots-to-keep`` (Iceberg's keys and defaults): every
    commit adds one, and the table's metadata file lists them all.  Appends only, so no data
    file becomes unreferenced and none is deleted.  A concurrent commit makes this one fail;
    the next commit tries again.  Returns the number expired."""
    props = table.properties
    max_age = int(props.get("history.expire.max-snapshot-age-ms", 5 * 24 * 3600 * 1000))
    keep = max(1, int(props.get("history.expire.min-snapshots-to-keep", 1)))
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)[:-keep]
    current = table.metadata.current_snapshot_id
    old = [s.snapshot_id for s in snapshots
           if s.timestamp_ms < now_ms - max_age and s.snapshot_id != current]
    if not old:
        return 0
    try:
        table.maintenance.expire_snapshots().by_ids(old).commit()
    except CommitFailedException:
        return 0
    return len(old)

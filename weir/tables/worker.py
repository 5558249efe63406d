"""The translator's work in its worker process (started with ``spawn`` by the broker): load a
table's committed offsets, decode and commit a partition's records.  Everything here runs in
that process; PyIceberg and pyarrow are imported there, on the first job, never by the
broker.  Results and errors go back as plain values (nothing of PyIceberg is unpickled in the
broker)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["load_offsets", "translate"]

_catalogs: dict[Any, Any] = {}


def _catalog(configs: dict[str, str | None]) -> tuple[Any, Any]:
    from weir.tables.catalog import catalog_settings, load_catalog

    settings = catalog_settings(configs)
    catalog = _catalogs.get(settings)
    if catalog is None:
        catalog = _catalogs[settings] = load_catalog(settings)
    return settings, catalog


def _error(exc: BaseException) -> dict[str, Any]:
    _catalogs.clear()  # a catalog unreachable now may be another object when it is back
    return {"error": f"{type(exc).__name__}: {exc}"}


def load_offsets(configs: dict[str, str | None], topic: str) -> dict[str, Any]:
    """The table's committed offsets (the table is created if missing)."""
    try:
        from weir.tables.catalog import committed_offsets
        from weir.tables.writer import open_table

        settings, catalog = _catalog(configs)
        table = open_table(catalog, settings, topic)
        return {"offsets": committed_offsets(table), "metadata_location": table.metadata_location}
    except Exception as exc:  # noqa: BLE001 - the broker logs it, retries; the table lags
        return _error(exc)


def translate(configs: dict[str, str | None], topic: str,
              parts: list[tuple[int, int, int, list[tuple[str, int, int, int, list]]]]
              ) -> dict[str, Any]:
    """For each (partition, start, upper, regions): read the regions (segment file,
    position, size, inode, aborted transactions) and decode the committed records of
    ``[start, upper)`` (no regions: the offsets are gone from the log, deleted by retention
    before they reached the table, and the table's offset moves to ``upper``); then commit
    them all in one snapshot, each partition only if the table is still at its ``start``."""
    try:
        from weir.tables.decode import Columns, decode_committed
        from weir.tables.writer import commit

        settings, catalog = _catalog(configs)
        batches = {}
        for partition, start, upper, regions in parts:
            if regions:
                columns = decode_committed(((_read(path, pos, size, inode), aborted)
                                            for path, pos, size, inode, aborted in regions),
                                           start, upper)
            else:
                columns = Columns(next_offset=upper)
            batches[partition] = (start, columns)
        result = commit(catalog, settings, topic, batches)
        return {"offsets": result.offsets, "rows": result.rows, "stale": sorted(result.stale),
                "metadata_location": result.metadata_location}
    except Exception as exc:  # noqa: BLE001 - as above: a catalog, disk or data error
        return _error(exc)


def _read(path: str, position: int, size: int, inode: int) -> bytes:
    """A region of a segment, which must still be the file the read found (the log cleaner
    replaces a segment by another file of the same name)."""
    with open(path, "rb") as f:
        if inode and os.fstat(f.fileno()).st_ino != inode:
            raise OSError(f"segment {path} was replaced since it was read")
        data = os.pread(f.fileno(), size, position)
    if len(data) != size:
        raise OSError(f"segment {path}: {len(data)} of {size} bytes at {position}")
    return data

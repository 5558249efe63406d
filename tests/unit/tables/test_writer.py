"""The exactly-once append against a real PyIceberg SQL catalog (SQLite in a temp dir):
concurrent writers of one table, and a second writer of one partition."""

from __future__ import annotations

import subprocess
import sys

import pytest

from weir.tables import writer
from weir.tables.catalog import (
    catalog_settings,
    committed_offsets,
    default_catalog_properties,
    load_catalog,
)
from weir.tables.decode import Columns


def _columns(first: int, n: int) -> Columns:
    return Columns(key=[None] * n, value=[b"v%d" % o for o in range(first, first + n)],
                   offset=list(range(first, first + n)),
                   timestamp_us=[1_700_000_000_000_000] * n, timestamp_type=[0] * n,
                   headers=[None] * n, next_offset=first + n)


@pytest.fixture
def catalog(tmp_path):
    settings = catalog_settings(default_catalog_properties(tmp_path))
    return settings, load_catalog(settings)


def test_a_lost_race_is_retried_against_the_new_snapshot_with_merged_offsets(catalog,
                                                                             monkeypatch):
    settings, cat = catalog
    stale = writer.open_table(cat, settings, "t")  # read before the other commit
    assert writer.commit(cat, settings, "t", {1: (0, _columns(0, 3))}).offsets == {1: 3}
    monkeypatch.setattr(writer, "open_table", lambda *_args: stale)
    result = writer.commit(cat, settings, "t", {0: (0, _columns(0, 2))})
    assert (result.offsets, result.rows, result.stale) == ({0: 2, 1: 3}, {0: 2}, frozenset())
    table = cat.load_table(("weir", "t"))
    assert committed_offsets(table) == {0: 2, 1: 3}
    assert table.scan().to_arrow().num_rows == 5


def test_a_second_writer_of_a_partition_appends_nothing(catalog, monkeypatch):
    settings, cat = catalog
    stale = writer.open_table(cat, settings, "t")
    writer.commit(cat, settings, "t", {0: (0, _columns(0, 4))})
    monkeypatch.setattr(writer, "open_table", lambda *_args: stale)
    # the same range of partition 0 again, with partition 1's first records
    result = writer.commit(cat, settings, "t", {0: (0, _columns(0, 4)), 1: (0, _columns(0, 1))})
    assert (result.offsets, result.rows, result.stale) == ({0: 4, 1: 1}, {1: 1},
                                                           frozenset({0}))
    assert cat.load_table(("weir", "t")).scan().to_arrow().num_rows == 5


def test_a_range_without_records_moves_the_marker(catalog):
    settings, cat = catalog
    writer.commit(cat, settings, "t", {0: (0, _columns(0, 2))})
    result = writer.commit(cat, settings, "t", {0: (2, Columns(next_offset=9))})
    assert result.offsets == {0: 9} and result.rows == {0: 0}


def test_the_broker_imports_no_pyiceberg_nor_pyarrow():
    code = ("import sys, weir.server.broker, weir.tables.service; "
            "print(sorted(m for m in ('pyiceberg', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.strip() == "[]"


def test_old_snapshots_are_expired_and_the_offsets_kept(catalog):
    settings, cat = catalog
    for i in range(4):
        writer.commit(cat, settings, "t", {0: (i * 2, _columns(i * 2, 2))})
    table = cat.load_table(("weir", "t"))
    with table.transaction() as txn:
        txn.set_properties({"history.expire.min-snapshots-to-keep": "2"})
    table = cat.load_table(("weir", "t"))
    assert len(table.metadata.snapshots) == 4
    future = max(s.timestamp_ms for s in table.metadata.snapshots) + 2 * 24 * 3600 * 1000
    assert writer.expire_snapshots(table, now_ms=future) == 2
    table = cat.load_table(("weir", "t"))
    assert len(table.metadata.snapshots) == 2
    assert committed_offsets(table) == {0: 8}
    assert table.scan().to_arrow().num_rows == 8


def test_worker_jobs_answer_errors_as_values():
    from weir.tables import worker

    assert worker.load_offsets({}, "t") == {
        "error": "ValueError: weir.iceberg.catalog.uri is not set: no Iceberg catalog to use"}
    bad = worker.load_offsets({"weir.iceberg.catalog.type": "hive"}, "t")
    assert bad["error"].startswith("ValueError: weir.iceberg.catalog.type='hive'")


def test_a_worker_without_pyiceberg_answers_an_error():
    code = ("import sys; sys.modules['pyiceberg'] = None; from weir.tables import worker; "
            "print(worker.load_offsets({'weir.iceberg.catalog.uri': 'sqlite:///x'}, 't'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert "'error'" in out and "ModuleNotFoundError" in out

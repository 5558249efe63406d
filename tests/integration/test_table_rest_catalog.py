"""``weir table catalog-server``, the Iceberg REST catalog over Weir's SQL catalog, as its
clients use it: PyIceberg's RestCatalog (create, append, a lost commit race), a bad request
over HTTP, brokers with ``weir.iceberg.catalog.type=rest`` writing a topic's table exactly
once (and catching up once after the catalog was down), and DuckDB attached to the REST
catalog reading the same rows as the log."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.conftest import wait_for
from tests.integration.clients import create_topic, produce
from tests.integration.replication_checks import partition_leaders
from tests.integration.table_checks import committed_ends, consume_committed, duckdb_connect
from weir.ops.cluster import LocalCluster
from weir.tables.catalog import committed_offsets

pytestmark = pytest.mark.integration

TABLE_CONFIG = {"weir.iceberg.mode": "key_value", "weir.iceberg.target.lag.ms": "300"}


class CatalogServer:
    """``weir table catalog-server`` as a process over one data directory."""

    def __init__(self, data_dir) -> None:
        self.data_dir = data_dir
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self, port: int = 0) -> str:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "weir", "table", "catalog-server", "--data-dir",
             str(self.data_dir), "--port", str(port)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        if not match:
            self.stop()
            raise AssertionError(f"the catalog server did not start: {line}")
        self.url = match.group(0)
        return self.url

    def stop(self) -> int:
        process, self.process = self.process, None
        try:
            process.terminate()
            try:
                return process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
                raise
        finally:
            process.stdout.close()


@pytest.fixture(scope="module")
def catalog_server(tmp_path_factory):
    """The catalog server over a fresh data directory's embedded catalog."""
    server = CatalogServer(tmp_path_factory.mktemp("weir-rest-catalog"))
    server.start()
    try:
        yield server
    finally:
        if server.process is not None:
            assert server.stop() == 0, "the catalog server did not stop cleanly on SIGTERM"


@pytest.fixture(scope="module")
def server(catalog_server):
    return catalog_server.url


@pytest.fixture(scope="module")
def cluster(server, tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("weir-rest-brokers"), brokers=2,
                           port_base=0, overrides={"weir.iceberg.catalog.type": "rest",
                                                   "weir.iceberg.catalog.uri": server})
    try:
        cluster.start(timeout_s=90)
        yield cluster
    finally:
        cluster.stop()


def rest_catalog(url: str):
    return load_catalog("weir-rest", type="rest", uri=url)


def wait_caught_up(url: str, topic: str, ends: dict[int, int]) -> None:
    def caught_up():
        try:
            offsets = committed_offsets(rest_catalog(url).load_table(("weir", topic)))
        except NoSuchTableError:
            return False
        return all(offsets.get(p, 0) >= end for p, end in ends.items())
    wait_for(caught_up, 90, interval_s=0.2, what=f"the table of {topic} at {ends}")


def table_rows(url: str, topic: str) -> list[tuple]:
    table = rest_catalog(url).load_table(("weir", topic))
    return sorted(((r["partition"], r["offset"], r["key"], r["value"], [])
                   for r in table.scan().to_arrow().to_pylist()), key=lambda r: r[:2])


def describe(bootstrap: str, topic: str) -> dict:
    """``weir table describe --json``: the catalog found through DescribeConfigs."""
    answer = subprocess.run([sys.executable, "-m", "weir", "table", "describe", topic,
                             "--json", "--bootstrap-server", bootstrap],
                            check=False, capture_output=True, text=True, timeout=60)
    assert answer.returncode == 0, answer.stderr
    doc = json.loads(answer.stdout)
    return {"catalog": (doc["catalog"]["type"], doc["catalog"]["uri"]),
            **{k: doc[k] for k in ("offsets", "lag", "metadata_location")}}


def test_pyiceberg_creates_appends_and_loses_a_commit_race(server):
    catalog = rest_catalog(server)
    catalog.create_namespace("clients")
    schema = Schema(NestedField(1, "n", LongType(), required=False),
                    NestedField(2, "s", StringType(), required=False))
    # PyIceberg's own retry off, as on Weir's tables: the lost race must surface
    table = catalog.create_table(("clients", "numbers"), schema,
                                 properties={"commit.retry.num-retries": "0"})
    table.append(pa.table({"n": pa.array([1, 2], pa.int64()), "s": ["a", "b"]}))
    first, second = (catalog.load_table(("clients", "numbers")) for _ in range(2))
    first.append(pa.table({"n": pa.array([3], pa.int64()), "s": ["c"]}))
    with pytest.raises(CommitFailedException):
        second.append(pa.table({"n": pa.array([4], pa.int64()), "s": ["d"]}))
    rows = catalog.load_table(("clients", "numbers")).scan().to_arrow()
    assert sorted(rows["n"].to_pylist()) == [1, 2, 3]
    assert catalog.table_exists(("clients", "numbers"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table(("clients", "absent"))

    # a create transaction (stage-create, then a commit with assert-create), a rename, a drop
    with catalog.create_table_transaction(("clients", "staged"), schema) as txn:
        txn.set_properties({"owner": "test"})
    assert catalog.load_table(("clients", "staged")).properties["owner"] == "test"
    catalog.rename_table(("clients", "staged"), ("clients", "renamed"))
    catalog.drop_table(("clients", "renamed"))
    assert catalog.list_tables("clients") == [("clients", "numbers")]

    # a bad request is an ErrorModel answer, and the server goes on serving
    request = urllib.request.Request(f"{server}/v1/namespaces/clients/tables/numbers",
                                     data=b'{"updates": [{"action": "nonsense"}]}',
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(request, timeout=30)
    assert answer.value.code == 400
    assert json.loads(answer.value.read())["error"]["type"] == "BadRequestException"
    assert len(rest_catalog(server).load_table(("clients", "numbers")).scan().to_arrow()) == 3


def test_brokers_write_a_topic_table_through_the_rest_catalog(cluster, server, topic_name):
    bootstrap = cluster.bootstrap
    # two partitions led by two brokers: two writers of one table, through the server
    create_topic(bootstrap, topic_name, partitions=2, replication=2, config=TABLE_CONFIG)
    produce(bootstrap, topic_name, [b"v%d" % i for i in range(200)],
            keys=[b"k%d" % (i % 5) for i in range(200)], acks="all")
    ends = committed_ends(bootstrap, topic_name, 2)
    expected = consume_committed(bootstrap, topic_name, ends)
    assert len(expected) == 200
    wait_caught_up(server, topic_name, ends)

    table = rest_catalog(server).load_table(("weir", topic_name))
    assert committed_offsets(table) == ends
    assert describe(bootstrap, topic_name) == {
        "catalog": ("rest", server), "offsets": {str(p): end for p, end in ends.items()},
        "lag": {str(p): 0 for p in ends}, "metadata_location": table.metadata_location}
    assert table_rows(server, topic_name) == expected  # exactly once: no gap, no duplicate

    # DuckDB attached to the REST catalog (httpfs does its HTTP): the same rows
    try:
        con = duckdb_connect(http=True)
    except ImportError:  # without duckdb-extension-httpfs: the location the REST load gives
        con = duckdb_connect()
        query = "SELECT \"partition\", \"offset\", key, value FROM iceberg_scan(?) "
        params = [table.metadata_location]
    else:
        con.execute(f"ATTACH 'weir' AS lake (TYPE iceberg, ENDPOINT '{server}', "
                    f"AUTHORIZATION_TYPE 'none')")
        query = f"SELECT \"partition\", \"offset\", key, value FROM lake.weir.\"{topic_name}\" "
        params = []
        # and DuckDB's own commits (its REST client, not PyIceberg's) go through the server
        con.execute(f"CREATE TABLE lake.weir.\"{topic_name}-copy\" AS SELECT \"partition\", "
                    f"\"offset\" FROM lake.weir.\"{topic_name}\"")
        copy = rest_catalog(server).load_table(("weir", f"{topic_name}-copy"))
        assert len(copy.scan().to_arrow()) == len(expected)
    duck = con.execute(query + "ORDER BY \"partition\", \"offset\"", params).fetchall()
    assert duck == [r[:4] for r in expected]


def test_the_table_falls_behind_while_the_catalog_is_down_then_catches_up_once(
        cluster, catalog_server, topic_name):
    bootstrap, url = cluster.bootstrap, catalog_server.url
    create_topic(bootstrap, topic_name, partitions=1, replication=2, config=TABLE_CONFIG)
    produce(bootstrap, topic_name, [b"before-%d" % i for i in range(20)], acks="all")
    wait_caught_up(url, topic_name, {0: 20})
    leader = partition_leaders(bootstrap, topic_name)[0]
    assert catalog_server.stop() == 0
    try:
        produce(bootstrap, topic_name, [b"during-%d" % i for i in range(30)], acks="all")
        wait_for(lambda: f"topic table of {topic_name}-0 falls behind (30 records"
                 in cluster.log_path(leader).read_text(errors="replace"), 60, interval_s=0.2,
                 what="the leader logging the table's lag")
    finally:
        catalog_server.start(port=int(url.rsplit(":", 1)[1]))
    ends = committed_ends(bootstrap, topic_name, 1)
    assert ends == {0: 50}
    wait_caught_up(url, topic_name, ends)
    assert table_rows(url, topic_name) == consume_committed(bootstrap, topic_name, ends)

"""Topic tables on real brokers: the leaders append a topic's committed records to its
Iceberg table (embedded SQLite catalog of ``weir up``), exactly once across leader SIGKILLs;
PyIceberg and DuckDB, independent readers, read the same rows as a read_committed consumer.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from tests.conftest import wait_for
from tests.integration.clients import create_topic, produce
from tests.integration.replication_checks import BackgroundProducer, partition_leaders
from tests.integration.table_checks import committed_ends as _committed_ends
from tests.integration.table_checks import consume_committed as _consume_committed
from tests.integration.table_checks import duckdb_rows as _duckdb_rows
from weir.config import read_properties
from weir.ops.cluster import LocalCluster
from weir.server.metrics import parse
from weir.tables.catalog import catalog_settings, committed_offsets, load_catalog, table_identifier

pytestmark = pytest.mark.integration

TABLE_CONFIG = {"weir.iceberg.mode": "key_value", "weir.iceberg.target.lag.ms": "400"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("weir-tables"), brokers=3, port_base=0)
    cluster.serve_metrics = True
    try:
        cluster.start(timeout_s=90)
        yield cluster
    finally:
        cluster.stop()


def _table(cluster: LocalCluster, topic: str):
    settings = catalog_settings(read_properties(cluster.config_path(cluster.broker_ids[0])))
    return load_catalog(settings).load_table(table_identifier(settings, topic))


def _wait_caught_up(cluster: LocalCluster, topic: str, ends: dict[int, int], timeout_s=90):
    def caught_up():
        try:
            offsets = committed_offsets(_table(cluster, topic))
        except Exception:  # noqa: BLE001 - not created yet
            return False
        return all(offsets.get(p, 0) >= end for p, end in ends.items()) and offsets
    return wait_for(caught_up, timeout_s, interval_s=0.2, what=f"table {topic} at {ends}")


def _table_rows(cluster: LocalCluster, topic: str) -> list[tuple]:
    data = _table(cluster, topic).scan().to_arrow().to_pylist()
    return sorted(((r["partition"], r["offset"], r["key"], r["value"],
                    [(h["key"], h["value"]) for h in (r["headers"] or [])]) for r in data),
                  key=lambda r: (r[0], r[1]))


def test_table_holds_exactly_the_committed_records(cluster, topic_name):
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=2, replication=3, config=TABLE_CONFIG)
    produce(bootstrap, topic_name, [b"v%d" % i for i in range(300)],
            keys=[b"k%d" % (i % 7) for i in range(300)], acks="all",
            **{"compression.type": "lz4"})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic_name, value=b"with-headers", key=b"h", partition=0,
                     headers=[("trace", b"abc"), ("empty", None)])
    producer.flush(30)
    # A committed and an aborted transaction: only the first reaches the table.
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name + "-txn"})
    txn.init_transactions(30)
    for keep in (True, False):
        txn.begin_transaction()
        for i in range(20):
            txn.produce(topic_name, value=(b"kept-%d" if keep else b"aborted-%d") % i,
                        partition=i % 2)
        txn.flush(30)
        (txn.commit_transaction if keep else txn.abort_transaction)(30)
    ends = _committed_ends(bootstrap, topic_name, 2)
    expected = _consume_committed(bootstrap, topic_name, ends)
    assert len(expected) == 321 and not any(r[3].startswith(b"aborted") for r in expected)

    # (the table may be past these ends: the ABORT markers land after abort_transaction)
    _wait_caught_up(cluster, topic_name, ends)
    table = _table(cluster, topic_name)
    assert _table_rows(cluster, topic_name) == expected
    assert _duckdb_rows(table.metadata_location) == [r[:4] for r in expected]
    assert table.metadata.format_version == 2
    assert [f.name for f in table.spec().fields] == ["partition", "timestamp_day"]
    # batched: a handful of commits per partition, not one per produce request
    assert len(list(table.snapshots())) < 20


def test_no_gap_and_no_duplicate_across_leader_failovers(cluster, topic_name):
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=2, replication=3,
                 config={**TABLE_CONFIG, "min.insync.replicas": "2"})
    with BackgroundProducer(bootstrap, topic_name, 2) as producer:
        for controlled in (False, True):  # SIGKILL, then a controlled shutdown (SIGTERM)
            target = producer.acked_count() + 400
            wait_for(lambda t=target: producer.acked_count() >= t, 60,
                     what="records acknowledged")
            victim = partition_leaders(bootstrap, topic_name)[0]
            if controlled:
                cluster.stop_broker(victim)
            else:
                cluster.kill_broker(victim)
            wait_for(lambda v=victim: partition_leaders(bootstrap, topic_name)[0]
                     not in (v, -1), 60, what="a new leader of partition 0")
            cluster.start_broker(victim)
            cluster.wait_for_brokers([victim], 60)
        producer.stop()
    ends = _committed_ends(bootstrap, topic_name, 2)
    expected = _consume_committed(bootstrap, topic_name, ends)
    _wait_caught_up(cluster, topic_name, ends, timeout_s=120)
    rows = _table_rows(cluster, topic_name)
    keys = [(r[0], r[1]) for r in rows]
    assert len(keys) == len(set(keys)), "a record is in the table twice"
    assert rows == expected


def test_lag_on_the_metrics_endpoint(cluster, topic_name):
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=1, replication=1, config=TABLE_CONFIG)
    produce(bootstrap, topic_name, [b"x"] * 10)
    leader = partition_leaders(bootstrap, topic_name)[0]
    port = read_properties(cluster.config_path(leader))["metrics.http.port"]

    def gauges():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            samples = parse(r.read().decode())
        labels = (("partition", "0"), ("topic", topic_name))
        return (samples.get(("weir_iceberg_committed_offset", labels)) == 10
                and samples.get(("weir_iceberg_lag_records", labels)) == 0)
    wait_for(gauges, 60, interval_s=0.2, what="lag 0 and offset 10 on /metrics")


def test_weir_table_describe_and_list_and_topic_deletion_keeps_the_table(cluster, topic_name,
                                                                         capsys):
    from confluent_kafka.admin import AdminClient

    from weir.cli.main import main

    bootstrap = cluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=2, replication=2, config=TABLE_CONFIG)
    produce(bootstrap, topic_name, [b"r%d" % i for i in range(50)],
            keys=[b"%d" % i for i in range(50)])
    ends = _committed_ends(bootstrap, topic_name, 2)
    _wait_caught_up(cluster, topic_name, ends)
    capsys.readouterr()
    assert main(["table", "describe", topic_name, "--json", "--bootstrap-server",
                 bootstrap]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["table"] == f"weir.{topic_name}"
    assert doc["offsets"] == {str(p): end for p, end in ends.items()}
    assert doc["lag"] == {"0": 0, "1": 0}
    assert doc["metadata_location"] == _table(cluster, topic_name).metadata_location
    assert main(["table", "list", "--bootstrap-server", bootstrap]) == 0
    assert f"weir.{topic_name}" in capsys.readouterr().out.split()
    assert main(["table", "describe", "no-such-topic", "--bootstrap-server", bootstrap]) == 1
    assert "no table weir.no-such-topic" in capsys.readouterr().err

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic_name])[topic_name].result(30)
    wait_for(lambda: topic_name not in admin.list_topics(timeout=10).topics, 30,
             what="the topic deleted")
    assert len(_table_rows(cluster, topic_name)) == 50  # the table keeps the history
    # The same name again: the old table is ahead of the new log; nothing is appended to it
    def recreated() -> bool:  # once the controller has finished the deletion
        try:
            create_topic(bootstrap, topic_name, partitions=2, replication=2,
                         config=TABLE_CONFIG)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            return False
        return True
    wait_for(recreated, 60, interval_s=0.5, what="the topic created again")
    produce(bootstrap, topic_name, [b"new"] * 2, partition=0)

    def refused() -> bool:
        return any(f"topic table of {topic_name}-0 falls behind" in text
                   and "the table is ahead of the log" in text
                   for text in (cluster.log_path(b).read_text(errors="replace")
                                for b in cluster.broker_ids))
    wait_for(refused, 60, interval_s=0.5, what="the leader refusing the old table")
    assert len(_table_rows(cluster, topic_name)) == 50



def test_unwritable_storage_makes_the_table_fall_behind_then_catch_up_once(cluster,
                                                                           topic_name):
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=1, replication=3, config=TABLE_CONFIG)
    produce(bootstrap, topic_name, [b"before-%d" % i for i in range(20)], acks="all")
    _wait_caught_up(cluster, topic_name, {0: 20})
    leader = partition_leaders(bootstrap, topic_name)[0]
    port = read_properties(cluster.config_path(leader))["metrics.http.port"]
    table_dir = Path(_table(cluster, topic_name).location().removeprefix("file://"))
    hidden = table_dir.with_name(table_dir.name + ".away")
    table_dir.rename(hidden)
    table_dir.write_text("not a directory")  # neither metadata nor data files can be used
    try:
        produce(bootstrap, topic_name, [b"during-%d" % i for i in range(30)], acks="all")
        labels = (("partition", "0"), ("topic", topic_name))

        def lagging():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                samples = parse(r.read().decode())
            log_text = cluster.log_path(leader).read_text(errors="replace")
            return (samples.get(("weir_iceberg_lag_records", labels)) == 30
                    and f"topic table of {topic_name}-0 falls behind (30 records" in log_text
                    and samples.get(("weir_iceberg_commit_failures_total", ())) >= 1)
        wait_for(lagging, 60, interval_s=0.2,
                 what="a lag of 30 records on /metrics and in the broker's log")
        # the topic keeps serving
        produce(bootstrap, topic_name, [b"more-%d" % i for i in range(10)], acks="all")
    finally:
        table_dir.unlink()
        hidden.rename(table_dir)
    ends = _committed_ends(bootstrap, topic_name, 1)
    assert ends == {0: 60}
    expected = _consume_committed(bootstrap, topic_name, ends)
    _wait_caught_up(cluster, topic_name, ends, timeout_s=60)
    assert _table_rows(cluster, topic_name) == expected


def test_a_compacted_topic_switched_on_later_is_appended_from_its_start(cluster, topic_name):
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    bootstrap = cluster.bootstrap
    create_topic(bootstrap, topic_name, partitions=1, replication=3,
                 config={"cleanup.policy": "compact"})
    produce(bootstrap, topic_name, [b"a1", b"b1", b"a2", None],
            keys=[b"a", b"b", b"a", b"b"])  # the last one a tombstone
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        for key, value in TABLE_CONFIG.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(30)
    _wait_caught_up(cluster, topic_name, {0: 4})
    assert _table_rows(cluster, topic_name) == _consume_committed(bootstrap, topic_name, {0: 4})
    assert [r[3] for r in _table_rows(cluster, topic_name)] == [b"a1", b"b1", b"a2", None]

"""JBOD: brokers with two log dirs each (KIP-112/113, KIP-827).

DescribeLogDirs through kafka-python's admin client and raw requests, AlterReplicaLogDirs
moving replicas (leader and follower) while an acks=all producer writes to them, and a log
dir that fails on a live broker: only its replicas go offline and lose leadership, the
other dir's partitions keep their leader, clients go on through the new leaders.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tests.integration.clients import consume_assigned, raw_request
from tests.integration.conftest import _dump_logs
from tests.integration.replication_checks import (
    BackgroundProducer,
    partition_leaders,
    verify_exactly_once,
    wait_for_progress,
    wait_until,
)
from weir.ops.cluster import LocalCluster
from weir.protocol.errors import ErrorCode

pytestmark = [pytest.mark.integration]

BROKERS = (1, 2)


def _dirs(data: Path, broker_id: int) -> list[Path]:
    """What ``LocalCluster(log_dirs=2)`` (``weir up --log-dirs 2``) gives each broker."""
    return [data / f"broker-{broker_id}" / "logs-1", data / f"broker-{broker_id}" / "logs-2"]


def _start(data: Path, **overrides: str) -> LocalCluster:
    cluster = LocalCluster(data, brokers=len(BROKERS), port_base=0, overrides=overrides,
                           log_dirs=2)
    assert cluster.broker_log_dirs(1) == _dirs(data.resolve(), 1)
    try:
        cluster.start(timeout_s=90)
        wait_until(lambda: all(_known_brokers(s) == set(BROKERS) for s in cluster.brokers),
                   30, "every broker's metadata naming both brokers")
    except BaseException:
        _dump_logs(cluster)
        cluster.stop()
        raise
    return cluster


def _known_brokers(slot) -> set[int]:
    """The brokers in this broker's metadata cache (filled by the controller's
    UpdateMetadata, a moment after registration)."""
    try:
        response = raw_request(slot.host, slot.port, 3, 12, topics=[])
    except OSError:
        return set()
    return {int(b.node_id) for b in response.brokers}


@pytest.fixture(scope="module")
def jbod(tmp_path_factory, request):
    data = tmp_path_factory.mktemp("jbod") / "data"
    cluster = _start(data)
    yield cluster, data
    cluster.stop()


def _create(cluster: LocalCluster, topic: str, assignment: list[list[int]],
            config: dict[str, str] | None = None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments=dict(enumerate(assignment)),
                                      topic_configs=config or {})], timeout_ms=30000)
    finally:
        admin.close()
    wait_until(lambda: all(l >= 0 for l in partition_leaders(cluster.bootstrap, topic).values())
               and len(partition_leaders(cluster.bootstrap, topic)) == len(assignment),
               30, "leaders")


def _placement(admin: KafkaAdminClient, topic: str) -> dict[tuple[int, int], list[tuple]]:
    """(broker, partition) → [(log dir, is_future, size, offset_lag)] from DescribeLogDirs."""
    found: dict[tuple[int, int], list[tuple]] = {}
    for entry in admin.describe_log_dirs():
        for result in entry["log_dirs"]:
            for t in result["topics"]:
                if t["name"] != topic:
                    continue
                for p in t["partitions"]:
                    found.setdefault((entry["broker"], p["partition_index"]), []).append(
                        (result["log_dir"], p["is_future_key"], p["partition_size"],
                         p["offset_lag"]))
    return found


def test_describe_log_dirs_reports_every_dir_with_sizes(jbod, topic_name):
    cluster, data = jbod
    _create(cluster, topic_name, [[1, 2], [2, 1]])
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        described = {e["broker"]: e["log_dirs"] for e in admin.describe_log_dirs()}
        assert set(described) == set(BROKERS)
        for broker_id, results in described.items():
            assert sorted(r["log_dir"] for r in results) == sorted(
                str(d) for d in _dirs(data, broker_id))
            for r in results:
                assert r["error_code"] == 0
                assert r["total_bytes"] > 0 and 0 <= r["usable_bytes"] <= r["total_bytes"]
        placement = _placement(admin, topic_name)
        # Each replica lives in exactly one dir of its broker; a broker's two partitions
        # went to different dirs (the dir with the fewest logs).
        assert sorted(placement) == [(1, 0), (1, 1), (2, 0), (2, 1)]
        for where in placement.values():
            assert len(where) == 1 and where[0][1] is False
        for b in BROKERS:
            assert placement[(b, 0)][0][0] != placement[(b, 1)][0][0]
    finally:
        admin.close()
    # Older versions (no sizes before v4), a topic filter, through the broker's own codec.
    slot = cluster.brokers[0]
    for version in (0, 1, 3):
        old = raw_request(slot.host, slot.port, 35, version,
                          topics=[{"topic": topic_name, "partitions": [0]}])
        assert sorted(r.log_dir for r in old.results) == sorted(
            str(d) for d in _dirs(data, slot.id))
        assert [p.partition_index for r in old.results for t in r.topics
                for p in t.partitions] == [0]


def test_replicas_move_between_dirs_under_acks_all_load(jbod, topic_name):
    cluster, data = jbod
    _create(cluster, topic_name, [[1, 2]], {"min.insync.replicas": "2"})
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        before = _placement(admin, topic_name)
        targets = {}
        for b in BROKERS:
            current = before[(b, 0)][0][0]
            targets[b] = next(str(d) for d in _dirs(data, b) if str(d) != current)
        with BackgroundProducer(cluster.bootstrap, topic_name, 1) as producer:
            wait_for_progress(producer, 3000, 60, "acks before the move")
            result = admin.alter_replica_log_dirs(
                {(topic_name, 0, b): targets[b] for b in BROKERS})
            assert {tpr.broker_id: err.errno for tpr, err in result.items()} == {1: 0, 2: 0}

            def moved():
                now = _placement(admin, topic_name)
                return all(now.get((b, 0)) and len(now[(b, 0)]) == 1
                           and now[(b, 0)][0][:2] == (targets[b], False) for b in BROKERS)

            wait_until(moved, 60, "both replicas in their new dirs")
            wait_for_progress(producer, 3000, 60, "acks after the move")
            producer.stop()
        assert not producer.failed
        assert partition_leaders(cluster.bootstrap, topic_name) == {0: 1}
        for b in BROKERS:
            old = next(d for d in _dirs(data, b) if str(d) != targets[b])
            wait_until(lambda old=old: not [p for p in old.iterdir()
                                            if p.name.startswith(topic_name)],
                       30, f"the old copy on broker {b} deleted")
        verify_exactly_once(cluster.bootstrap, topic_name, 1, producer)
    finally:
        admin.close()


def test_alter_replica_log_dirs_errors(jbod, topic_name):
    cluster, data = jbod
    _create(cluster, topic_name, [[1]])
    slot = next(s for s in cluster.brokers if s.id == 1)

    def alter(path: str, topic: str) -> int:
        response = raw_request(slot.host, slot.port, 34, 2, dirs=[
            {"path": path, "topics": [{"name": topic, "partitions": [0]}]}])
        (t,) = response.results
        return int(t.partitions[0].error_code)

    assert alter(str(data / "not-a-log-dir"), topic_name) == ErrorCode.log_dir_not_found
    v0 = raw_request(slot.host, slot.port, 34, 0, dirs=[
        {"path": "relative/dir", "topics": [{"name": topic_name, "partitions": [0]}]}])
    assert int(v0.results[0].partitions[0].error_code) == ErrorCode.log_dir_not_found
    assert alter(str(_dirs(data, 1)[1]), f"{topic_name}-absent") \
        == ErrorCode.replica_not_available
    here = next(str(d) for d in _dirs(data, 1) if (d / f"{topic_name}-0").exists())
    assert alter(here, topic_name) == ErrorCode.none  # already there


@pytest.mark.slow
def test_a_failed_log_dir_moves_only_its_replicas_leadership(tmp_path, topic_name):
    data = tmp_path / "data"
    cluster = _start(data, **{"replica.high.watermark.checkpoint.interval.ms": "300"})
    try:
        _create(cluster, topic_name, [[1, 2], [1, 2]])
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            placement = _placement(admin, topic_name)
        finally:
            admin.close()
        failing = Path(placement[(1, 0)][0][0])
        assert Path(placement[(1, 1)][0][0]) != failing
        with BackgroundProducer(cluster.bootstrap, topic_name, 2) as producer:
            wait_for_progress(producer, 1000, 60, "acks before the failure")
            # The dir disappears and a file takes its name: the next write there fails.
            shutil.rmtree(failing)
            failing.write_text("not a directory\n")
            wait_until(lambda: partition_leaders(cluster.bootstrap, topic_name) == {0: 2, 1: 1},
                       60, "partition 0 led by broker 2, partition 1 still by broker 1")
            wait_for_progress(producer, 1000, 60, "acks to both partitions after the failure")
            producer.stop()
        assert cluster.broker_pid(1) is not None  # the broker lives on with one dir
        by_partition = {}
        for p, offset, _value in producer.acked[-500:]:
            by_partition[p] = offset
        assert set(by_partition) == {0, 1}
        slot = next(s for s in cluster.brokers if s.id == 1)
        described = raw_request(slot.host, slot.port, 35, 4, topics=None)
        errors = {r.log_dir: int(r.error_code) for r in described.results}
        assert errors == {str(failing): ErrorCode.kafka_storage_error,
                          str(next(d for d in _dirs(data, 1) if d != failing)): 0}
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=cluster.zookeeper_connect)
        zk.start(timeout=10)
        try:
            deadline = time.monotonic() + 30
            while zk.get_children("/log_dir_event_notification") and \
                    time.monotonic() < deadline:
                time.sleep(0.2)
            assert zk.get_children("/log_dir_event_notification") == []
        finally:
            zk.stop()
            zk.close()
        verify_exactly_once(cluster.bootstrap, topic_name, 2, producer)
    except BaseException:
        _dump_logs(cluster)
        raise
    finally:
        cluster.stop()


@pytest.mark.slow
def test_sigkill_during_a_move_leaves_one_complete_log(tmp_path, topic_name):
    """The copy is throttled (replica.alter.log.dirs.io.max.bytes.per.second) so that the
    broker is killed while the future log is incomplete; after the restart the move resumes
    from the future log on disk and completes, and every acknowledged record is there."""
    data = tmp_path / "data"
    cluster = _start(data, **{"replica.alter.log.dirs.io.max.bytes.per.second": "150000"})
    try:
        _create(cluster, topic_name, [[1, 2]], {"min.insync.replicas": "2"})
        with BackgroundProducer(cluster.bootstrap, topic_name, 1) as producer:
            wait_for_progress(producer, 20000, 90, "about 0.5 MB acknowledged")
            producer.stop()
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            current = _placement(admin, topic_name)[(1, 0)][0][0]
            target = next(str(d) for d in _dirs(data, 1) if str(d) != current)
            result = admin.alter_replica_log_dirs({(topic_name, 0, 1): target})
            assert [e.errno for e in result.values()] == [0]
            wait_until(lambda: any(f for _d, f, _s, _l in
                                   _placement(admin, topic_name).get((1, 0), [])),
                       30, "the future log on broker 1")
        finally:
            admin.close()
        cluster.kill_broker(1)
        on_disk = {d: sorted(p.name for p in d.iterdir() if p.name.startswith(topic_name))
                   for d in _dirs(data, 1)}
        names = [n for ns in on_disk.values() for n in ns]
        assert f"{topic_name}-0" in names, on_disk  # never neither
        assert any(n.endswith("-future") for n in names), on_disk  # killed mid-copy
        cluster.start_broker(1)
        slot = next(s for s in cluster.brokers if s.id == 1)

        def finished():
            try:
                described = raw_request(slot.host, slot.port, 35, 4, topics=None)
            except OSError:
                return False  # still starting
            where = [(r.log_dir, p.is_future_key) for r in described.results
                     for t in r.topics if t.name == topic_name for p in t.partitions]
            return where == [(target, False)]

        wait_until(finished, 90, "the move resumed and finished")
        # Broker 1 leads again or not: either way every acked record is readable, and the
        # moved replica on broker 1 serves them when it leads (its log is the one read).
        verify_exactly_once(cluster.bootstrap, topic_name, 1, producer)
        cluster.kill_broker(2)
        wait_until(lambda: partition_leaders(cluster.bootstrap, topic_name) == {0: 1}, 60,
                   "broker 1 (the moved replica) leading")
        verify_exactly_once(cluster.bootstrap, topic_name, 1, producer)
    except BaseException:
        _dump_logs(cluster)
        raise
    finally:
        cluster.stop()


def test_weir_log_dirs_cli_describes_and_moves(jbod, topic_name, capsys):
    from weir.cli.main import main

    cluster, data = jbod
    _create(cluster, topic_name, [[2]])
    base = ["--bootstrap-server", cluster.bootstrap, "--json"]

    def describe() -> dict:
        capsys.readouterr()
        assert main(["log-dirs", "describe", *base, "--broker-list", "2",
                     "--topic-list", topic_name]) == 0
        return json.loads(capsys.readouterr().out)

    doc = describe()
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [2]
    dirs = doc["brokers"][0]["logDirs"]
    assert sorted(d["logDir"] for d in dirs) == sorted(str(d) for d in _dirs(data, 2))
    assert all(d["error"] is None and d["totalBytes"] > 0 for d in dirs)
    (here,) = [d["logDir"] for d in dirs if d["partitions"]]
    assert dirs[[d["logDir"] for d in dirs].index(here)]["partitions"] == [
        {"partition": f"{topic_name}-0", "size": 0, "offsetLag": 0, "isFuture": False}]
    there = next(str(d) for d in _dirs(data, 2) if str(d) != here)
    capsys.readouterr()
    assert main(["log-dirs", "move", *base, "--topic", topic_name, "--partition", "0",
                 "--broker", "2", "--dir", there]) == 0
    assert json.loads(capsys.readouterr().out)["error"] is None

    def moved():
        found = {d["logDir"]: d["partitions"] for d in describe()["brokers"][0]["logDirs"]}
        return found[there] and not found[here] and not found[there][0]["isFuture"]

    wait_until(moved, 30, "the replica in its new dir")
    capsys.readouterr()
    assert main(["log-dirs", "move", *base, "--topic", topic_name, "--partition", "0",
                 "--broker", "2", "--dir", "/no/such/dir"]) == 1
    assert "LOG_DIR_NOT_FOUND" in capsys.readouterr().err


def test_weir_reassign_places_replicas_in_named_log_dirs(jbod, topic_name, tmp_path, capsys):
    """kafka-reassign-partitions' ``log_dirs``: a new replica is created in the named dir
    (REPLICA_NOT_AVAILABLE is retried until it exists), an existing one moves there."""
    from weir.cli.main import main

    cluster, data = jbod
    _create(cluster, topic_name, [[1]])
    from tests.integration.clients import produce as produce_values

    produce_values(cluster.bootstrap, topic_name, [b"r%d" % i for i in range(50)])
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        current = _placement(admin, topic_name)[(1, 0)][0][0]
    finally:
        admin.close()
    target1 = next(str(d) for d in _dirs(data, 1) if str(d) != current)
    target2 = str(_dirs(data, 2)[1])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [1, 2],
         "log_dirs": [target1, target2]}]}))
    base = ["reassign", "--bootstrap-server", cluster.bootstrap,
            "--reassignment-json-file", str(plan)]
    capsys.readouterr()
    assert main([*base, "--execute"]) == 0
    out = capsys.readouterr().out
    assert f"Successfully started moving log directory to {target2} for replica " \
           f"{topic_name}-0 with broker 2" in out
    assert main([*base, "--verify", "--wait", "60", "--interval", "0.5"]) == 0
    out = capsys.readouterr().out
    assert f"Reassignment of replica {topic_name}-0-1 completed successfully." in out
    assert f"Reassignment of replica {topic_name}-0-2 completed successfully." in out
    assert (Path(target2) / f"{topic_name}-0").is_dir()
    got = consume_assigned(cluster.bootstrap, topic_name, [0], 50)
    assert [m.value() for m in got] == [b"r%d" % i for i in range(50)]

"""``weir reassign --verify --wait`` follows a throttled move replica by replica, with log end
offsets and sizes read from the brokers' metrics endpoints (real brokers, subprocess CLI)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.conftest import wait_for
from tests.integration.clients import produce
from tests.integration.replication_checks import partition_leaders
from weir.ops.cluster import LocalCluster, free_port

pytestmark = pytest.mark.integration

WEIR = [sys.executable, "-m", "weir"]
RECORDS, SIZE = 3000, 1000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    metrics = {b: {"metrics.http.port": str(free_port())} for b in (1, 2, 3)}
    c = LocalCluster(tmp_path_factory.mktemp("reassign-progress"), brokers=3, port_base=0,
                     broker_overrides=metrics)
    try:
        c.start(timeout_s=90)
        yield c
    finally:
        c.stop()


def test_verify_shows_each_added_replica_catching_up(cluster, topic_name, tmp_path):
    cluster.zk().create_topic(topic_name, {0: [1]}, {})
    wait_for(lambda: partition_leaders(cluster.bootstrap, topic_name).get(0) == 1, 30,
             what="broker 1 leading")
    produce(cluster.bootstrap, topic_name, [b"x" * SIZE] * RECORDS)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [1, 3]}]}))
    base = [*WEIR, "reassign", "--bootstrap-server", cluster.bootstrap,
            "--reassignment-json-file", str(plan), "--zookeeper", cluster.zookeeper_connect]
    started = subprocess.run([*base, "--execute", "--throttle", "100000"], capture_output=True,
                             text=True, timeout=60, check=False)
    assert started.returncode == 0, started.stdout + started.stderr
    followed = subprocess.run([*base, "--verify", "--wait", "120", "--interval", "0.5"],
                              capture_output=True, text=True, timeout=180, check=False)
    out = followed.stdout
    assert followed.returncode == 0, out + followed.stderr
    snapshots = out.split("--- ")[1:]  # not a terminal: one stamped block per change
    progress = [re.search(rf"{topic_name}-0 -> broker 3 .*\(offsets (\d+)/(\d+), ", s)
                for s in snapshots]
    figures = [(int(m.group(1)), int(m.group(2))) for m in progress if m]
    assert figures, out
    assert all(total == RECORDS for _, total in figures)  # the leader's log end offset
    assert any(done < total for done, total in figures), out  # seen part way
    assert [d for d, _ in figures] == sorted(d for d, _ in figures)  # only forward
    assert "is still in progress" in snapshots[0]
    assert "is completed" in snapshots[-1] and "Throttle was removed." in out

    # for scripts; the cluster found through --data-dir (weir up's cluster.json)
    doc = subprocess.run([*WEIR, "reassign", "--verify", "--json", "--data-dir",
                          str(cluster.data_dir), "--reassignment-json-file", str(plan)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert doc.returncode == 0, doc.stdout + doc.stderr
    assert json.loads(doc.stdout) == {
        "done": True, "progress": [], "throttle_removed": False, "partitions": [
            {"topic": topic_name, "partition": 0, "status": "completed", "replicas": [1, 3],
             "target": [1, 3]}]}

"""LocalCluster against a real managed ZooKeeper, with stand-in broker processes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from weir.cli import main as cli
from weir.ops import procs
from weir.ops.cluster import LocalCluster

zkserver = pytest.importorskip("weir.coordination.zkserver")
pytest.importorskip("weir.coordination.zk")

MINI = Path(__file__).with_name("mini_broker.py")


@pytest.fixture(autouse=True)
def needs_zookeeper(monkeypatch):
    try:
        zkserver.find_zookeeper_classpath()
    except zkserver.ZooKeeperNotFound as exc:
        pytest.skip(str(exc))
    monkeypatch.setattr(procs, "broker_command", lambda config: [
        sys.executable, str(MINI), "weir", "broker", "start", "--config", str(config)])


@pytest.mark.integration
def test_real_zookeeper_lifecycle(tmp_path, capsys) -> None:
    cluster = LocalCluster(tmp_path, brokers=2, port_base=0)
    try:
        cluster.start(timeout_s=60)
        assert cluster.controller_id() in (1, 2)
        doc = json.loads((tmp_path / "cluster.json").read_text())
        assert doc["zookeeper"].endswith("/weir") and procs.pid_alive(doc["zookeeper_pid"])

        assert cli.main(["status", "--data-dir", str(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert "PLAINTEXT://127.0.0.1:" in out and "controller:" in out

        cluster.stop_broker(2, timeout_s=10)
        # another process's view: attaches to ZooKeeper (its own free ports for any broker
        # the data dir lacks: none here)
        again = LocalCluster(tmp_path, brokers=2, port_base=0)
        again.start(timeout_s=30)
        assert cluster.broker_pid(1) == again.broker_pid(1)
        assert again.broker_pid(2) is not None
        again.stop(timeout_s=10)
        assert not procs.pid_alive(doc["zookeeper_pid"])
        assert cluster.broker_pid(1) is None
    finally:
        cluster.stop(timeout_s=5)
        LocalCluster(tmp_path, brokers=2, port_base=0).stop(timeout_s=5)

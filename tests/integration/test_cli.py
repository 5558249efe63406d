"""The `weir` command as a user runs it: up --detach, status, kcat, down."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.integration

WEIR = [sys.executable, "-m", "weir"]


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*WEIR, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_status_kcat_down(tmp_path):
    data = tmp_path / "data"
    up = run("up", "--brokers", "2", "--port-base", "0", "--detach", "--data-dir", str(data))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        doc = json.loads((data / "cluster.json").read_text())
        assert set(doc) == {"zookeeper", "zookeeper_pid", "bootstrap", "first_broker_id",
                            "brokers"}
        assert [b["id"] for b in doc["brokers"]] == [1, 2]
        assert doc["zookeeper"].endswith("/weir")
        assert doc["bootstrap"] in up.stdout
        pids = [b["pid"] for b in doc["brokers"]] + [doc["zookeeper_pid"]]
        assert all(alive(p) for p in pids)

        status = run("status", "--data-dir", str(data))
        assert status.returncode == 0, status.stderr
        assert "controller" in status.stdout

        if shutil.which("kcat"):
            listing = subprocess.run(["kcat", "-b", doc["bootstrap"], "-L", "-m", "10"],
                                     capture_output=True, text=True, timeout=60, check=False)
            assert listing.returncode == 0, listing.stderr
            assert "2 brokers" in listing.stdout
            produced = subprocess.run(["kcat", "-b", doc["bootstrap"], "-P", "-t", "cli-topic"],
                                      input="one\ntwo\n", capture_output=True, text=True,
                                      timeout=60, check=False)
            assert produced.returncode == 0, produced.stderr
            consumed = subprocess.run(
                ["kcat", "-b", doc["bootstrap"], "-C", "-t", "cli-topic", "-o", "beginning",
                 "-e", "-q"], capture_output=True, text=True, timeout=60, check=False)
            assert consumed.stdout.split() == ["one", "two"], consumed.stderr
    finally:
        down = run("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    wait_for(lambda: not any(alive(p) for p in pids), 30, what="every process stopped")


def test_bad_config_value_stops_startup_naming_the_key(tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("broker.id=1\nzookeeper.connect=127.0.0.1:1\nnum.partitions=many\n")
    result = run("broker", "start", "--config", str(config), timeout=60)
    assert result.returncode != 0
    assert "num.partitions" in (result.stdout + result.stderr)

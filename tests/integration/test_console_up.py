"""`weir up --console` as a user runs it: the URL printed and recorded in cluster.json, the
brokers' metrics endpoints found by the console, and `weir down` stopping the console; a
second console with --allow-actions electing a preferred leader and reassigning a partition
through the real brokers."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request

import pytest

from tests.conftest import wait_for
from tests.integration.replication_checks import partition_leaders
from tests.integration.test_cli import WEIR, alive, run

pytestmark = pytest.mark.integration


def test_up_console_records_serves_and_down_stops_it(tmp_path):
    data = tmp_path / "data"
    up = run("up", "--console", "--brokers", "1", "--port-base", "0", "--detach",
             "--data-dir", str(data))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        doc = json.loads((data / "cluster.json").read_text())
        url, pid = doc["console"], doc["console_pid"]
        assert f"Console: {url}" in up.stdout and alive(pid)

        def state() -> dict | None:
            with urllib.request.urlopen(url + "api/state", timeout=5) as response:
                view = json.loads(response.read())
            brokers = view.get("brokers") or []
            ready = brokers and all(b["metrics"] for b in brokers)
            return view if ready else None

        view = wait_for(state, 30, interval_s=0.5, what="the console reading broker 1's metrics")
        assert [b["id"] for b in view["brokers"]] == [1]
        assert view["brokers"][0]["metrics"]["looplagcount"] > 0
        assert view["controller"]["id"] == 1 and view["controller"]["source"] == "zookeeper"
        assert post(url, "/api/elect", {})[0] == 403  # read-only
    finally:
        down = run("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    wait_for(lambda: not alive(pid), 15, what="the console stopped by weir down")
    assert "console" not in json.loads((data / "cluster.json").read_text())


def post(url: str, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url.rstrip("/") + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_actions_with_allow_actions(tmp_path):
    data = tmp_path / "data"
    up = run("up", "--brokers", "2", "--port-base", "0", "--detach", "--data-dir", str(data))
    console = None
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        created = run("topic", "create", "moved", "--partitions", "1", "--replication-factor",
                      "1", "--data-dir", str(data))
        assert created.returncode == 0, created.stderr
        console = subprocess.Popen(
            [*WEIR, "console", "--data-dir", str(data), "--port", "0", "--allow-actions"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = console.stdout.readline()
        match = re.search(r"http://[\d.]+:\d+/", line)
        assert match and "actions enabled" in line, line
        url = match.group(0)
        bootstrap = json.loads((data / "cluster.json").read_text())["bootstrap"]
        (leader,) = partition_leaders(bootstrap, "moved").values()
        target = 2 if leader == 1 else 1

        status, doc = post(url, "/api/reassign", {"topic": "moved", "partition": 0,
                                                  "replicas": [target]})
        assert status == 200 and doc["results"] == {"moved-0": None}, doc
        wait_for(lambda: partition_leaders(bootstrap, "moved").get(0) == target, 60,
                 interval_s=0.5, what="the reassignment moving the partition")
        status, doc = post(url, "/api/elect", {"partitions": [{"topic": "moved",
                                                               "partition": 0}]})
        assert status == 200, doc  # the preferred replica already leads: not needed
        assert doc["results"]["moved-0"].startswith("ELECTION_NOT_NEEDED"), doc
        assert post(url, "/api/reassign", {"topic": "moved"})[0] == 400
    finally:
        if console is not None:
            console.terminate()
            console.wait(timeout=15)
            console.stdout.close()
        run("down", "--data-dir", str(data))

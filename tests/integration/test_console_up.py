"""`weir up --console` as a user runs it: the URL printed and recorded in cluster.json, the
brokers' metrics endpoints found by the console, and `weir down` stopping the console."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.conftest import wait_for
from tests.integration.test_cli import alive, run

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
    finally:
        down = run("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    wait_for(lambda: not alive(pid), 15, what="the console stopped by weir down")
    assert "console" not in json.loads((data / "cluster.json").read_text())

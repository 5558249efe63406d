"""Run only by test_interrupted_run.py, in a pytest subprocess that it interrupts (its name
keeps it out of the suite's collection): a cluster started by ``weir up --detach`` and never
stopped by the test, as when a run is cut short between ``up`` and ``down``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import wait_for


def test_started_a_cluster_then_waits_to_be_interrupted(tmp_path):
    data = tmp_path / "data"
    up = subprocess.run([sys.executable, "-m", "weir", "up", "--brokers", "1", "--port-base",
                         "0", "--detach", "--data-dir", str(data)], capture_output=True,
                        text=True, timeout=120, check=False)
    assert up.returncode == 0, up.stdout + up.stderr
    doc = json.loads((data / "cluster.json").read_text())
    ready = Path(os.environ["WEIR_INTERRUPT_READY"])
    ready.write_text(json.dumps([doc["zookeeper_pid"], *(b["pid"] for b in doc["brokers"])]))
    # the interruption comes now; this bounded wait only ends the run if it does not
    wait_for(lambda: (ready.parent / "never").exists(), 120, what="an interruption")

"""Interrupting the test suite (SIGTERM, or Ctrl-C to the terminal's process group) leaves
no ZooKeeper or broker behind: a pytest subprocess runs interrupt_target.py, which starts a
cluster with ``weir up --detach`` and waits; it is interrupted mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.process_sweep import MARK, marked_pids, sweep
from weir.ops import procs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_an_interrupted_run_leaves_no_process_behind(tmp_path, how):
    ready = tmp_path / "ready.json"
    env = {k: v for k, v in os.environ.items() if k != MARK}
    env["WEIR_INTERRUPT_READY"] = str(ready)
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/integration/interrupt_target.py", "--basetemp", str(tmp_path / "inner")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    pids: list[int] = []
    try:
        wait_for(lambda: inner.poll() is not None or ready.exists(), 150,
                 what="the inner run's cluster")
        assert inner.poll() is None, inner.communicate()[0]
        pids = json.loads(wait_for(ready.read_text, 10, what="the pids"))
        assert all(procs.pid_alive(p) for p in pids)
        assert set(pids) <= set(marked_pids(str(inner.pid)))
        if how == "SIGTERM":
            inner.send_signal(signal.SIGTERM)
        else:  # what a terminal does on Ctrl-C: SIGINT to the foreground process group
            os.killpg(inner.pid, signal.SIGINT)
        out, _ = inner.communicate(timeout=60)
        assert inner.returncode == 2, out  # pytest's "interrupted", not killed by the signal
        assert "process(es) left running" in out  # the sweep found the detached cluster
        assert not any(procs.pid_alive(p) for p in pids), out
        assert marked_pids(str(inner.pid)) == []
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.communicate()
        sweep(str(inner.pid), grace_s=5)

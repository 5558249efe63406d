"""The log cleaner's worker processes do not outlive a broker killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

# A stand-in for the broker: it starts the cleaner's real pool, makes a worker exist,
# prints the worker's pid and waits to be killed.
_OWNER = """
import os, sys, time
from weir.storage.log_cleaner import new_worker_pool
pool = new_worker_pool(1)
print(pool.submit(os.getpid).result(timeout=60), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its (new) parent to reap it counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_worker_exits_when_its_broker_is_killed():
    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(owner.stdout.readline())
        assert _alive(worker)
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
        deadline = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), "the cleaner worker outlived its broker"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(30)
        if worker is not None and _alive(worker):
            os.kill(worker, signal.SIGKILL)

"""Local process liveness, shared by the managed ZooKeeper and the local-cluster tools."""

from __future__ import annotations

import os
from pathlib import Path


def proc_state(pid: int) -> str | None:
    """The one-letter state from /proc/<pid>/stat (None where /proc is unavailable)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


def pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` is a running process: it exists and is not a zombie (an exited,
    unreaped child); False for None and non-positive pids."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if proc_state(pid) != "Z":
        return True
    # A zombie thread-group leader is a process that is gone only once its other threads are:
    # while a multithreaded process (the JVM) exits, its leader already shows "Z" but the
    # process cannot be reaped yet, so its parent still sees it running.
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False

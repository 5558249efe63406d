"""Process helpers for the CLI: liveness, command lines, signalling with a deadline.

PIDs recorded in ``cluster.json`` may be stale (and reused by an unrelated process), so
nothing is signalled before its command line is checked to be one of ours.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from weir.processes import pid_alive

BROKER_ARGV = ("-m", "weir", "broker", "start", "--config")


def broker_command(config_path: str | os.PathLike[str]) -> list[str]:
    """The command line that runs one broker from its properties file."""
    return [sys.executable, *BROKER_ARGV, str(config_path)]


def pid_cmdline(pid: int) -> list[str] | None:
    """The argv of ``pid``, or None if it is gone or cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return [part.decode(errors="replace") for part in raw.split(b"\0") if part]
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
    except OSError:
        return None
    try:  # no /proc (macOS): ask ps; argument boundaries are lost, good enough to match
        out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True,
                             text=True, timeout=5, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.split() if out else None


def is_broker_process(pid: int | None, config_path: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``pid`` is alive and runs ``weir broker start`` (for ``config_path`` if given)."""
    if not pid_alive(pid):
        return False
    argv = pid_cmdline(pid) or []
    if not _contains(argv, ["weir", "broker", "start"]):
        return False
    if config_path is None:
        return True
    wanted = {str(config_path), str(Path(config_path).resolve())}
    return any(arg in wanted for arg in argv)


def is_zookeeper_process(pid: int | None) -> bool:
    """Whether ``pid`` is alive and looks like a ZooKeeper server (a JVM or a Python shim)."""
    if not pid_alive(pid):
        return False
    argv = pid_cmdline(pid) or []
    return any("zookeeper" in arg.lower() for arg in argv)


def _contains(argv: list[str], words: list[str]) -> bool:
    """Whether ``words`` appear in ``argv`` in order (the module may be '-m weir')."""
    it = iter(argv)
    return all(any(arg == w or arg.endswith("/" + w) for arg in it) for w in words)


def find_broker_pids(config_path: str | os.PathLike[str]) -> list[int]:
    """PIDs of running brokers started with ``config_path`` (Linux /proc scan)."""
    proc = Path("/proc")
    if not proc.exists():
        return []
    pids = []
    for entry in proc.iterdir():
        pid = int(entry.name) if entry.name.isdigit() else 0
        if pid and pid != os.getpid() and is_broker_process(pid, config_path):
            pids.append(pid)
    return sorted(pids)


def send_signal(pid: int, sig: int) -> bool:
    """Signal ``pid``; False when it no longer exists."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def wait_for_exit(pids: Iterable[int], timeout_s: float, popens: dict[int, subprocess.Popen]
                  | None = None) -> set[int]:
    """Poll until every pid has exited or the deadline passes; returns those still alive.

    Children we started (``popens``) are reaped so they do not linger as zombies.
    """
    popens = popens or {}
    remaining = set(pids)
    deadline = time.monotonic() + timeout_s
    while remaining:
        for pid in list(remaining):
            child = popens.get(pid)
            exited = child.poll() is not None if child is not None else not pid_alive(pid)
            if exited:
                remaining.discard(pid)
        if not remaining or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    return remaining


def terminate(pids: Iterable[int], timeout_s: float,
              popens: dict[int, subprocess.Popen] | None = None) -> list[int]:
    """SIGTERM each pid, wait up to ``timeout_s``, SIGKILL stragglers; returns those killed."""
    pids = [pid for pid in pids if send_signal(pid, signal.SIGTERM)]
    for pid in pids:
        send_signal(pid, signal.SIGCONT)  # a paused (SIGSTOP) process handles SIGTERM only now
    stragglers = wait_for_exit(pids, timeout_s, popens)
    for pid in stragglers:
        send_signal(pid, signal.SIGKILL)
    wait_for_exit(stragglers, 10.0, popens)
    return sorted(stragglers)

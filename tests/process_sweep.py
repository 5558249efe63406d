"""Nothing a test session started outlives it, even when the session is interrupted.

Each pytest process marks its environment with ``WEIR_TEST_SESSION=<its pid>``; every
process it starts inherits the mark (brokers, ZooKeeper and Spark JVMs, consoles, and the
brokers of a ``weir up --detach`` subprocess, which live in sessions of their own and are
re-parented to init when that subprocess exits).  SIGTERM becomes KeyboardInterrupt, so
pytest tears the fixtures down as after Ctrl-C; then :func:`sweep` stops (by pid) whatever
still carries the mark.  Linux only (``/proc``); elsewhere it does nothing.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

MARK = "WEIR_TEST_SESSION"


def mark_session() -> str:
    """Mark this process's environment (inherited by all it starts); returns the mark."""
    os.environ[MARK] = str(os.getpid())
    return os.environ[MARK]


def marked_pids(mark: str) -> list[int]:
    """Live processes (not this one) whose environment carries ``WEIR_TEST_SESSION=mark``."""
    wanted = f"{MARK}={mark}".encode()
    found = []
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:  # gone, or not ours to read
            continue
        if state != "Z" and wanted in environ.split(b"\0") and not _exits_with_us(entry):
            found.append(int(entry.name))
    return sorted(found)


def _exits_with_us(entry: Path) -> bool:
    """multiprocessing's resource tracker (started by process pools, e.g. the log cleaner's
    workers in unit tests) ends when this process does: not a process a test left behind."""
    try:
        return b"multiprocessing.resource_tracker" in (entry / "cmdline").read_bytes()
    except OSError:
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap() -> None:
    """Collect exited children of this process (zombies left by killed ones)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep(mark: str, grace_s: float = 10.0) -> list[int]:
    """SIGTERM every process carrying ``mark``, SIGKILL those alive after ``grace_s``;
    returns the pids it found."""
    pids = marked_pids(mark)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
        _signal(pid, signal.SIGCONT)  # a paused (SIGSTOP) broker handles SIGTERM only now
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap()
        if not set(marked_pids(mark)) & set(pids):
            break
        time.sleep(0.05)
    for pid in marked_pids(mark):  # stragglers, and anything a dying process started
        _signal(pid, signal.SIGKILL)
    _reap()
    return pids


def _command_line(pid: int) -> str:
    """The process' command line, shortened (a leak is found by what it runs)."""
    try:
        raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:160]


class SessionGuard:
    """Installed by the root conftest: mark, SIGTERM as KeyboardInterrupt, sweep at exit."""

    def __init__(self) -> None:
        self.mark = mark_session()
        self.swept = False
        self._terms = 0
        self.ensure_handler()

    def ensure_handler(self) -> None:
        """(Re)install the SIGTERM handler: an event loop closed by a test (a broker run
        in-process) resets its signals to the default."""
        if signal.getsignal(signal.SIGTERM) != self._on_sigterm:
            signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self._terms += 1
        if self._terms == 1:  # pytest tears down as after Ctrl-C, then sweep() runs
            raise KeyboardInterrupt("SIGTERM")
        self.finish(grace_s=2.0)  # asked again: stop now, still leaving nothing behind
        os._exit(128 + signum)

    def finish(self, grace_s: float = 10.0) -> None:
        if self.swept or os.environ.get(MARK) != self.mark:
            return
        self.swept = True
        named = {pid: _command_line(pid) for pid in marked_pids(self.mark)}
        left = sweep(self.mark, grace_s)
        if left:
            print(f"\nweir tests: stopped {len(left)} process(es) left running: "
                  + "; ".join(f"{pid} ({named.get(pid) or '?'})" for pid in left),
                  file=sys.stderr)

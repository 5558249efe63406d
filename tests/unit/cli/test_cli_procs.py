"""PID liveness, command-line checks and terminate-with-deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from cli_fakes import fake_broker_command

from weir import processes
from weir.ops import procs


@pytest.fixture
def children():
    started: list[subprocess.Popen] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)


def spawn(children: list, argv: list[str]) -> subprocess.Popen:
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    children.append(child)
    return child


def wait_until(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_pid_alive_self_and_nonsense() -> None:
    assert procs.pid_alive(os.getpid())
    assert not procs.pid_alive(None)
    assert not procs.pid_alive(0)
    assert not procs.pid_alive(-5)


def test_reaped_child_is_dead(children) -> None:
    child = spawn(children, [sys.executable, "-c", "pass"])
    child.wait(timeout=10)
    assert not procs.pid_alive(child.pid)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_zombie_counts_as_dead(children) -> None:
    child = spawn(children, [sys.executable, "-c", "pass"])
    wait_until(lambda: processes.proc_state(child.pid) == "Z")
    assert not procs.pid_alive(child.pid)


def test_is_broker_process_checks_cmdline(children, tmp_path) -> None:
    config = tmp_path / "server.properties"
    child = spawn(children, fake_broker_command(config))
    wait_until(lambda: "broker" in (procs.pid_cmdline(child.pid) or []))
    assert procs.is_broker_process(child.pid)
    assert procs.is_broker_process(child.pid, config)
    assert not procs.is_broker_process(child.pid, tmp_path / "other.properties")
    assert not procs.is_broker_process(os.getpid())  # pytest is not a broker
    if os.path.exists("/proc"):
        assert procs.find_broker_pids(config) == [child.pid]


def test_broker_command_shape(tmp_path) -> None:
    argv = procs.broker_command(tmp_path / "s.properties")
    assert argv == [sys.executable, "-m", "weir", "broker", "start", "--config",
                    str(tmp_path / "s.properties")]


def test_terminate_sigkills_after_timeout(children) -> None:
    code = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\nwhile True: time.sleep(0.05)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    children.append(child)
    assert child.stdout.readline().strip() == b"ready"
    killed = procs.terminate([child.pid], 0.3, {child.pid: child})
    assert killed == [child.pid]
    assert child.returncode == -signal.SIGKILL


def test_terminate_clean_exit_and_paused_process(children) -> None:
    child = spawn(children, [sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    os.kill(child.pid, signal.SIGSTOP)
    killed = procs.terminate([child.pid], 10, {child.pid: child})
    assert killed == []
    assert child.returncode == -signal.SIGTERM


def test_wait_for_exit_returns_survivors(children) -> None:
    child = spawn(children, [sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    assert procs.wait_for_exit([child.pid], 0.1) == {child.pid}
    assert not procs.send_signal(2**22 + 12345, 0) or True  # unknown pid: no exception

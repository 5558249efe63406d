"""``weir up`` / ``status`` / ``down`` as an operator runs them, on one detached cluster with a
console: a data dir inside it refused, a port in use named, attaching said and Ctrl-C leaving
the cluster running, the stopped broker and console restarted (the console on its port), and a
clean shutdown that logs no lost ZooKeeper session."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.integration.test_cli import WEIR, run
from weir.ops import procs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Started as a user would: ``make run ARGS="..."`` (the Makefile passes ARGS to weir up)."""
    data = tmp_path_factory.mktemp("up") / "data"
    args = f"--brokers 2 --console --port-base 0 --detach --data-dir {data}"
    up = subprocess.run(["make", "-s", "run", f"ARGS={args}"], cwd=ROOT, capture_output=True,
                        text=True, timeout=180, check=False)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "Started: ZooKeeper, broker 1, broker 2, the console." in up.stdout
        yield data
    finally:
        run("down", "--data-dir", str(data))


def state(data) -> dict:
    return json.loads((data / "cluster.json").read_text())


def test_a_data_dir_inside_the_running_cluster_is_refused(data):
    inside = data / "broker-1"
    result = run("up", "--brokers", "1", "--port-base", "0", "--detach", "--data-dir",
                 str(inside))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1
    assert f"lies inside the running cluster of {data}" in result.stderr
    assert not (inside / "zookeeper").exists() and not (inside / "cluster.json").exists()


def test_a_port_in_use_is_named_and_nothing_is_pinned(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("up", "--brokers", "1", "--port-base", str(port), "--detach",
                     "--data-dir", str(tmp_path / "d"), "--set", "log.retention.hour=1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"127.0.0.1:{port} (broker 1, from --port-base {port}) is already in use" \
        in result.stderr
    assert "Traceback" not in result.stderr
    assert "unknown broker config key 'log.retention.hour'" in result.stderr
    assert "did you mean 'log.retention.hours'?" in result.stderr
    assert not (tmp_path / "d" / "broker-1").exists()


def _processes_of(path: Path) -> list[int]:
    """PIDs whose command line names ``path`` (ZooKeeper: its zoo.cfg; brokers: their
    server.properties)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(path).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_ctrl_c_while_zookeeper_starts_leaves_no_process(tmp_path):
    """Ctrl-C before ZooKeeper answers: `weir up` stops the server it launched (its pid was
    recorded nowhere yet, and the JVM ran on, orphaned)."""
    data = tmp_path / "d"
    up = subprocess.Popen([*WEIR, "up", "--brokers", "1", "--port-base", "0", "--data-dir",
                           str(data)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True)
    try:
        zk = wait_for(lambda: _processes_of(data / "zookeeper" / "zoo.cfg"), 60,
                      interval_s=0.02, what="the ZooKeeper JVM launched")
        os.killpg(up.pid, signal.SIGINT)  # Ctrl-C in its terminal
        assert up.wait(timeout=60) == 130
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    try:
        wait_for(lambda: not any(procs.pid_alive(p) for p in zk), 20, what="ZooKeeper gone")
        assert not _processes_of(data), "a process of the interrupted cluster runs on"
    finally:
        for pid in _processes_of(data):
            os.kill(pid, signal.SIGKILL)


def test_up_piped_to_head_stops_the_cluster_it_started(tmp_path):
    """`weir up | head -3`: the reader goes away; a foreground cluster ends with its weir up
    (exit code 141, as SIGPIPE) instead of running on with nobody to stop it."""
    data = tmp_path / "d"
    up = subprocess.Popen([*WEIR, "up", "--brokers", "1", "--port-base", "0", "--data-dir",
                           str(data)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True)
    try:
        assert up.stdout.readline().startswith(b"Starting local cluster")
        up.stdout.close()  # what head does after its lines
        assert up.wait(timeout=120) == 141, up.stderr.read()
        assert up.stderr.read() == b""
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    try:
        wait_for(lambda: not _processes_of(data), 30, what="the cluster stopped")
    finally:
        for pid in _processes_of(data):
            os.kill(pid, signal.SIGKILL)


def test_up_attaches_restarts_what_stopped_and_ctrl_c_leaves_it_running(data):
    before = state(data)
    console_port = before["console_port"]
    assert before["console"] == f"http://127.0.0.1:{console_port}/"
    stopped = run("broker", "stop", "--id", "2", "--data-dir", str(data))
    assert stopped.returncode == 0, stopped.stderr
    os.kill(before["console_pid"], signal.SIGTERM)
    old = [before["brokers"][1]["pid"], before["console_pid"]]
    wait_for(lambda: not any(procs.pid_alive(p) for p in old), 30,
             what="broker 2 and the console stopped")

    status = run("status", "--data-dir", str(data))
    assert status.returncode == 0, status.stderr
    assert f"console: not running (port {console_port}; weir up restarts it)" in status.stdout
    assert "console" not in state(data)  # no dead URL kept as if it served

    up = subprocess.Popen([*WEIR, "up", "--data-dir", str(data)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(up.stdout), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any(line.startswith("--- ") for line in lines) or up.poll(), 120,
                 what="weir up showing the cluster")
        out = "".join(lines)
        assert up.poll() is None, out
        assert "Attaching to the cluster already running" in out
        assert "Restarted: broker 2, the console." in out
        assert f"Console: http://127.0.0.1:{console_port}/" in out  # the same port
        os.killpg(up.pid, signal.SIGINT)  # Ctrl-C in its terminal
        assert up.wait(timeout=60) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        reader.join(timeout=10)
    assert "Detached; the cluster keeps running" in "".join(lines)
    after = state(data)
    pids = [after["zookeeper_pid"], after["console_pid"], *(b["pid"] for b in after["brokers"])]
    assert all(procs.pid_alive(p) for p in pids), after
    assert [b["id"] for b in after["brokers"]] == [1, 2]  # no broker added by a plain up
    status = run("status", "--data-dir", str(data))
    assert f"console: http://127.0.0.1:{console_port}/ (pid {after['console_pid']})" \
        in status.stdout


def test_a_console_consumer_with_a_short_timeout_gets_its_records(data):
    """The throwaway group's first rebalance is not held back 3 s (Kafka's development
    server.properties sets group.initial.rebalance.delay.ms=0, and so does weir up), so
    --timeout-ms 2000 reads what is there instead of "Processed a total of 0 messages"."""
    assert "group.initial.rebalance.delay.ms=0" in (
        data / "broker-1" / "server.properties").read_text()
    where = ("--data-dir", str(data))
    assert run("topic", "create", "short-wait", "--replication-factor", "2", *where
               ).returncode == 0
    produced = subprocess.run([*WEIR, "produce", "--topic", "short-wait", *where],
                              input="a\nb\nc\n", capture_output=True, text=True, timeout=60,
                              check=False)
    assert produced.returncode == 0, produced.stderr
    consumed = run("consume", "--topic", "short-wait", "--from-beginning", "--timeout-ms",
                   "2000", *where)
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.split()) == ["a", "b", "c"], consumed.stdout + consumed.stderr
    assert "Processed a total of 3 messages" in consumed.stderr


def test_down_stops_everything_and_a_clean_shutdown_loses_no_session(data):
    doc = state(data)
    pids = [doc["zookeeper_pid"], doc["console_pid"], *(b["pid"] for b in doc["brokers"])]
    down = run("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    wait_for(lambda: not any(procs.pid_alive(p) for p in pids), 30, what="every process gone")
    for broker in (1, 2):
        log = (data / f"broker-{broker}" / "broker.log").read_text(errors="replace")
        assert "stopped cleanly" in log
        assert "session lost" not in log, broker
    assert "console" not in state(data) and state(data)["console_port"]

"""The verifier's parts that need no cluster: schedule, CLI types, proxy, replicas, report."""

from __future__ import annotations

import argparse
import socket
import threading
import time

import pytest

from tests.unit.verify.test_checker import clean
from weir.verify.checker import check
from weir.verify.cli import duration, fault_list
from weir.verify.history import History, read_history
from weir.verify.nemesis import FAULTS, schedule
from weir.verify.proxy import CLIENT, ProxyNet
from weir.verify.replicas import replica_report
from weir.verify.report import write_report


def test_schedule_is_seeded_and_covers_every_fault_first():
    a = schedule(5, list(FAULTS), windows=8, brokers=3)
    assert a == schedule(5, list(FAULTS), windows=8, brokers=3)
    assert a != schedule(6, list(FAULTS), windows=8, brokers=3)
    assert sorted(s.fault for s in a[:len(FAULTS)]) == sorted(FAULTS)
    assert all(0 <= s.target < 3 and s.hold_s > 0 for s in a)
    assert all(s.mode in ("kill", "pause") for s in a if s.fault in ("controller", "zookeeper"))
    assert schedule(1, [], windows=3, brokers=3) == []


def test_cli_types():
    assert duration("5m") == 300 and duration("90s") == 90 and duration("1m30s") == 90
    assert duration("45") == 45
    with pytest.raises(argparse.ArgumentTypeError):
        duration("soon")
    assert fault_list("all") == list(FAULTS) and fault_list("none") == []
    assert fault_list("kill,partition") == ["kill", "partition"]
    with pytest.raises(argparse.ArgumentTypeError):
        fault_list("kill,flood")


def test_history_round_trip(tmp_path):
    h = History()
    i = h.invoke("writer", "send", {"partition": 0, "value": "v-0"})
    h.complete("writer", "ok", "send", i, {"partition": 0, "offset": 0, "value": "v-0"})
    ops = read_history(h.write(tmp_path / "h.jsonl"))
    assert [op["type"] for op in ops] == ["invoke", "ok"] and ops[0]["id"] == ops[1]["id"]


@pytest.fixture
def echo_server():
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=lambda c=conn: _echo(c), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(2)
    srv.close()


def _echo(conn):
    with conn:
        while data := conn.recv(4096):
            conn.sendall(data)


def _roundtrip(sock, payload, timeout_s):
    sock.settimeout(timeout_s)
    sock.sendall(payload)
    try:
        return sock.recv(4096)
    except TimeoutError:
        return None


def test_proxy_partition_holds_bytes_until_healed(echo_server):
    net = ProxyNet()
    try:
        proxy = net.add("broker-1", 1, echo_server)
        with socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=5) as sock:
            assert _roundtrip(sock, b"hello", 5) == b"hello"
            net.isolate(1)
            assert _roundtrip(sock, b"lost?", 0.5) is None  # blackholed, not refused
            net.heal(1)
            sock.settimeout(5)
            assert sock.recv(4096) == b"lost?"  # held, then delivered after healing
        # a client's connection to a broker that is not isolated is untouched
        net.isolate(2)
        with socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=5) as sock:
            assert _roundtrip(sock, b"ok", 5) == b"ok"
        assert net.isolated == {2} and CLIENT not in net.isolated
    finally:
        net.close()


def test_proxy_identifies_a_brokers_outgoing_connection(echo_server):
    """A connection opened by a process in pids() is that broker's: isolating it cuts it."""
    import os

    net = ProxyNet(pids=lambda: {os.getpid(): 3})  # this process plays broker 3
    try:
        proxy = net.add("broker-1", 1, echo_server)
        net.isolate(3)
        with socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=5) as sock:
            assert _roundtrip(sock, b"x", 0.7) is None
            net.heal()
            sock.settimeout(5)
            deadline = time.monotonic() + 5
            got = b""
            while got != b"x" and time.monotonic() < deadline:
                got += sock.recv(10)
            assert got == b"x"
    finally:
        net.close()


def test_replica_report_finds_divergence(tmp_path):
    from weir.records.builder import build_batch  # built by Weir's own batch writer

    def write(broker, values, hw):
        d = tmp_path / f"b{broker}"
        (d / "t-0").mkdir(parents=True)
        data = b"".join(build_batch([v], base_offset=i) for i, v in enumerate(values))
        (d / "t-0" / "00000000000000000000.log").write_bytes(data)
        (d / "replication-offset-checkpoint").write_text(f"0\n1\nt 0 {hw}\n")
        return d

    same = replica_report({1: write(1, [b"a", b"b", b"c"], 3),
                           2: write(2, [b"a", b"b", b"c", b"d"], 4)}, "t", 0)
    assert same["first_diff"] is None and same["hw"] == 3
    diff = replica_report({3: write(3, [b"a", b"x", b"c"], 3),
                           4: write(4, [b"a", b"b", b"c"], 3)}, "t", 0)
    assert diff["first_diff"] == 1


def test_report_files(tmp_path):
    pytest.importorskip("matplotlib")
    ops = clean().ops
    result = check(ops)
    index = write_report(tmp_path, ops, result, {"workload": "produce-consume",
                                                 "nemesis": ["kill"], "seed": 1})
    names = {p.name for p in tmp_path.iterdir()}
    assert {"index.html", "latency.png", "throughput.png", "results.json",
            "summary.md"} <= names
    assert "latency.png" in index.read_text()
    assert "| kill |" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("planted, code", [(False, 0), (True, 1)])
def test_cli_exit_status(monkeypatch, tmp_path, capsys, planted, code):
    """`weir verify` exits 1 on any anomaly, 0 otherwise; the options reach the runner."""
    from weir.cli.main import main
    from weir.verify import runner

    seen = {}

    def fake_run(opts):
        seen["opts"] = opts
        ops = clean().ops
        if planted:
            ops[-1]["value"]["partitions"][0]["first_diff"] = 1
        return runner.Outcome(check(ops), tmp_path / "history.jsonl", tmp_path / "index.html",
                              [])

    monkeypatch.setattr(runner, "run", fake_run)
    assert main(["verify", "--duration", "2m", "--seed", "9", "--nemesis", "kill,pause",
                 "--report", str(tmp_path)]) == code
    opts = seen["opts"]
    assert (opts.duration_s, opts.seed, opts.nemesis) == (120, 9, ["kill", "pause"])
    out = capsys.readouterr().out
    assert ("ANOMALY replica-divergence: 1" in out) == planted


def test_cli_bootstrap_defaults_to_no_faults(monkeypatch, tmp_path):
    from weir.cli.main import main
    from weir.verify import runner

    seen = {}
    monkeypatch.setattr(runner, "run", lambda opts: seen.setdefault("opts", opts) and
                        runner.Outcome(check(clean().ops), tmp_path, tmp_path, []))
    assert main(["verify", "--bootstrap", "127.0.0.1:1", "--duration", "1s"]) == 0
    assert seen["opts"].nemesis == [] and seen["opts"].bootstrap == "127.0.0.1:1"

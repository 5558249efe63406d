"""The `weir` command: argument parsing and each subcommand with fakes."""

from __future__ import annotations

import json
import signal
import types

import pytest
from cli_fakes import FakeZk, FakeZooKeeperServer, broker, fake_broker_command

from weir.cli import main as cli
from weir.cli import up as up_mod
from weir.coordination import zkserver
from weir.ops import cluster as cluster_mod
from weir.ops import procs

GOOD = "broker.id=0\nzookeeper.connect=127.0.0.1:2181/weir\nlisteners=PLAINTEXT://127.0.0.1:0\n"


def test_parser_defaults() -> None:
    args = cli.build_parser().parse_args(["up"])
    assert (args.brokers, args.data_dir, args.port_base, args.detach, args.overrides) == (
        None, "./weir-data", None, False, [])  # None: 9092, not given (a data dir's port wins)
    args = cli.build_parser().parse_args(
        ["up", "--brokers", "5", "--detach", "--set", "num.partitions=3", "--set", "a.b = c=d"])
    assert args.brokers == 5 and args.detach
    assert args.overrides == [("num.partitions", "3"), ("a.b", "c=d")]
    assert cli.build_parser().parse_args(["down"]).data_dir == "./weir-data"
    args = cli.build_parser().parse_args(["status", "--zookeeper", "zk:1/weir"])
    assert args.zookeeper == "zk:1/weir" and args.data_dir is None
    args = cli.build_parser().parse_args(["broker", "stop", "--id", "2", "--data-dir", "d"])
    assert (args.broker_command, args.id, args.config, args.data_dir) == ("stop", 2, None, "d")


@pytest.mark.parametrize("argv", [
    [], ["up", "--set", "novalue"], ["up", "--brokers", "x"], ["broker"],
    ["broker", "start"], ["broker", "stop"], ["broker", "stop", "--id", "1", "--config", "f"],
    ["status", "--data-dir", "d", "--zookeeper", "z"], ["nope"],
])
def test_parser_rejects(argv, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2


@pytest.mark.parametrize("argv", [
    ["topic", "list"], ["group", "list"], ["config", "get", "--topic", "t"],
    ["consume", "--topic", "t"], ["produce", "--topic", "t"], ["status"],
    ["reassign", "--verify", "--reassignment-json-file", "p.json"], ["console"],
])
def test_an_empty_bootstrap_server_is_a_usage_error(argv, tmp_path, capsys) -> None:
    """`--bootstrap-server "$UNSET"` never falls back to the cluster in --data-dir."""
    (tmp_path / "cluster.json").write_text(json.dumps({"bootstrap": "127.0.0.1:9"}))
    flags = ["--bootstrap-server", " "] + ([] if argv == ["status"] else
                                           ["--data-dir", str(tmp_path)])
    try:
        code = cli.main([*argv, *flags])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --bootstrap-server: expected HOST:PORT" in err, err
    assert "empty value" in err


def test_status_on_a_closed_zookeeper_port_fails_at_once(capsys) -> None:
    """Every server refusing is said at once, by address, not as a "Connection time-out"
    after --timeout (the client retried a port where nothing listens)."""
    import time

    from weir.ports import free_port

    port = free_port()
    began = time.monotonic()
    assert cli.main(["status", "--zookeeper", f"127.0.0.1:{port}/weir", "--timeout", "8"]) == 1
    assert time.monotonic() - began < 4
    err = capsys.readouterr().err
    assert err == (f"weir: cannot reach ZooKeeper at 127.0.0.1:{port}/weir: NETWORK_EXCEPTION: "
                   f"127.0.0.1:{port}: Connection refused\n")


def test_broker_start_config_error_exits_2(tmp_path, capsys) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=-3\nzookeeper.connect=zk:1\n")
    assert cli.main(["broker", "start", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "broker.id" in err and "-3" in err


def test_broker_start_missing_file_exits_2(tmp_path, capsys) -> None:
    assert cli.main(["broker", "start", "--config", str(tmp_path / "nope")]) == 2


def test_broker_start_runs_broker(tmp_path, monkeypatch) -> None:
    path = tmp_path / "server.properties"
    path.write_text(GOOD)
    seen = []
    fake = types.ModuleType("weir.server.broker")
    fake.run_broker = lambda cfg: seen.append(cfg) or 7
    monkeypatch.setitem(__import__("sys").modules, "weir.server.broker", fake)
    assert cli.main(["broker", "start", "--config", str(path)]) == 7
    assert seen[0].broker_id == 0


def test_up_rejects_bad_override_before_starting(tmp_path, capsys) -> None:
    code = cli.main(["up", "--data-dir", str(tmp_path), "--set", "num.partitions=0"])
    assert code == 2
    assert "num.partitions" in capsys.readouterr().err
    assert not (tmp_path / "cluster.json").exists()


@pytest.fixture
def fakes(monkeypatch):
    FakeZooKeeperServer.running.clear()
    zk = FakeZk(brokers=[broker(1), broker(2)], controller=2, epoch=2,
                topics={"t": {0: [1, 2]}})
    monkeypatch.setattr(zkserver, "ZooKeeperServer", FakeZooKeeperServer)
    monkeypatch.setattr(cluster_mod, "open_zk", lambda connect: zk)
    monkeypatch.setattr(up_mod, "open_zk", lambda connect, **kw: zk)
    monkeypatch.setattr(procs, "broker_command", fake_broker_command)
    return zk


def test_up_detach_status_stop_down(tmp_path, fakes, capsys) -> None:
    data = tmp_path / "d"
    assert cli.main(["up", "--detach", "--brokers", "2", "--port-base", "0",
                     "--timeout", "10", "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    doc = json.loads((data / "cluster.json").read_text())
    assert f"Bootstrap servers: {doc['bootstrap']}" in out
    assert [b["id"] for b in doc["brokers"]] == [1, 2]
    pids = [b["pid"] for b in doc["brokers"]]
    try:
        assert cli.main(["status", "--data-dir", str(data)]) == 0
        out = capsys.readouterr().out
        assert "controller: 2 (epoch 2)" in out and str(pids[0]) in out
        assert cli.main(["status", "--zookeeper", "127.0.0.1:1/weir"]) == 0
        assert "pid" not in capsys.readouterr().out.splitlines()[0]

        assert cli.main(["broker", "stop", "--id", "2", "--data-dir", str(data)]) == 0
        assert procs.wait_for_exit([pids[1]], 5) == set()
        assert cli.main(["broker", "stop", "--id", "2", "--data-dir", str(data)]) == 1
        config0 = doc["brokers"][0]["config"]
        if procs.find_broker_pids(config0):  # /proc scan available
            assert cli.main(["broker", "stop", "--config", config0]) == 0
            assert procs.wait_for_exit([pids[0]], 5) == set()
        capsys.readouterr()
        assert cli.main(["down", "--data-dir", str(data)]) == 0
        assert procs.wait_for_exit(pids, 5) == set()
        assert capsys.readouterr().out == "Stopped.\n"
        assert cli.main(["down", "--data-dir", str(data)]) == 0  # again: says so, no error
        assert capsys.readouterr().out == (f"Nothing was running in {data}: the cluster was "
                                           "already stopped.\n")
    finally:
        for pid in pids:
            if procs.is_broker_process(pid):
                procs.send_signal(pid, signal.SIGKILL)
        procs.wait_for_exit(pids, 5)


def test_down_and_status_without_cluster(tmp_path, capsys) -> None:
    assert cli.main(["down", "--data-dir", str(tmp_path)]) == 1
    assert cli.main(["status", "--data-dir", str(tmp_path)]) == 1
    assert "no cluster" in capsys.readouterr().err


def test_status_unreachable_zookeeper(monkeypatch, capsys) -> None:
    def refuse(connect, **kw):
        raise ConnectionError("refused")

    monkeypatch.setattr(up_mod, "open_zk", refuse)
    assert cli.main(["status", "--zookeeper", "127.0.0.1:1"]) == 1
    assert "cannot reach ZooKeeper" in capsys.readouterr().err


def test_up_foreground_shows_status_then_stops_on_ctrl_c(tmp_path, fakes, monkeypatch,
                                                         capsys) -> None:
    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(up_mod, "time", types.SimpleNamespace(sleep=interrupt, strftime=str))
    data = tmp_path / "d"
    assert cli.main(["up", "--brokers", "2", "--port-base", "0", "--timeout", "10",
                     "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert "bootstrap:" in out and "controller: 2 (epoch 2)" in out and "Stopped." in out
    pids = [b["pid"] for b in json.loads((data / "cluster.json").read_text())["brokers"]]
    assert all(not procs.is_broker_process(pid) for pid in pids)


def test_up_on_a_running_cluster_attaches_and_ctrl_c_detaches(tmp_path, fakes, monkeypatch,
                                                              capsys) -> None:
    data = tmp_path / "d"
    assert cli.main(["up", "--detach", "--brokers", "2", "--port-base", "0", "--timeout", "10",
                     "--data-dir", str(data)]) == 0
    assert "Started: ZooKeeper, broker 1, broker 2." in capsys.readouterr().out
    pids = [b["pid"] for b in json.loads((data / "cluster.json").read_text())["brokers"]]

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(up_mod, "time", types.SimpleNamespace(sleep=interrupt, strftime=str))
    try:
        assert cli.main(["up", "--data-dir", str(data), "--timeout", "10"]) == 0
        out = capsys.readouterr().out
        assert f"Attaching to the cluster already running in {data.resolve()}: Ctrl-C " \
               "detaches" in out
        assert "Every process was running: nothing restarted." in out
        assert "Detached; the cluster keeps running" in out and "Stopped." not in out
        assert all(procs.is_broker_process(pid) for pid in pids)
    finally:
        assert cli.main(["down", "--data-dir", str(data), "--timeout", "5"]) == 0
    assert all(not procs.is_broker_process(pid) for pid in pids)


def test_up_on_a_running_cluster_says_what_it_added_and_what_brokers_does_not_do(
        tmp_path, fakes, capsys) -> None:
    """A larger --brokers adds brokers (said as added, not as restarted); a smaller one
    removes none, and a note says so instead of silence."""
    data = tmp_path / "d"
    where = ["--detach", "--port-base", "0", "--timeout", "10", "--data-dir", str(data)]
    try:
        assert cli.main(["up", "--brokers", "1", *where]) == 0
        capsys.readouterr()
        assert cli.main(["up", "--brokers", "2", *where]) == 0
        out = capsys.readouterr().out
        assert "Added: broker 2.\n" in out and "Restarted" not in out, out
        assert "nothing restarted" not in out
        assert cli.main(["up", "--brokers", "1", *where]) == 0
        out = capsys.readouterr().out
        assert (f"Note: --brokers 1: {data.resolve()} has 2 brokers (1, 2); weir up runs every "
                "broker of its data dir and removes none") in out, out
        assert "Every process was running: nothing restarted." in out
    finally:
        assert cli.main(["down", "--data-dir", str(data), "--timeout", "5"]) == 0


def test_status_of_stopped_cluster(tmp_path, capsys) -> None:
    doc = {"zookeeper": "127.0.0.1:1/weir", "zookeeper_pid": 0, "bootstrap": "", "brokers": []}
    (tmp_path / "cluster.json").write_text(json.dumps(doc))
    assert cli.main(["status", "--data-dir", str(tmp_path)]) == 1
    assert "not running" in capsys.readouterr().err

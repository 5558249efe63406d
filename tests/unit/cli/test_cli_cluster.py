"""LocalCluster with a fake ZooKeeper and sleeping stand-in broker processes."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
from cli_fakes import FakeZk, FakeZooKeeperServer, broker, fake_broker_command

from weir import processes
from weir.config import BrokerConfig, read_properties
from weir.coordination import zkserver
from weir.ops import cluster as cluster_mod
from weir.ops import procs
from weir.ops.cluster import ClusterError, LocalCluster
from weir.ports import free_port


def _free_base(count: int) -> int:
    """A port base whose ``count`` consecutive loopback ports bind now: Kafka's usual 19092
    may be held by a developer's cluster or another test run."""
    def binds(port: int) -> bool:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    for _ in range(100):
        base = free_port()
        if all(binds(base + i) for i in range(1, count)):
            return base
    pytest.fail(f"no {count} consecutive free loopback ports")


@pytest.fixture
def env(monkeypatch, tmp_path):
    """Fake ZooKeeper server + client; broker processes are sleepers with a broker cmdline."""
    FakeZooKeeperServer.running.clear()
    zk = FakeZk(brokers=[broker(i) for i in range(1, 6)], controller=1)
    monkeypatch.setattr(zkserver, "ZooKeeperServer", FakeZooKeeperServer)
    monkeypatch.setattr(cluster_mod, "open_zk", lambda connect: zk)
    monkeypatch.setattr(procs, "broker_command", fake_broker_command)
    made: list[LocalCluster] = []

    def make(*args, **kwargs) -> LocalCluster:
        c = LocalCluster(tmp_path / "data", *args, **kwargs)
        made.append(c)
        return c

    make.zk = zk
    make.dir = tmp_path / "data"
    yield make
    for c in made:  # never leave a sleeper behind
        ours = [s.pid for s in c.brokers if procs.is_broker_process(s.pid)]
        for pid in ours:
            os.kill(pid, signal.SIGKILL)
        procs.wait_for_exit(ours, 5, c._popens)
        for child in c._popens.values():
            child.wait(timeout=5)


def test_start_writes_configs_and_cluster_json(env) -> None:
    base = _free_base(3)
    c = env(brokers=3, port_base=base, overrides={"num.partitions": "4"}).start(timeout_s=10)
    data = env.dir.resolve()
    doc = json.loads((data / "cluster.json").read_text())
    assert set(doc) == {"zookeeper", "zookeeper_pid", "bootstrap", "first_broker_id", "brokers"}
    assert doc["first_broker_id"] == 1
    assert doc["zookeeper"].startswith("127.0.0.1:") and doc["zookeeper"].endswith("/weir")
    assert doc["zookeeper_pid"] == os.getpid()  # the fake ZooKeeper "runs" in pytest
    assert doc["bootstrap"] == f"127.0.0.1:{base},127.0.0.1:{base + 1},127.0.0.1:{base + 2}"
    assert c.bootstrap == doc["bootstrap"]
    assert [entry["id"] for entry in doc["brokers"]] == [1, 2, 3]  # ids 1..N
    for i, entry in enumerate(doc["brokers"], start=1):
        assert set(entry) == {"id", "host", "port", "pid", "config", "started"}
        assert entry["started"]  # registered once: its port is settled
        assert (entry["id"], entry["host"], entry["port"]) == (i, "127.0.0.1", base + i - 1)
        assert entry["config"] == str(data / f"broker-{i}" / "server.properties")
        assert procs.is_broker_process(entry["pid"], entry["config"])
        assert c.broker_pid(i) == entry["pid"]
        cfg = BrokerConfig.from_file(entry["config"])
        assert cfg.broker_id == i and cfg.listener_port == base + i - 1
        assert cfg.zookeeper_connect == doc["zookeeper"]
        assert cfg.zookeeper_session_timeout_ms == 6000
        assert cfg.log_dir_paths == [data / f"broker-{i}" / "logs"]
        assert cfg.num_partitions == 4 and cfg.offsets_topic_replication_factor == 3
    assert c.controller_id() == 1
    assert "starting broker 1" in (data / "broker-1" / "broker.log").read_text()
    c.stop(timeout_s=5)
    assert all(not procs.pid_alive(e["pid"]) for e in doc["brokers"])
    assert FakeZooKeeperServer.running == {}


def test_broker_ids_can_start_at_zero_and_stay_there_on_restart(env) -> None:
    """Kafka's quickstart numbers brokers from 0: ids, ports and a restart without the
    option keep to 0..N-1 (broker 0 is never mistaken for "no broker")."""
    base = _free_base(2)
    env.zk.brokers = [broker(i, base + 1) for i in range(3)]
    env.zk.controller = 0
    c = env(brokers=2, port_base=base, first_broker_id=0).start(timeout_s=10)
    doc = json.loads((env.dir / "cluster.json").read_text())
    assert doc["first_broker_id"] == 0
    assert [(e["id"], e["port"]) for e in doc["brokers"]] == [(0, base), (1, base + 1)]
    assert BrokerConfig.from_file(c.config_path(0)).broker_id == 0
    assert c.broker_pid(0) is not None and c.controller_id() == 0
    c.stop(timeout_s=5)
    again = env(brokers=2, port_base=base).start(timeout_s=10)
    assert again.broker_ids == [0, 1] and again.broker_pid(0) is not None
    again.stop(timeout_s=5)
    with pytest.raises(ValueError):
        LocalCluster(env.dir, first_broker_id=-1)


def test_restart_keeps_config_files_and_running_brokers(env) -> None:
    first = env(brokers=2, port_base=0).start(timeout_s=10)
    ports = [s.port for s in first.brokers]
    assert len(set(ports)) == 2 and all(p > 0 for p in ports)
    path = first.config_path(2)
    path.write_text(path.read_text() + "# my note\nlog.retention.hours=1\n")
    pid1 = first.broker_pid(1)
    first.kill_broker(2)
    assert first.broker_pid(2) is None

    second = env(brokers=2, port_base=0, overrides={"min.insync.replicas": "2"})
    second.start(timeout_s=10)
    assert second.broker_pid(1) == pid1  # still running: not restarted
    assert second.broker_pid(2) not in (None, pid1)
    assert [s.port for s in second.brokers] == ports  # kept from the files
    props = read_properties(path)
    assert props["log.retention.hours"] == "1" and props["min.insync.replicas"] == "2"
    assert "# my note" in path.read_text()
    assert read_properties(second.config_path(1))["min.insync.replicas"] == "2"
    second.stop(timeout_s=5)
    assert first.broker_pid(1) is None


def test_down_from_another_instance_and_stale_pids(env) -> None:
    env(brokers=2, port_base=0).start(timeout_s=10)
    other = env()  # reads cluster.json, like `weir down` in another process
    pids = [s.pid for s in other.brokers]
    assert [other.broker_pid(i) for i in (1, 2)] == pids
    other.stop(timeout_s=5)
    assert procs.wait_for_exit(pids, 5) == set()

    doc = json.loads((env.dir / "cluster.json").read_text())
    assert doc["brokers"][0]["id"] == 1
    doc["brokers"][0]["pid"] = os.getpid()  # a live process that is not a broker
    (env.dir / "cluster.json").write_text(json.dumps(doc))
    stale = env()
    assert stale.broker_pid(1) is None
    stale.stop(timeout_s=1)  # must not signal pytest itself


def test_kill_pause_resume_start(env) -> None:
    c = env(brokers=1, port_base=0).start(timeout_s=10)
    pid = c.pause_broker(1)
    if Path("/proc").exists():
        deadline = time.monotonic() + 5
        while processes.proc_state(pid) != "T":
            assert time.monotonic() < deadline
            time.sleep(0.02)
    c.resume_broker(1)
    c.kill_broker(1, signal.SIGKILL)
    assert c.broker_pid(1) is None
    with pytest.raises(ClusterError):
        c.pause_broker(1)
    new_pid = c.start_broker(1)
    assert new_pid != pid and c.broker_pid(1) == new_pid
    assert json.loads(c.cluster_file.read_text())["brokers"][0]["pid"] == new_pid
    c.wait_for_brokers([1], timeout_s=1)
    c.stop_broker(1, timeout_s=5)
    assert c.broker_pid(1) is None
    c.stop()


def test_broker_that_exits_fails_start_with_its_log(env, monkeypatch) -> None:
    def crashing(config_path):
        return [sys.executable, "-c", "import sys; print('boom: bad thing'); sys.exit(3)"]

    monkeypatch.setattr(procs, "broker_command", crashing)
    env.zk.brokers = []
    c = env(brokers=1, port_base=0)
    with pytest.raises(ClusterError, match="(?s)exited with code 3.*boom: bad thing"):
        c.start(timeout_s=10)
    c.stop()


def test_broker_that_cannot_bind_names_the_address_not_a_traceback(env, monkeypatch) -> None:
    def taken(config_path):  # a port taken between weir up's check and the broker's bind
        code = ("import sys; print('Traceback ...\\nOSError: [Errno 98] error while "
                "attempting to bind: address already in use'); sys.exit(1)")
        return [sys.executable, "-c", code]

    monkeypatch.setattr(procs, "broker_command", taken)
    env.zk.brokers = []
    c = env(brokers=1, port_base=0)
    with pytest.raises(ClusterError) as info:
        c.start(timeout_s=10)
    port = c.brokers[0].port
    assert f"broker 1 could not listen on 127.0.0.1:{port}: the address is already in use" \
        in str(info.value)
    assert "Traceback" not in str(info.value)
    c.stop()


def test_wait_for_brokers_times_out(env) -> None:
    env.zk.brokers = [broker(1)]
    c = env(brokers=2, port_base=0)
    with pytest.raises(TimeoutError, match=r"brokers \[2\] did not register"):
        c.start(timeout_s=0.5)
    c.stop(timeout_s=5)


def test_wanted_ids_include_existing_broker_dirs(env) -> None:
    (env.dir / "broker-4").mkdir(parents=True)
    (env.dir / "broker-4" / "server.properties").write_text("broker.id=4\n")
    assert env(brokers=2).wanted_ids() == [1, 2, 4]


def test_invalid_broker_count(env) -> None:
    with pytest.raises(ValueError):
        env(brokers=0)


def test_wait_ignores_registration_left_by_a_killed_process(env) -> None:
    env.zk.brokers = []
    c = env(brokers=1, port_base=0)
    c._ensure_zookeeper()
    c.start_broker(1)
    env.zk.brokers = [dataclasses.replace(broker(1), epoch=100)]  # it registers
    c.wait_for_brokers([1], timeout_s=1)
    c.kill_broker(1)
    t0 = time.monotonic()
    c.start_broker(1, stale_wait_s=0.3)  # the old registration (epoch 100) does not expire
    assert time.monotonic() - t0 >= 0.3
    with pytest.raises(TimeoutError):
        c.wait_for_brokers([1], timeout_s=0.3)
    env.zk.brokers = [dataclasses.replace(broker(1), epoch=200)]  # the new process registered
    c.wait_for_brokers([1], timeout_s=1)
    c.stop(timeout_s=5)


def test_start_broker_waits_for_stale_registration_to_expire(env) -> None:
    env.zk.brokers = []
    c = env(brokers=1, port_base=0)
    c._ensure_zookeeper()
    c.start_broker(1)
    c.kill_broker(1)
    calls = []
    old = dataclasses.replace(broker(1), epoch=100)

    def expiring() -> list:  # the old session expires after a few polls
        calls.append(1)
        return [old] if len(calls) < 4 else []

    env.zk.get_all_brokers = expiring
    c.start_broker(1, stale_wait_s=5)  # bounded even if it never saw the expiry
    assert len(calls) == 4 and c._stale_epochs == {}
    c.stop(timeout_s=5)


# -- weir up's checks and reports ---------------------------------------------------------


def test_port_in_use_is_named_before_anything_is_written(env) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ClusterError, match=rf"127\.0\.0\.1:{port} \(broker 1, from "
                                               rf"--port-base {port}\) is already in use"):
            env(brokers=2, port_base=port).start(timeout_s=10)
    assert not env.dir.exists()  # nothing written, nothing pinned


def test_explicit_port_base_moves_a_broker_that_never_started(env) -> None:
    from weir.ports import free_port

    failed = env(brokers=1, port_base=free_port())
    failed._ensure_zookeeper()  # what a first start that failed leaves: a config, not started
    failed.write_config(1)
    failed.save_state()
    assert not json.loads(failed.cluster_file.read_text())["brokers"][0]["started"]

    port = free_port()
    again = env(brokers=1, port_base=port)
    again.port_base_explicit = True
    again.start(timeout_s=10)
    assert again.brokers[0].port == port and again.notes == []
    assert read_properties(again.config_path(1))["listeners"] == f"PLAINTEXT://127.0.0.1:{port}"
    again.stop(timeout_s=5)

    # once started, the data dir's port wins, and weir up says so
    later = env(brokers=1, port_base=free_port())
    later.port_base_explicit = True
    later.start(timeout_s=10)
    assert later.brokers[0].port == port
    assert len(later.notes) == 1 and f"keeps port {port}" in later.notes[0]
    # and says so too when it attaches to that broker running (weir up --port-base again)
    attached = env(brokers=1, port_base=free_port())
    attached.port_base_explicit = True
    attached.start(timeout_s=10)
    assert attached.attached and attached.brokers[0].port == port
    assert len(attached.notes) == 1 and f"keeps port {port}" in attached.notes[0]
    later.stop(timeout_s=5)


def test_start_reports_attaching_and_what_it_restarted(env) -> None:
    first = env(brokers=2, port_base=0).start(timeout_s=10)
    assert not first.attached and first.started_now == ["ZooKeeper", "broker 1", "broker 2"]
    first.kill_broker(2)
    again = env(brokers=2, port_base=0).start(timeout_s=10)
    assert again.attached and again.started_now == ["broker 2"]
    again.stop(timeout_s=5)


def test_port_base_must_leave_room_for_every_broker(env) -> None:
    with pytest.raises(ValueError, match="1..65535"):
        env(brokers=3, port_base=65534)
    env(brokers=3, port_base=65533)  # 65533..65535

"""The managed local ZooKeeper: classpath discovery, start, attach, stop."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from weir.coordination.zkserver import (
    ZooKeeperNotFound,
    ZooKeeperServer,
    find_zookeeper_classpath,
)
from weir.processes import pid_alive


def test_missing_jars_name_the_debian_package(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperNotFound, match="libzookeeper-java"):
        find_zookeeper_classpath(tmp_path)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_a_process_whose_leader_thread_exited_is_alive_until_its_last_thread_ends() -> None:
    """An exiting JVM's leader thread shows "Z" before its other threads are gone; its parent
    cannot reap it yet, so stopping it through attach() must wait for those threads."""
    # The leader thread exits; the other thread lives until its stdin is closed.
    code = ("import ctypes, sys, threading\n"
            "threading.Thread(target=sys.stdin.read).start()\n"
            "ctypes.CDLL(None).pthread_exit(None)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while _state(proc.pid) != "Z":
            assert time.monotonic() < deadline, "the leader thread did not exit"
            time.sleep(0.01)
        assert pid_alive(proc.pid) and proc.poll() is None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
    done = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while _state(done.pid) != "Z":  # an exited, unreaped child
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert not pid_alive(done.pid)
    done.wait()


def test_classpath_has_the_server_and_its_dependencies() -> None:
    try:
        classpath = find_zookeeper_classpath()
    except ZooKeeperNotFound as exc:
        pytest.skip(str(exc))
    jars = [Path(p).name for p in classpath.split(os.pathsep)]
    assert {"zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "netty-handler.jar"} <= set(
        jars
    )
    assert all(Path(p).exists() for p in classpath.split(os.pathsep))


def test_start_attach_stop(tmp_path: Path) -> None:
    try:
        find_zookeeper_classpath()
    except ZooKeeperNotFound as exc:
        pytest.skip(str(exc))
    server = ZooKeeperServer(tmp_path / "zk")
    assert ZooKeeperServer.attach(tmp_path / "zk") is None
    server.start(timeout_s=60)
    try:
        assert server.is_running() and server.port > 0 and server.pid
        assert (tmp_path / "zk" / "zoo.cfg").read_text().count("minSessionTimeout=1000") == 1
        client = KazooClient(hosts=server.connect_string)
        client.start(timeout=10)
        client.create("/hello", b"x")
        client.stop()
        client.close()
        attached = ZooKeeperServer.attach(tmp_path / "zk")
        assert attached is not None
        assert (attached.pid, attached.port) == (server.pid, server.port)
        attached.stop()
        assert not server.is_running()
        assert ZooKeeperServer.attach(tmp_path / "zk") is None
    finally:
        server.stop()
    # Data survives a restart in the same directory.
    again = ZooKeeperServer(tmp_path / "zk")
    again.start(timeout_s=60)
    try:
        client = KazooClient(hosts=again.connect_string)
        client.start(timeout=10)
        assert client.get("/hello")[0] == b"x"
        client.stop()
        client.close()
    finally:
        again.stop()
    assert not again.is_running()

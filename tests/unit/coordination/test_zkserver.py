"""The managed local ZooKeeper: classpath discovery, start, attach, stop."""

import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from weir.coordination.zkserver import (
    ZooKeeperNotFound,
    ZooKeeperServer,
    find_zookeeper_classpath,
)


def test_missing_jars_name_the_debian_package(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperNotFound, match="libzookeeper-java"):
        find_zookeeper_classpath(tmp_path)


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

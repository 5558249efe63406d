"""A real ZooKeeper per test module, and a fresh chroot per test."""

import itertools
import time
from collections.abc import Callable, Iterator

import pytest

from weir.coordination.zk import ZkClient
from weir.coordination.zkserver import ZooKeeperServer

_chroots = itertools.count()


@pytest.fixture
def connect(zk_server: ZooKeeperServer) -> str:
    """A connect string with a chroot of its own, so tests do not see each other."""
    return f"{zk_server.connect_string}/weir-test-{next(_chroots)}"


@pytest.fixture
def make_client(connect: str) -> Iterator[Callable[[], ZkClient]]:
    """Factory of started clients on the test's chroot; all stopped at teardown."""
    clients: list[ZkClient] = []

    def make() -> ZkClient:
        client = ZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=10000)
        client.start()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.stop()


@pytest.fixture
def zk(make_client: Callable[[], ZkClient]) -> ZkClient:
    client = make_client()
    client.ensure_paths()
    return client


def _wait_for(predicate: Callable[[], object], timeout_s: float = 10.0) -> object:
    """Poll ``predicate`` until truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        time.sleep(0.02)


@pytest.fixture
def wait_for() -> Callable[..., object]:
    return _wait_for

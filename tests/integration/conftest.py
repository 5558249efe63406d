"""Real ZooKeeper, real broker processes on loopback, real Kafka clients.

Every process started here is stopped by PID when its fixture ends, logs of the brokers are
printed when a test fails.
"""

from __future__ import annotations

import uuid

import pytest

from weir.ops.cluster import LocalCluster


def _cluster(tmp_path_factory, brokers: int, **overrides: str) -> LocalCluster:
    data_dir = tmp_path_factory.mktemp(f"weir-{brokers}b")
    cluster = LocalCluster(data_dir, brokers=brokers, port_base=0, overrides=overrides)
    try:
        cluster.start(timeout_s=90)
    except BaseException:
        _dump_logs(cluster)
        cluster.stop()
        raise
    return cluster


def serve_cluster(tmp_path_factory, brokers: int, overrides: dict[str, str]):
    """A module fixture's body: a cluster with these settings, its logs printed if it fails
    to start, stopped by PID at the end (``yield from serve_cluster(...)``)."""
    cluster = _cluster(tmp_path_factory, brokers, **overrides)
    try:
        yield cluster
    finally:
        cluster.stop()


def _dump_logs(cluster: LocalCluster) -> None:
    for broker_id in cluster.broker_ids:
        path = cluster.log_path(broker_id)
        if path.exists():
            tail = path.read_text(errors="replace").splitlines()[-60:]
            print(f"---- broker {broker_id} log tail ----")
            print("\n".join(tail))


@pytest.fixture(scope="module")
def cluster1(tmp_path_factory, request):
    """One broker."""
    cluster = _cluster(tmp_path_factory, 1)
    yield cluster
    if getattr(request.node, "rep_failed", False):
        _dump_logs(cluster)
    cluster.stop()


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    """Three brokers."""
    cluster = _cluster(tmp_path_factory, 3)
    yield cluster
    cluster.stop()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        for name in ("cluster1", "cluster3"):
            cluster = item.funcargs.get(name) if hasattr(item, "funcargs") else None
            if cluster is not None:
                _dump_logs(cluster)

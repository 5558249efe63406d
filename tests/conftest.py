"""Shared test helpers: deadline polling (no sleeps as synchronisation), and the session
guard that leaves no process behind, also when the run is interrupted (process_sweep.py)."""

from __future__ import annotations

import atexit
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from tests.process_sweep import SessionGuard
from weir.coordination.zkserver import ZooKeeperServer, find_zookeeper_classpath

T = TypeVar("T")


@pytest.fixture(scope="module")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper (Debian's package) for one test module; skipped where it is not
    installed, which under CI fails the run instead (see pytest_sessionstart)."""
    try:
        find_zookeeper_classpath()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    server = ZooKeeperServer(tmp_path_factory.mktemp("zk"))
    server.start(timeout_s=60)
    try:
        yield server
    finally:
        server.stop()


def wait_for(fn: Callable[[], T], timeout_s: float = 30.0, interval_s: float = 0.1,
             what: str = "condition") -> T:
    """Call ``fn`` until it returns a truthy value; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_exc: BaseException | None = None
    while True:
        try:
            value = fn()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - reported below if the deadline passes
            last_exc = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}"
                                 + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval_s)


_guard: SessionGuard | None = None


def pytest_configure(config) -> None:
    """Mark the processes this session starts and turn SIGTERM into KeyboardInterrupt, so
    that an interrupted ``make test`` tears its clusters down and sweeps what is left."""
    global _guard
    if _guard is None and threading.current_thread() is threading.main_thread():
        _guard = SessionGuard()
        atexit.register(_guard.finish)


def pytest_runtest_setup(item) -> None:
    if _guard is not None:
        _guard.ensure_handler()


def pytest_unconfigure(config) -> None:
    if _guard is not None:
        _guard.finish()


def pytest_sessionstart(session) -> None:
    """Under CI, what the suite needs must be installed: tests that would skip for want of
    ZooKeeper or PySpark fail the run instead (a green run must not hide a missing step)."""
    import importlib.util
    import os

    import pytest

    if not os.environ.get("CI"):
        return
    missing = []
    try:
        from weir.coordination.zkserver import find_zookeeper_classpath

        find_zookeeper_classpath()
    except Exception as exc:  # noqa: BLE001 - reported below
        missing.append(f"ZooKeeper: {exc}")
    if importlib.util.find_spec("pyspark") is None:
        missing.append("pyspark is not installed")
    if missing:
        pytest.exit("CI run without its dependencies: " + "; ".join(missing), returncode=3)


# Test tiers (``make test-unit`` runs neither marker below; ``make test`` runs everything).
# A ``pytestmark`` in a conftest.py has no effect (pytest reads it only in test modules), so
# the markers are given here, from where a test lives and what it asks for.
_TESTS = Path(__file__).resolve().parent
_INTEGRATION_DIRS = (_TESTS / "integration", _TESTS / "spark")
# Test modules that start a ZooKeeper server themselves, without the zk_server fixture.
_ZOOKEEPER_MODULES = (_TESTS / "unit" / "coordination" / "test_zkserver.py",)


def pytest_collection_modifyitems(config, items) -> None:
    """``integration``: everything under tests/integration and tests/spark (real brokers);
    ``zookeeper``: any other test that starts a real ZooKeeper (the zk_server fixture)."""
    for item in items:
        path = Path(str(item.path)).resolve()
        if any(path.is_relative_to(d) for d in _INTEGRATION_DIRS):
            item.add_marker(pytest.mark.integration)
        elif "zk_server" in getattr(item, "fixturenames", ()) or path in _ZOOKEEPER_MODULES:
            item.add_marker(pytest.mark.zookeeper)

"""The test tiers: ``make test-unit`` deselects every test that needs brokers or ZooKeeper
(the markers come from tests/conftest.py's collection hook, by directory and fixture)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT_TIER = "not integration and not zookeeper"


def collected(marker: str, *paths: str) -> list[str]:
    """Node ids pytest selects among ``paths`` under ``-m marker`` (collection only)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", marker, *paths],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 5), out.stdout + out.stderr  # 5: nothing selected
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_cluster_and_zookeeper_tests_are_outside_the_unit_tier() -> None:
    # A module with no marker of its own that starts a cluster from a fixture; a Spark
    # module; one whose tests ask for the zk_server fixture; one that starts ZooKeeper itself.
    paths = ("tests/integration/test_topic_admin.py",
             "tests/spark/test_batch.py",
             "tests/unit/controller/test_service_zk.py",
             "tests/unit/coordination/test_zkserver.py")
    assert collected(UNIT_TIER, *paths) == []
    integration = collected("integration", *paths)
    assert any("test_topic_admin.py::" in n for n in integration)
    assert any("test_batch.py::" in n for n in integration)
    zookeeper = collected("zookeeper", *paths)
    assert any("test_service_zk.py::" in n for n in zookeeper)
    assert any("test_zkserver.py::test_start_attach_stop" in n for n in zookeeper)


def test_the_unit_tier_keeps_unit_and_simulation_tests() -> None:
    kept = collected(UNIT_TIER, "tests/unit/coordination/test_zkserver.py", "tests/sim/test_sim.py")
    assert any(n.startswith("tests/sim/test_sim.py::") for n in kept)

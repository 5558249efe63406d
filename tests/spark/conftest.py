"""Fixtures for the Spark data source tests: one Weir broker and one local Spark session.

Both are started once per test session and stopped at its end.  Spark runs ``local[2]``
with its Python workers on this interpreter (the venv, where weir is installed).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from weir.ops.cluster import LocalCluster

RETENTION_CHECK_MS = 300


@pytest.fixture(scope="session")
def weir_cluster(tmp_path_factory) -> Iterator[LocalCluster]:
    """One broker; retention is checked every 300 ms so tests can watch it delete data."""
    cluster = LocalCluster(tmp_path_factory.mktemp("weir-spark"), brokers=1, port_base=0,
                           overrides={"log.retention.check.interval.ms":
                                      str(RETENTION_CHECK_MS),
                                      "num.partitions": "1"})
    try:
        cluster.start(timeout_s=90)
    except BaseException:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def bootstrap(weir_cluster) -> str:
    return weir_cluster.bootstrap


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A SparkSession (local[2]) with the weir data source registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import weir.spark

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (SparkSession.builder.master("local[2]").appName("weir-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.driver.memory", "1g")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    weir.spark.register(session)
    yield session
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    # The py4j gateway JVM outlives stop() until this process exits: stopped by pid here,
    # so the session ends with no Spark JVM left (tests/process_sweep.py).
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
        SparkContext._gateway = SparkContext._jvm = None
    if proc is not None:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def topic_name() -> str:
    return f"spark-{uuid.uuid4().hex[:10]}"


def wait_until(fn, timeout_s: float = 30.0, what: str = "condition"):
    """Poll ``fn`` until truthy (deadline, no sleeps as synchronisation)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)

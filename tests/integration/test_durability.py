"""Acknowledged data survives SIGKILL of the broker and a restart with `weir up`."""

from __future__ import annotations

import signal

import pytest

from tests.integration.clients import consume_assigned, create_topic, produce
from weir.ops.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_100k_records_survive_sigkill(tmp_path, topic_name):
    cluster = LocalCluster(tmp_path / "data", brokers=1, port_base=0,
                           overrides={"log.segment.bytes": str(4 * 1024 * 1024)})
    cluster.start(timeout_s=90)
    try:
        create_topic(cluster.bootstrap, topic_name, partitions=3)
        values = [b"record-%06d" % i + b"." * 100 for i in range(100_000)]
        acked = produce(cluster.bootstrap, topic_name, values, acks="all",
                        **{"batch.size": 65536, "compression.type": "lz4"})
        assert len(acked) == len(values)

        cluster.kill_broker(cluster.broker_ids[0], signal.SIGKILL)
        # `weir up` on the same data dir restarts what is not running, keeping the data
        cluster = LocalCluster(tmp_path / "data", brokers=1, port_base=0)
        cluster.start(timeout_s=90)

        got = consume_assigned(cluster.bootstrap, topic_name, [0, 1, 2], len(values),
                               timeout_s=120)
        stored = {(m.partition(), m.offset()): m.value() for m in got}
        missing = [(p, o) for p, o, v in acked if stored.get((p, o)) != v]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    finally:
        cluster.stop()

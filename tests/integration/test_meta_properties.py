"""meta.properties on real broker processes (Kafka's BrokerMetadataCheckpoint, ZooKeeper
mode): written with the cluster's id, and a broker pointed at dirs of another cluster or
another broker refuses to start and leaves the dirs as they were."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from weir.ops.cluster import ClusterError, LocalCluster
from weir.storage.meta_properties import MetaProperties, read

pytestmark = [pytest.mark.integration]


def _files(log_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log_dir.iterdir()) if p.is_file()}


def _refused(cluster: LocalCluster, broker_id: int) -> str:
    """Start the broker, expect it to exit with 1; its log."""
    cluster.start_broker(broker_id)
    with pytest.raises(ClusterError, match=f"broker {broker_id} exited with code 1"):
        cluster.wait_for_brokers([broker_id], timeout_s=60)
    return cluster.log_path(broker_id).read_text()


def test_dirs_of_another_cluster_or_broker_are_refused(tmp_path):
    cluster = LocalCluster(tmp_path / "data", brokers=2, port_base=0)
    cluster.start(timeout_s=90)
    try:
        cluster_id = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(
            timeout=30).cluster_id
        assert cluster_id
        log_dir = cluster.broker_log_dirs(2)[0]
        assert read(log_dir) == MetaProperties(2, cluster_id)
        assert read(cluster.broker_log_dirs(1)[0]) == MetaProperties(1, cluster_id)

        cluster.stop_broker(2)
        good = (log_dir / "meta.properties").read_text()
        for wrong, message in (
                (good.replace(cluster_id, "AnotherClusterIdAAAAAA"),
                 (f"The Cluster ID {cluster_id} doesn't match stored clusterId "
                  "AnotherClusterIdAAAAAA")),
                (good.replace("broker.id=2", "broker.id=7"),
                 "Configured broker.id 2 doesn't match stored broker.id 7")):
            (log_dir / "meta.properties").write_text(wrong)
            before = _files(log_dir)
            assert message in _refused(cluster, 2)
            # Nothing in the dir was touched: no checkpoints rewritten, no marker changed.
            assert _files(log_dir) == before

        (log_dir / "meta.properties").write_text(good)
        cluster.start_broker(2)
        cluster.wait_for_brokers([2], timeout_s=60)
    finally:
        cluster.stop()

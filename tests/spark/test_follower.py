"""Reads served by a follower in the client's rack (KIP-392) on a two-broker cluster."""

from __future__ import annotations

import pytest

from tests.spark.conftest import wait_until
from tests.spark.helpers import produce
from weir.ops.cluster import LocalCluster
from weir.spark.fetch import FetchClient, _Reader
from weir.spark.offsets import OffsetRange

pytestmark = pytest.mark.integration

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def racked(tmp_path_factory):
    """Brokers 1 and 2 in racks r1 and r2, rack-aware replica selection on."""
    cluster = LocalCluster(tmp_path_factory.mktemp("weir-racks"), brokers=2, port_base=0,
                           overrides={"replica.selector.class": SELECTOR},
                           broker_overrides={b: {"broker.rack": f"r{b}"} for b in (1, 2)})
    try:
        cluster.start(timeout_s=120)
        yield cluster
    finally:
        cluster.stop()


def _leader(bootstrap: str, topic: str) -> int:
    client = FetchClient({"bootstrap.servers": bootstrap})
    try:
        client.refresh(topic)
        return client.leader(topic, 0)
    finally:
        client.close()


def test_follower_in_the_client_rack_serves_the_read(racked, spark):
    bootstrap = racked.bootstrap
    topic = "racked"
    create_topic_rf2(bootstrap, topic)
    produce(bootstrap, topic, [{"value": b"%d" % i, "partition": 0} for i in range(500)])
    leader = wait_until(lambda: max(_leader(bootstrap, topic), 0), 30, "a leader")
    follower = 3 - leader
    conf = {"bootstrap.servers": bootstrap, "client.rack": f"r{follower}"}
    client = FetchClient(conf)
    try:
        reader = _Reader(client, conf, OffsetRange(topic, 0, 0, 500), False, True, 60)
        offsets = [o for b in reader.run() for o in b.column("offset").to_pylist()]
    finally:
        client.close()
    assert offsets == list(range(500))
    assert reader.served_by.get(follower, 0) > 0, reader.served_by

    df = (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("kafka.client.rack", f"r{follower}")
          .option("maxRecordsPerPartition", "200").load())
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(500))


def create_topic_rf2(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(60)


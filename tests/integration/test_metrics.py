"""The /metrics endpoint of real brokers: partition and leader counts, an ISR shrink while a
follower is frozen (SIGSTOP) and the expansion once it runs again, follower lag."""

from __future__ import annotations

import urllib.request

import pytest

from tests.conftest import wait_for
from tests.integration.clients import produce
from tests.integration.replication_checks import partition_leaders
from weir.config import write_properties
from weir.ops.cluster import LocalCluster, free_port
from weir.server.metrics import parse

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RM = "kafka_server_replicamanager_"
LAG = "kafka_server_fetcherlagmetrics_consumerlag"


class MetricsCluster(LocalCluster):
    """A LocalCluster whose brokers each serve /metrics on their own free port."""

    metrics_ports: dict[int, int]

    def write_config(self, broker_id: int):
        slot = super().write_config(broker_id)
        ports = self.__dict__.setdefault("metrics_ports", {})
        port = ports.setdefault(broker_id, free_port())
        write_properties(self.config_path(broker_id), {"metrics.http.port": str(port)})
        return slot


def scrape(cluster: MetricsCluster, broker_id: int) -> dict:
    url = f"http://127.0.0.1:{cluster.metrics_ports[broker_id]}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        return parse(response.read().decode())


def gauge(samples: dict, name: str, **labels: object) -> float | None:
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def lag_of(samples: dict, topic: str) -> list[float]:
    return [v for (name, labels), v in samples.items()
            if name == LAG and ("topic", topic) in labels]


@pytest.fixture
def cluster(tmp_path):
    # The session outlives the SIGSTOP so the *leader* shrinks the ISR (AlterPartition),
    # not the controller after the frozen broker's session expires.
    c = MetricsCluster(tmp_path / "data", brokers=2, port_base=0,
                       overrides={"replica.lag.time.max.ms": "1500"}, session_timeout_ms=20000)
    try:
        c.start(timeout_s=60)
        yield c
    finally:
        c.stop()


def test_metrics_follow_an_isr_shrink_and_expansion(cluster, topic_name):
    for broker_id in cluster.broker_ids:
        wait_for(lambda b=broker_id: gauge(scrape(cluster, b),
                                           "kafka_server_kafkaserver_brokerstate") == 3,
                 20, what=f"broker {broker_id} running")
    active = "kafka_controller_kafkacontroller_activecontrollercount"
    wait_for(lambda: sum(gauge(scrape(cluster, b), active) for b in cluster.broker_ids) == 1,
             20, what="exactly one active controller")

    # The leader is put on the controller: the follower about to be frozen must not be the
    # controller, or nobody could answer the leader's AlterPartition.
    leader = cluster.controller_id()
    follower = next(b for b in cluster.broker_ids if b != leader)
    cluster.zk().create_topic(topic_name, {0: [leader, follower]}, {})
    wait_for(lambda: partition_leaders(cluster.bootstrap, topic_name)[0] == leader, 30,
             what="the controller leading the partition")
    produce(cluster.bootstrap, topic_name, [b"v%d" % i for i in range(10)], acks="all")

    def healthy() -> bool:
        at_leader, at_follower = scrape(cluster, leader), scrape(cluster, follower)
        return (gauge(at_leader, RM + "partitioncount") == 1
                and gauge(at_leader, RM + "leadercount") == 1
                and gauge(at_leader, RM + "underreplicatedpartitions") == 0
                and gauge(at_leader, "kafka_cluster_partition_insyncreplicascount",
                          topic=topic_name, partition=0) == 2
                and gauge(at_follower, RM + "partitioncount") == 1
                and gauge(at_follower, RM + "leadercount") == 0
                and gauge(at_follower, "kafka_log_log_logendoffset",
                          topic=topic_name, partition=0) == 10
                and lag_of(at_follower, topic_name) == [0])

    wait_for(healthy, 30, what="a healthy RF 2 partition in the metrics")
    controller = cluster.controller_id()
    at_controller = scrape(cluster, controller)
    assert gauge(at_controller, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert gauge(at_controller, "kafka_controller_kafkacontroller_globaltopiccount") >= 1
    shrinks_before = gauge(scrape(cluster, leader), RM + "isrshrinks_total")
    expands_before = gauge(scrape(cluster, leader), RM + "isrexpands_total")

    slot = next(s for s in cluster.brokers if s.id == leader)
    leader_only = f"{slot.host}:{slot.port}"  # never ask the frozen broker
    cluster.pause_broker(follower)
    try:
        produce(leader_only, topic_name, [b"w%d" % i for i in range(5)], acks="1",
                timeout_s=20)

        def shrunk() -> bool:
            s = scrape(cluster, leader)
            return (gauge(s, RM + "underreplicatedpartitions") >= 1
                    and gauge(s, RM + "isrshrinks_total") > shrinks_before
                    and gauge(s, "kafka_cluster_partition_underreplicated",
                              topic=topic_name, partition=0) == 1)

        wait_for(shrunk, 30, what="the leader shrinking the ISR")
    finally:
        cluster.resume_broker(follower)

    def expanded() -> bool:
        s = scrape(cluster, leader)
        return (gauge(s, RM + "underreplicatedpartitions") == 0
                and gauge(s, RM + "isrexpands_total") > expands_before)

    wait_for(expanded, 30, what="the follower back in the ISR")
    at_follower = scrape(cluster, follower)
    assert lag_of(at_follower, topic_name), "the follower reports its lag"
    assert gauge(at_follower, "kafka_server_replicafetchermanager_maxlag",
                 clientId="Replica") is not None
    wait_for(lambda: gauge(scrape(cluster, follower), "kafka_log_log_logendoffset",
                           topic=topic_name, partition=0) == 15, 15,
             what="the follower caught up")

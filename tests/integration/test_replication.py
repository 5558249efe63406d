"""Replication under real failures: no acknowledged write is lost with acks=all,
min.insync.replicas=2 and unclean election off, whatever is killed (SIGKILL/SIGSTOP)."""

from __future__ import annotations

import signal

import pytest

from tests.integration.clients import create_topic
from tests.integration.replication_checks import (
    BackgroundProducer,
    partition_isrs,
    partition_leaders,
    verify_exactly_once,
    wait_for_progress,
    wait_until,
)
from weir.ops.cluster import LocalCluster
from weir.verify.replicas import assert_replicas_agree_below_hw

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 3
OVERRIDES = {
    "replica.lag.time.max.ms": "3000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path / "data", brokers=3, port_base=0, overrides=OVERRIDES)
    c.start(timeout_s=90)
    yield c
    c.stop()


def test_kill_leader_follower_and_controller_repeatedly(cluster, topic_name):
    create_topic(cluster.bootstrap, topic_name, PARTITIONS, 3, {"min.insync.replicas": "2"})
    with BackgroundProducer(cluster.bootstrap, topic_name, PARTITIONS) as producer:
        for round_ in range(2):
            for role in ("leader", "follower", "controller"):
                wait_for_progress(producer, 300, 60, "progress before the kill")
                leaders = partition_leaders(cluster.bootstrap, topic_name)
                if role == "leader":
                    victim = leaders[round_ % PARTITIONS]
                elif role == "controller":
                    victim = cluster.controller_id()
                else:
                    victim = next(b for b in cluster.broker_ids if b not in leaders.values()
                                  or b != leaders[0])
                cluster.kill_broker(victim, signal.SIGKILL)
                wait_for_progress(producer, 300, 90, f"progress with broker {victim} ({role}) dead")
                cluster.start_broker(victim)
                cluster.wait_for_brokers([victim], timeout_s=60)
                wait_until(lambda: all(len(isr) == 3 for isr in
                                       partition_isrs(cluster.bootstrap, topic_name).values()),
                           90, f"broker {victim} back in every ISR")
        producer.stop()
    assert not producer.failed, f"failed sends: {producer.failed[:5]}"
    verify_exactly_once(cluster.bootstrap, topic_name, PARTITIONS, producer)
    cluster.stop()
    assert_replicas_agree_below_hw(
        [cluster.broker_dir(b) / "logs" for b in cluster.broker_ids], topic_name, PARTITIONS)


def test_sigstop_follower_leaves_and_rejoins_isr(cluster, topic_name):
    create_topic(cluster.bootstrap, topic_name, PARTITIONS, 3, {"min.insync.replicas": "2"})
    with BackgroundProducer(cluster.bootstrap, topic_name, PARTITIONS) as producer:
        wait_until(lambda: producer.acked_count() >= 300, 60, "first records")
        leaders = partition_leaders(cluster.bootstrap, topic_name)
        victim = next(b for b in cluster.broker_ids if b != leaders[0])
        cluster.pause_broker(victim)
        try:
            wait_until(lambda: all(victim not in isr for isr in
                                   partition_isrs(cluster.bootstrap, topic_name).values()),
                       60, f"broker {victim} out of the ISR")
            n = producer.acked_count()
            wait_until(lambda: producer.acked_count() >= n + 300, 60,
                       "acks=all progress with the follower stopped")
        finally:
            cluster.resume_broker(victim)
        wait_until(lambda: all(victim in isr for isr in
                               partition_isrs(cluster.bootstrap, topic_name).values()),
                   60, f"broker {victim} back in the ISR")
        producer.stop()
    assert not producer.failed
    verify_exactly_once(cluster.bootstrap, topic_name, PARTITIONS, producer)

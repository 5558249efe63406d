"""A leader whose only log dir fails halts, and its partitions move on (Kafka's
ReplicaManager.handleLogDirFailure: "all log dirs have failed" ends the broker)."""

from __future__ import annotations

import resource

import pytest

from tests.integration.clients import create_topic
from tests.integration.replication_checks import (
    BackgroundProducer,
    brokers_known_to_controller,
    partition_leaders,
    verify_exactly_once,
    wait_for_progress,
    wait_until,
)
from weir.ops.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_leader_with_a_failed_disk_halts_and_leadership_moves(tmp_path, topic_name):
    cluster = LocalCluster(tmp_path / "data", brokers=3, port_base=0,
                           overrides={"zookeeper.session.timeout.ms": "6000"})
    cluster.start(timeout_s=90)
    try:
        # Topics are created through the controller, whose metadata names a broker a moment
        # after its registration.
        wait_until(lambda: brokers_known_to_controller(cluster) == {1, 2, 3}, 30,
                   "the controller's metadata naming every broker")
        create_topic(cluster.bootstrap, topic_name, partitions=1, replication=3,
                     config={"min.insync.replicas": "2"})
        with BackgroundProducer(cluster.bootstrap, topic_name, 1) as producer:
            wait_for_progress(producer, 200, 60, "first acks")
            leader = partition_leaders(cluster.bootstrap, topic_name)[0]
            pid = cluster.broker_pid(leader)
            # Every write that grows a file now fails with EFBIG: the log dir fails.
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
            wait_until(lambda: cluster.broker_pid(leader) is None, 60,
                       f"broker {leader} halting after its log dir failed")
            wait_until(lambda: partition_leaders(cluster.bootstrap, topic_name).get(0)
                       not in (None, -1, leader), 60, "a new leader")
            wait_for_progress(producer, 200, 60, "acks from the new leader")
            producer.stop()
        # (Its last log line cannot be checked: the broker's own log file cannot grow either.)
        cluster.start_broker(leader)  # a restart with a working disk rejoins
        verify_exactly_once(cluster.bootstrap, topic_name, 1, producer)
    finally:
        cluster.stop()

"""Unclean leader election: off (the default) keeps a partition offline when only an
out-of-sync replica survives; on (topic override) brings it back and logs the lost range."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import wait_for
from tests.integration.clients import create_topic, produce
from tests.integration.replication_checks import partition_isrs, partition_leaders
from weir.ops.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def leave_only_out_of_sync_replica(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    """Kill the follower, write more with the leader alone, kill the leader, restart the
    follower: the only live replica is out of sync. Returns (old leader, survivor)."""
    produce(cluster.bootstrap, topic, [b"both-%d" % i for i in range(50)], acks="all")
    leader = partition_leaders(cluster.bootstrap, topic)[0]
    follower = next(b for b in cluster.broker_ids if b != leader)
    cluster.kill_broker(follower, signal.SIGKILL)
    wait_for(lambda: partition_isrs(cluster.bootstrap, topic)[0] == [leader], 60,
             what="ISR shrunk to the leader")
    produce(cluster.bootstrap, topic, [b"leader-only-%d" % i for i in range(20)], acks="1")
    cluster.kill_broker(leader, signal.SIGKILL)
    cluster.start_broker(follower)
    cluster.wait_for_brokers([follower], timeout_s=60)
    return leader, follower


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_leader_election(tmp_path, topic_name, unclean):
    cluster = LocalCluster(tmp_path / "data", brokers=2, port_base=0)
    cluster.start(timeout_s=90)
    try:
        create_topic(cluster.bootstrap, topic_name, 1, 2,
                     {"unclean.leader.election.enable": str(unclean).lower(),
                      "min.insync.replicas": "1"})
        old_leader, survivor = leave_only_out_of_sync_replica(cluster, topic_name)
        if not unclean:
            # The partition stays offline: no leader while only an out-of-sync replica lives.
            wait_for(lambda: partition_leaders(cluster.bootstrap, topic_name)[0] == -1, 30,
                     what="partition offline")
            for _ in range(10):
                assert partition_leaders(cluster.bootstrap, topic_name)[0] == -1
        else:
            wait_for(lambda: partition_leaders(cluster.bootstrap, topic_name)[0] == survivor,
                     60, what="unclean leader elected")
            acked = produce(cluster.bootstrap, topic_name, [b"after"], acks="all")
            assert acked[0][1] == 50  # the leader-only records (50..69) are gone
            logs = "".join(cluster.log_path(b).read_text() for b in cluster.broker_ids)
            assert "Unclean leader election" in logs
            # The old leader returns as a follower and logs the range it had to discard.
            cluster.start_broker(old_leader)
            wait_for(lambda: "discarding offsets 50..69" in cluster.log_path(old_leader)
                     .read_text(), 60, what="the lost range logged by the old leader")
    finally:
        cluster.stop()

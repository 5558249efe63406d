"""Partition reassignment on a real 4-broker cluster, driven through ``weir reassign``.

Three partitions on brokers {1,2,3} (leader 1) move to {2,3,4} under acks=all traffic:
no acknowledged record is lost, the old replica directories are deleted and the leader
moves; the same with a broker killed mid-move and with the controller killed mid-move
(the move completes); a move is cancelled.  A move is held "mid-move" by pausing (SIGSTOP)
broker 4, the only new replica, so it cannot catch up before the fault is injected.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.integration.replication_checks import (
    BackgroundProducer,
    brokers_known_to_controller,
    leadership_report,
    partition_leaders,
    verify_exactly_once,
    wait_for_progress,
    wait_until,
)
from weir.cli import main as cli
from weir.ops.cluster import LocalCluster
from weir.verify.replicas import assert_replicas_agree_below_hw

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OVERRIDES = {"replica.lag.time.max.ms": "3000", "min.insync.replicas": "2"}
OLD, NEW = [1, 2, 3], [2, 3, 4]
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster4(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("reassign"), brokers=4, port_base=0,
                     overrides=OVERRIDES)
    try:
        c.start(timeout_s=90)
        yield c
    finally:
        c.stop()


def create_on_old_brokers(cluster: LocalCluster, topic: str) -> None:
    """A manual assignment, written as an admin tool would (this librdkafka build refuses
    CreateTopics with a replica assignment)."""
    # The first live replica leads a new partition: broker 1 only once the controller has
    # processed its registration (Kafka's tests wait for the brokers' metadata likewise).
    wait_until(lambda: brokers_known_to_controller(cluster) >= set(OLD), 60,
               "the controller to see brokers 1-3")
    cluster.zk().create_topic(topic, {p: OLD for p in range(PARTITIONS)},
                              {"min.insync.replicas": "2"})
    wait_until(lambda: set(partition_leaders(cluster.bootstrap, topic).values()) == {1}, 30,
               "broker 1 leading every partition",
               describe=lambda: leadership_report(cluster, topic))


def write_plan(tmp_path: Path, topic: str, replicas: list[int]) -> str:
    plan = {"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": replicas} for p in range(PARTITIONS)]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return str(path)


def reassign(cluster: LocalCluster, *args: str) -> int:
    return cli.main(["reassign", "--bootstrap-server", cluster.bootstrap,
                     "--zookeeper", cluster.zookeeper_connect, *args])


def replica_dirs(cluster: LocalCluster, topic: str, broker: int) -> list[Path]:
    return sorted((cluster.broker_dir(broker) / "logs").glob(f"{topic}-*"))


def wait_for_move(cluster: LocalCluster, plan: str, timeout_s: float = 90) -> None:
    wait_until(lambda: reassign(cluster, "--verify", "--reassignment-json-file", plan) == 0,
               timeout_s, "the reassignment to complete")


def check_moved(cluster: LocalCluster, topic: str, producer: BackgroundProducer) -> None:
    leaders = partition_leaders(cluster.bootstrap, topic)
    assert set(leaders.values()) <= set(NEW), leaders
    wait_until(lambda: not replica_dirs(cluster, topic, 1), 30, "broker 1's replicas deleted")
    assert len(replica_dirs(cluster, topic, 4)) == PARTITIONS
    producer.stop()
    assert not producer.failed, f"failed sends: {producer.failed[:5]}"
    verify_exactly_once(cluster.bootstrap, topic, PARTITIONS, producer)


def start_held_move(cluster: LocalCluster, tmp_path: Path, topic: str,
                    producer: BackgroundProducer, capsys) -> str:
    """Broker 4 paused, the move started and visibly in progress; returns the plan path."""
    wait_for_progress(producer, 300, 60, "traffic before the move")
    if cluster.controller_id() == 4:  # the paused broker must not be the controller
        cluster.kill_broker(4, signal.SIGKILL)
        wait_until(lambda: cluster.controller_id() not in (None, 4), 60, "another controller")
        cluster.start_broker(4)
        cluster.wait_for_brokers([4], timeout_s=60)
    # Registered in ZooKeeper is not yet alive to the controller: wait until it has processed
    # broker 4's registration, or the move is refused ("brokers that are not alive").
    wait_until(lambda: 4 in brokers_known_to_controller(cluster), 60,
               "the controller to see broker 4")
    cluster.pause_broker(4)
    plan = write_plan(tmp_path, topic, NEW)
    assert reassign(cluster, "--execute", "--reassignment-json-file", plan) == 0
    assert reassign(cluster, "--verify", "--reassignment-json-file", plan) == 1
    assert "still in progress" in capsys.readouterr().out
    return plan


def test_move_completes_after_new_replica_broker_is_killed(cluster4, tmp_path, topic_name,
                                                           capsys):
    create_on_old_brokers(cluster4, topic_name)
    with BackgroundProducer(cluster4.bootstrap, topic_name, PARTITIONS) as producer:
        plan = start_held_move(cluster4, tmp_path, topic_name, producer, capsys)
        cluster4.kill_broker(4, signal.SIGKILL)
        wait_for_progress(producer, 300, 60, "traffic with broker 4 dead mid-move")
        cluster4.start_broker(4)
        cluster4.wait_for_brokers([4], timeout_s=60)
        wait_for_move(cluster4, plan)
        check_moved(cluster4, topic_name, producer)


def test_move_completes_after_controller_is_killed(cluster4, tmp_path, topic_name, capsys):
    create_on_old_brokers(cluster4, topic_name)
    with BackgroundProducer(cluster4.bootstrap, topic_name, PARTITIONS) as producer:
        plan = start_held_move(cluster4, tmp_path, topic_name, producer, capsys)
        controller = cluster4.controller_id()
        cluster4.kill_broker(controller, signal.SIGKILL)
        if controller != 4:
            cluster4.resume_broker(4)
        wait_until(lambda: cluster4.controller_id() not in (None, controller), 60,
                   "a new controller")
        cluster4.start_broker(controller)
        cluster4.wait_for_brokers([controller], timeout_s=60)
        wait_for_move(cluster4, plan)
        check_moved(cluster4, topic_name, producer)


def test_cancel_a_move(cluster4, tmp_path, topic_name, capsys):
    create_on_old_brokers(cluster4, topic_name)
    with BackgroundProducer(cluster4.bootstrap, topic_name, PARTITIONS) as producer:
        plan = start_held_move(cluster4, tmp_path, topic_name, producer, capsys)
        assert reassign(cluster4, "--cancel", "--reassignment-json-file", plan) == 0
        assert "Successfully cancelled" in capsys.readouterr().out
        cluster4.resume_broker(4)
        zk = cluster4.zk()
        # As in Kafka, the reverted replica list keeps the order of the full one (RS).
        wait_until(lambda: all(sorted(zk.get_topic(topic_name).partitions[p]) == OLD
                               for p in range(PARTITIONS)), 30, "the old assignment back")
        assert set(partition_leaders(cluster4.bootstrap, topic_name).values()) == {1}
        assert not zk.get_topic(topic_name).adding
        wait_until(lambda: not replica_dirs(cluster4, topic_name, 4), 60,
                   "broker 4's new replicas deleted")
        wait_for_progress(producer, 300, 60, "traffic after the cancel")
        producer.stop()
        assert not producer.failed
        verify_exactly_once(cluster4.bootstrap, topic_name, PARTITIONS, producer)
    assert reassign(cluster4, "--verify", "--reassignment-json-file", plan) == 1


def test_move_under_traffic_with_throttle_and_progress(cluster4, tmp_path, topic_name, capsys):
    create_on_old_brokers(cluster4, topic_name)
    with BackgroundProducer(cluster4.bootstrap, topic_name, PARTITIONS) as producer:
        wait_for_progress(producer, 500, 60, "traffic before the move")
        plan = write_plan(tmp_path, topic_name, NEW)
        assert reassign(cluster4, "--execute", "--reassignment-json-file", plan,
                        "--throttle", "50000000") == 0
        out = capsys.readouterr().out
        assert "Successfully started" in out and '"replicas":[1,2,3]' in out.replace(" ", "")
        zk = cluster4.zk()
        assert zk.get_topic_config(topic_name)["follower.replication.throttled.replicas"]
        assert reassign(cluster4, "--verify", "--reassignment-json-file", plan,
                        "--data-dir", str(cluster4.data_dir), "--wait", "90",
                        "--interval", "0.5") == 0
        out = capsys.readouterr().out
        assert "is completed" in out and "Throttle was removed" in out
        assert "follower.replication.throttled.replicas" not in zk.get_topic_config(topic_name)
        wait_for_progress(producer, 300, 60, "traffic after the move")
        check_moved(cluster4, topic_name, producer)
    cluster4.stop()  # the last test of the module: the replicas' checkpoints are final now
    assert_replicas_agree_below_hw([cluster4.broker_dir(b) / "logs" for b in NEW],
                                   topic_name, PARTITIONS)

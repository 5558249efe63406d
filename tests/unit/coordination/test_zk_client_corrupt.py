"""ZkClient readers facing corrupt znodes (real ZooKeeper): one error line naming the path,
then the node is skipped or treated as absent, as Kafka's ZooKeeper client does; only where
no safe default exists does the ZnodeDataError reach the caller."""

import logging

import pytest

from weir.common import TopicPartition
from weir.coordination import paths
from weir.coordination.codecs import BrokerInfo, LeaderIsr
from weir.coordination.errors import ZnodeDataError

BAD = b"\xff{not json"


def put(zk, path: str, data: bytes) -> None:
    if zk.kazoo.exists(path):
        zk.kazoo.set(path, data)
    else:
        zk.kazoo.create(path, data, makepath=True)


def errors_naming(caplog, path: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING and path in r.getMessage() and r.exc_info is None
    ]


def test_corrupt_broker_registration_is_skipped(zk, caplog) -> None:
    zk.register_broker(BrokerInfo(1, "127.0.0.1", 9091))
    put(zk, paths.broker(2), BAD)
    assert list(zk.get_all_brokers()) == [1]
    assert zk.get_broker(2) is None
    assert errors_naming(caplog, "/brokers/ids/2")


def test_corrupt_controller_znode_is_no_controller(zk, caplog) -> None:
    put(zk, paths.CONTROLLER, b'{"brokerid": "x"}')
    assert zk.get_controller_id() is None
    assert zk.try_become_controller(1) is None  # the node exists: nobody wins until it goes
    zk.resign_controller(1)
    assert zk.kazoo.exists(paths.CONTROLLER)
    assert errors_naming(caplog, "/controller")
    zk.kazoo.delete(paths.CONTROLLER)
    assert zk.try_become_controller(1) is not None


def test_corrupt_controller_epoch_falls_back_to_its_version(zk, caplog) -> None:
    won = zk.try_become_controller(1)
    assert won == (1, 1)
    zk.resign_controller(1)
    put(zk, paths.CONTROLLER_EPOCH, b"garbage")  # version 2
    assert zk.get_controller_epoch() == (2, 2)
    assert errors_naming(caplog, "/controller_epoch")
    assert zk.try_become_controller(1) == (3, 3)
    assert zk.kazoo.get(paths.CONTROLLER_EPOCH)[0] == b"3"  # repaired by the bump


def test_corrupt_topic_and_partition_state_are_absent(zk, caplog) -> None:
    zk.create_topic("good", {0: [1]}, {})
    zk.create_topic("bad", {0: [1]}, {})
    put(zk, paths.topic("bad"), b'{"partitions": {"0": "1"}}')
    assert set(zk.get_topics(["good", "bad"])) == {"good"}
    assert zk.get_topic("bad") is None
    assert errors_naming(caplog, "/brokers/topics/bad")

    good, bad = TopicPartition("good", 0), TopicPartition("bad", 0)
    state = LeaderIsr(leader=1, leader_epoch=0, isr=[1], controller_epoch=1)
    epoch_version = zk.try_become_controller(1)[1]
    zk.create_partition_states({good: state, bad: state}, epoch_version)
    put(zk, paths.partition_state("bad", 0), b"[]")
    assert set(zk.get_partition_states([good, bad])) == {good}
    assert errors_naming(caplog, paths.partition_state("bad", 0))


def test_corrupt_config_is_empty(zk, caplog) -> None:
    zk.create_topic("t", {0: [1]}, {"retention.ms": "1000"})
    zk.create_topic("u", {0: [1]}, {"retention.ms": "2000"})
    put(zk, paths.topic_config("t"), BAD)
    assert zk.get_topic_config("t") == {}
    assert zk.get_topic_configs(["t", "u"]) == {"t": {}, "u": {"retention.ms": "2000"}}
    put(zk, "/config/brokers/1", b'{"config": 5}')
    assert zk.get_entity_config("brokers", "1") == {}
    assert errors_naming(caplog, "/config/topics/t")
    assert errors_naming(caplog, "/config/brokers/1")


def test_corrupt_admin_requests_are_ignored(zk, caplog) -> None:
    put(zk, paths.REASSIGN_PARTITIONS, BAD)
    put(zk, paths.PREFERRED_REPLICA_ELECTION, b'{"partitions": 1}')
    assert zk.get_reassignments() == {}
    assert zk.get_preferred_election() == set()
    assert errors_naming(caplog, paths.REASSIGN_PARTITIONS)
    assert errors_naming(caplog, paths.PREFERRED_REPLICA_ELECTION)


def test_corrupt_cluster_id_and_producer_block_raise_naming_the_path(zk) -> None:
    put(zk, paths.CLUSTER_ID, b'{"version": "1"}')
    with pytest.raises(ZnodeDataError) as err:
        zk.get_or_create_cluster_id()
    assert err.value.path == paths.CLUSTER_ID
    put(zk, paths.LATEST_PRODUCER_ID_BLOCK, BAD)
    with pytest.raises(ZnodeDataError) as err:
        zk.allocate_producer_id_block(1)
    assert err.value.path == paths.LATEST_PRODUCER_ID_BLOCK


def test_watch_callback_decode_error_is_one_line_without_traceback(zk, wait_for,
                                                                   caplog) -> None:
    from weir.coordination import codecs

    seen: list[bytes] = []

    def callback(data, _stat) -> None:
        if data:
            seen.append(data)
            codecs.decode_reassignment(data)

    zk.watch_data(paths.REASSIGN_PARTITIONS, callback)
    put(zk, paths.REASSIGN_PARTITIONS, BAD)
    wait_for(lambda: seen)
    wait_for(lambda: errors_naming(caplog, paths.REASSIGN_PARTITIONS))
    assert not [r for r in caplog.records if r.exc_info]

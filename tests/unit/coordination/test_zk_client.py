"""ZkClient against a real ZooKeeper (one server per module, one chroot per test)."""

import uuid

import pytest
from kazoo.client import KazooClient

from weir.common import TopicPartition
from weir.coordination import codecs, fenced, paths
from weir.coordination.codecs import BrokerInfo, LeaderIsr
from weir.coordination.errors import (
    BrokerIdInUseError,
    ControllerMovedError,
    ZkNodeExistsError,
    ZkNoNodeError,
    ZkVersionMismatchError,
)
from weir.coordination.zk import ZkClient, split_connect
from weir.protocol.errors import ErrorCode, KafkaError
from weir.server.topic_admin import TopicAdmin, TopicAdminSettings

SETTINGS = TopicAdminSettings(num_partitions=1, default_replication_factor=1,
                              delete_topic_enable=True)


def broker(broker_id: int) -> BrokerInfo:
    return BrokerInfo(id=broker_id, host="127.0.0.1", port=9090 + broker_id, rack=None)


def test_split_connect() -> None:
    assert split_connect("a:1,b:2/weir/x") == ("a:1,b:2", "/weir/x")
    assert split_connect("a:1") == ("a:1", "")
    assert split_connect("a:1/") == ("a:1", "")


def test_chroot_is_created_and_isolates(zk, zk_server, connect) -> None:
    zk.create_topic("t", {0: [1]}, {})
    root = KazooClient(hosts=zk_server.connect_string)
    root.start(timeout=10)
    try:
        chroot = split_connect(connect)[1]
        assert root.exists(f"{chroot}/brokers/topics/t")
        assert not root.exists("/brokers/topics/t")
    finally:
        root.stop()
        root.close()


def test_cluster_id_is_created_once(zk, make_client) -> None:
    cluster_id = zk.get_or_create_cluster_id()
    assert len(cluster_id) == 22
    assert make_client().get_or_create_cluster_id() == cluster_id


def test_register_broker_and_epoch(zk, make_client) -> None:
    epoch = zk.register_broker(broker(1))
    _, stat = zk.kazoo.get(paths.broker(1))
    assert epoch == stat.czxid and stat.ephemeralOwner == zk.session_id
    assert zk.register_broker(broker(1)) == epoch  # same session: idempotent
    other = make_client()
    other.register_broker(broker(2))
    brokers = zk.get_all_brokers()
    assert sorted(brokers) == [1, 2]
    assert brokers[1].epoch == epoch and brokers[1].port == 9091
    assert brokers[2].epoch > epoch
    assert zk.get_broker(2) == brokers[2]
    assert zk.get_broker(3) is None
    with pytest.raises(BrokerIdInUseError, match="broker id 1"):
        other.register_broker(broker(1))


def test_session_close_removes_ephemeral_broker(make_client, wait_for) -> None:
    first, observer = make_client(), make_client()
    old_epoch = first.register_broker(broker(1))
    first.stop()
    wait_for(lambda: observer.get_broker(1) is None)
    assert observer.register_broker(broker(1)) > old_epoch


def test_session_listener_sees_states(make_client, wait_for) -> None:
    client = make_client()
    states: list[str] = []
    client.add_session_listener(states.append)
    client.stop()
    wait_for(lambda: "LOST" in states)


def test_controller_election_and_epoch(make_client, wait_for) -> None:
    a, b = make_client(), make_client()
    assert a.get_controller_id() is None
    assert a.try_become_controller(1) == (1, 1)
    assert b.try_become_controller(2) is None
    assert b.get_controller_id() == 1
    assert a.try_become_controller(1) == (1, 1)  # already ours
    a.stop()
    wait_for(lambda: b.get_controller_id() is None)
    assert b.try_become_controller(2) == (2, 2)
    assert b.get_controller_epoch() == (2, 2)
    b.resign_controller(2)
    assert b.get_controller_id() is None


def tp(p: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic, p)


def state(leader: int, version: int = -1) -> LeaderIsr:
    return LeaderIsr(
        leader=leader, leader_epoch=0, isr=[leader, 2], controller_epoch=1, zk_version=version
    )


def test_create_and_update_partition_states(zk) -> None:
    zk.create_topic("t", {0: [1, 2], 1: [2, 1], 2: [1, 2]}, {})
    _, epoch_version = zk.try_become_controller(1)
    created = zk.create_partition_states({tp(p): state(1) for p in range(3)}, epoch_version)
    assert all(isinstance(s, LeaderIsr) and s.zk_version == 0 for s in created.values())
    again = zk.create_partition_states({tp(0): state(1)}, epoch_version)
    assert isinstance(again[tp(0)], ZkNodeExistsError)
    read = zk.get_partition_states([tp(0), tp(1), tp(2), tp(9)])
    assert read == {tp(p): state(1, 0) for p in range(3)}

    updates = {tp(0): state(2, 0), tp(1): state(2, 5), tp(2): state(2, 0), tp(7): state(2, 0)}
    results = zk.update_partition_states(updates, epoch_version)
    assert results[tp(0)] == state(2, 1) and results[tp(2)] == state(2, 1)
    assert isinstance(results[tp(1)], ZkVersionMismatchError)
    assert results[tp(1)].code is ErrorCode.invalid_update_version
    assert isinstance(results[tp(7)], ZkNoNodeError)
    assert zk.get_partition_states([tp(0), tp(1)]) == {tp(0): state(2, 1), tp(1): state(1, 0)}


def test_state_updates_sent_together_and_awaited_in_turn(zk) -> None:
    """start_partition_state_updates sends now; its result waits: two writes in flight at
    once from one thread, each with its own results (a stale version stays its own)."""
    zk.create_topic("t", {p: [1, 2] for p in range(4)}, {})
    _, epoch_version = zk.try_become_controller(1)
    zk.create_partition_states({tp(p): state(1) for p in range(4)}, epoch_version)
    first = zk.start_partition_state_updates({tp(0): state(2, 0), tp(1): state(2, 0)},
                                             epoch_version)
    second = zk.start_partition_state_updates({tp(2): state(2, 0), tp(3): state(2, 7)},
                                              epoch_version)
    assert first() == {tp(0): state(2, 1), tp(1): state(2, 1)}
    later = second()
    assert later[tp(2)] == state(2, 1) and isinstance(later[tp(3)], ZkVersionMismatchError)
    assert zk.get_partition_states([tp(3)]) == {tp(3): state(1, 0)}


def test_partial_failures_across_chunks(zk, monkeypatch) -> None:
    monkeypatch.setattr(fenced, "CHUNK", 2)
    zk.create_topic("t", {p: [1] for p in range(5)}, {})
    _, epoch_version = zk.try_become_controller(1)
    zk.create_partition_states({tp(p): state(1) for p in range(5)}, epoch_version)
    stale = {1, 2, 4}
    updates = {tp(p): state(3, 9 if p in stale else 0) for p in range(5)}
    results = zk.update_partition_states(updates, epoch_version)
    for p in range(5):
        if p in stale:
            assert isinstance(results[tp(p)], ZkVersionMismatchError)
        else:
            assert results[tp(p)] == state(3, 1)


def test_fenced_writes_rejected_after_new_controller(make_client) -> None:
    old, new = make_client(), make_client()
    old.ensure_paths()
    old.create_topic("t", {0: [1, 2]}, {})
    _, old_version = old.try_become_controller(1)
    old.create_partition_states({tp(0): state(1)}, old_version)
    # The old controller's session is as good as expired: its /controller node goes away
    # and another broker is elected, bumping /controller_epoch.
    new.kazoo.delete(paths.CONTROLLER)
    assert new.try_become_controller(2) == (2, 2)
    with pytest.raises(ControllerMovedError) as err:
        old.update_partition_states({tp(0): state(2, 0)}, old_version)
    assert err.value.code is ErrorCode.not_controller
    with pytest.raises(ControllerMovedError):
        old.create_partition_states({tp(1): state(1)}, old_version)
    with pytest.raises(ControllerMovedError):
        old.delete_topic_znodes("t", old_version)
    assert new.get_partition_states([tp(0)])[tp(0)] == state(1, 0)


def test_create_topic_and_configs(zk) -> None:
    topic_id = zk.create_topic("orders", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    assignment = zk.get_topic("orders")
    assert assignment.topic_id == topic_id
    assert assignment.partitions == {0: [1, 2], 1: [2, 1]}
    assert assignment.zk_version == 0
    assert zk.get_topic_names() == ["orders"]
    assert zk.get_topic_config("orders") == {"retention.ms": "1000"}
    assert zk.get_topics(["orders", "missing"]) == {"orders": assignment}
    assert zk.get_topic("missing") is None
    with pytest.raises(KafkaError) as err:
        zk.create_topic("orders", {0: [1]}, {})
    assert err.value.code is ErrorCode.topic_already_exists
    zk.create_topic("a.b", {0: [1]}, {})
    with pytest.raises(KafkaError) as err:  # TopicAdmin's rule: '.' and '_' collide
        TopicAdmin(zk, SETTINGS).create_topic_with_assignment("a_b", {0: [1]}, {})
    assert err.value.code is ErrorCode.invalid_topic_exception
    given = uuid.uuid4()
    assert zk.create_topic("fixed", {0: [1]}, {}, topic_id=given) == given


def test_set_topic_config_posts_change_notification(zk) -> None:
    zk.create_topic("t", {0: [1]}, {})
    zk.set_topic_config("t", {"cleanup.policy": "compact"})
    assert zk.get_topic_config("t") == {"cleanup.policy": "compact"}
    changes = zk.get_children(paths.CONFIG_CHANGES)
    assert len(changes) == 1 and changes[0].startswith("config_change_")
    data, _ = zk.get_data(f"{paths.CONFIG_CHANGES}/{changes[0]}")
    assert codecs.decode_config_change(data) == "topics/t"


def test_add_partitions_is_conditional(zk) -> None:
    admin = TopicAdmin(zk, SETTINGS)
    zk.create_topic("t", {0: [1]}, {})
    version = zk.get_topic("t").zk_version
    assert admin.add_partitions("t", {1: [2]}, version) == version + 1
    assert zk.get_topic("t").partitions == {0: [1], 1: [2]}
    with pytest.raises(ZkVersionMismatchError):
        admin.add_partitions("t", {2: [1]}, version)
    with pytest.raises(KafkaError) as err:
        admin.add_partitions("t", {1: [1]}, version + 1)
    assert err.value.code is ErrorCode.invalid_partitions
    with pytest.raises(KafkaError) as err:
        admin.add_partitions("nope", {0: [1]}, 0)
    assert err.value.code is ErrorCode.unknown_topic_or_partition


def test_topic_deletion(zk) -> None:
    zk.create_topic("t", {0: [1], 1: [1]}, {"retention.ms": "5"})
    _, epoch_version = zk.try_become_controller(1)
    zk.create_partition_states({tp(0): state(1), tp(1): state(1)}, epoch_version)
    admin = TopicAdmin(zk, SETTINGS)
    admin.delete_topic("t")
    zk.mark_topic_for_deletion("t")  # idempotent
    assert zk.get_topics_to_delete() == ["t"]
    assert zk.is_topic_marked_for_deletion("t")
    with pytest.raises(KafkaError) as err:
        zk.create_topic("t", {0: [1]}, {})
    assert err.value.code is ErrorCode.topic_already_exists
    with pytest.raises(KafkaError) as err:
        admin.delete_topic("missing")
    assert err.value.code is ErrorCode.unknown_topic_or_partition
    zk.delete_topic_znodes("t", epoch_version)
    assert zk.get_topic("t") is None
    assert zk.get_topics_to_delete() == []
    assert zk.get_data(paths.topic_config("t")) is None
    assert zk.get_partition_states([tp(0)]) == {}
    zk.create_topic("t", {0: [1]}, {})  # the name is free again


def test_reassignment_and_preferred_election(zk) -> None:
    _, epoch_version = zk.try_become_controller(1)
    assert zk.get_reassignments() == {}
    zk.create_reassignments({tp(0): [2, 3]})
    with pytest.raises(KafkaError) as err:
        zk.create_reassignments({tp(1): [1]})
    assert err.value.code is ErrorCode.reassignment_in_progress
    zk.set_reassignments({tp(0): [2, 3], tp(1): [3]}, epoch_version)
    assert zk.get_reassignments() == {tp(0): [2, 3], tp(1): [3]}
    zk.set_reassignments({}, epoch_version)
    assert zk.get_data(paths.REASSIGN_PARTITIONS) is None
    zk.create_preferred_election([tp(0), tp(1)])
    assert zk.get_preferred_election() == {tp(0), tp(1)}
    zk.delete_preferred_election(epoch_version)
    assert zk.get_preferred_election() == set()


def test_producer_id_blocks_are_disjoint(zk, make_client) -> None:
    first = zk.allocate_producer_id_block(1)
    second = make_client().allocate_producer_id_block(2)
    assert (first.block_start, first.block_end) == (0, 999)
    assert (second.broker, second.block_start, second.block_end) == (2, 1000, 1999)


def test_children_watch_fires_on_every_change(zk, make_client, wait_for) -> None:
    seen: list[list[str]] = []
    watch = zk.watch_children(paths.BROKER_IDS, seen.append)
    wait_for(lambda: seen == [[]])
    other = make_client()
    other.register_broker(broker(1))
    wait_for(lambda: seen[-1] == ["1"])
    zk.register_broker(broker(2))
    wait_for(lambda: seen[-1] == ["1", "2"])
    other.stop()
    wait_for(lambda: seen[-1] == ["2"])
    watch.cancel()
    count = len(seen)
    zk.register_broker(broker(3))
    wait_for(lambda: len(zk.get_all_brokers()) == 2)
    assert len(seen) <= count + 1  # a cancelled watch fires at most once more (dropping itself)


def test_data_and_exists_watch(zk, make_client, wait_for) -> None:
    events: list[tuple[bytes | None, object]] = []
    stats: list[object] = []
    zk.watch_data(paths.CONTROLLER, lambda data, stat: events.append((data, stat)))
    zk.watch_exists(paths.CONTROLLER, stats.append)
    wait_for(lambda: events == [(None, None)] and stats == [None])
    other = make_client()
    other.try_become_controller(7)
    wait_for(lambda: events[-1][0] is not None and stats[-1] is not None)
    assert codecs.decode_controller(events[-1][0]) == 7
    other.resign_controller(7)
    wait_for(lambda: events[-1] == (None, None) and stats[-1] is None)


def test_watch_callback_errors_do_not_break_the_watch(zk, wait_for) -> None:
    calls: list[list[str]] = []

    def flaky(children: list[str]) -> None:
        calls.append(children)
        raise RuntimeError("boom")

    zk.watch_children(paths.DELETE_TOPICS, flaky)
    zk.create_topic("t", {0: [1]}, {})
    zk.mark_topic_for_deletion("t")
    wait_for(lambda: calls and calls[-1] == ["t"])
    zk.create_topic("u", {0: [1]}, {})
    zk.mark_topic_for_deletion("u")
    wait_for(lambda: calls[-1] == ["t", "u"])


def test_start_times_out_without_server() -> None:
    client = ZkClient("127.0.0.1:1/x", connection_timeout_ms=500)
    with pytest.raises(Exception):  # noqa: B017 - kazoo's handler-specific timeout
        client.start()


def test_session_expiry_then_reregistration(zk_server, make_client, wait_for) -> None:
    client, observer = make_client(), make_client()
    states: list[str] = []
    client.add_session_listener(states.append)
    old_epoch = client.register_broker(broker(1))
    old_session = client.session_id
    # Expire the session the classic way: another connection with the same session id
    # and password closes it on the server.
    twin = KazooClient(hosts=zk_server.connect_string, client_id=client.kazoo.client_id)
    twin.start(timeout=10)
    twin.stop()
    twin.close()
    wait_for(lambda: "LOST" in states)
    wait_for(lambda: observer.get_broker(1) is None)
    wait_for(lambda: states[-1] == "CONNECTED" and client.session_id != old_session)
    assert client.register_broker(broker(1)) > old_epoch
    assert observer.get_broker(1) is not None

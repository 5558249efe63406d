"""The simulation's ZooKeeper: the production ZkClient on the znode-level ensemble
behaves as ZkClient on ZooKeeper does for the controller."""

from __future__ import annotations

import dataclasses

import pytest

from weir.common import TopicPartition
from weir.controller import executor
from weir.controller.context import ReplicaAssignment
from weir.controller.effects import ZkSetReassignments, ZkUpdateTopicAssignments
from weir.coordination import paths
from weir.coordination.codecs import LeaderIsr
from weir.coordination.errors import (
    ControllerMovedError,
    ZkNodeExistsError,
    ZkNoNodeError,
    ZkVersionMismatchError,
)
from weir.protocol.errors import ErrorCode, KafkaError
from weir.sim.zk import SimZk, SimZkClient

T0 = TopicPartition("t", 0)


def _elected() -> tuple[SimZk, SimZkClient, int]:
    zk = SimZk()
    client = SimZkClient(zk, 1)
    zk.register_broker(1, client.session)
    won = client.try_become_controller(1)
    assert won == (1, 1)
    zk.create_topic("t", {0: [1, 2]})
    return zk, client, won[1]


def test_writes_are_fenced_by_the_controller_epoch_version() -> None:
    zk, client, version = _elected()
    state = LeaderIsr(1, 0, [1, 2], 1)
    assert client.create_partition_states({T0: state}, version)[T0].zk_version == 0
    other = SimZkClient(zk, 2)
    zk.register_broker(2, other.session)
    late = SimZkClient(zk, 1)  # a write of broker 1 still on its way in another session
    zk.expire(client.session)  # the controller's session goes: /controller with it
    assert zk.controller is None and 1 not in zk.brokers
    assert other.try_become_controller(2) == (2, 2)
    with pytest.raises(ControllerMovedError):  # the deposed controller: fenced
        late.update_partition_states({T0: dataclasses.replace(state, zk_version=0)}, version)
    assert zk.states[T0].zk_version == 0  # nothing of it was applied
    with pytest.raises(ControllerMovedError):  # and its session is gone
        client.get_partition_states([T0])


def test_states_and_topic_znodes_are_conditional_on_their_versions() -> None:
    _zk, client, version = _elected()
    state = LeaderIsr(1, 0, [1, 2], 1)
    client.create_partition_states({T0: state}, version)
    assert isinstance(client.create_partition_states({T0: state}, version)[T0],
                      ZkNodeExistsError)
    assert isinstance(client.create_partition_states(
        {TopicPartition("gone", 0): state}, version)[TopicPartition("gone", 0)], ZkNoNodeError)
    stale = client.update_partition_states({T0: dataclasses.replace(state, zk_version=5)},
                                           version)[T0]
    assert isinstance(stale, ZkVersionMismatchError)
    assert client.update_partition_states({T0: dataclasses.replace(state, zk_version=0)},
                                          version)[T0].zk_version == 1
    topic = client.get_topic("t")
    assert topic is not None
    with pytest.raises(ZkVersionMismatchError):
        client.set_topic_assignment(topic, topic.zk_version + 1, version)
    assert client.set_topic_assignment(topic, topic.zk_version, version) == topic.zk_version + 1


def test_reassignment_operations_run_through_the_one_executor() -> None:
    zk, client, version = _elected()
    zk.create_reassignments({T0: [2, 3]})
    with pytest.raises(KafkaError) as refused:
        zk.create_reassignments({T0: [3, 1]})
    assert refused.value.code == ErrorCode.reassignment_in_progress
    moving = ReplicaAssignment((2, 3, 1), adding=(3,), removing=(1,))
    result = executor.execute(client, ZkUpdateTopicAssignments({"t": {0: moving}}, version))
    assert result == {"t": None}
    topic = client.get_topic("t")
    assert topic is not None and topic.adding == {0: [3]} and topic.removing == {0: [1]}
    executor.execute(client, ZkSetReassignments({}, version))
    assert client.get_reassignments() == {} and zk.data(paths.REASSIGN_PARTITIONS) is None
    with pytest.raises(ControllerMovedError):
        executor.execute(client, ZkSetReassignments({}, version + 1))


def test_watches_fire_at_registration_and_on_change_and_sessions_hear_lost() -> None:
    zk, controller, version = _elected()
    client = SimZkClient(zk, 2)
    seen: list[object] = []
    states: list[str] = []
    client.add_session_listener(states.append)
    client.watch_children(paths.BROKER_TOPICS, seen.append)
    watch = client.watch_data(paths.topic("u"), lambda data, _stat: seen.append(data))
    assert seen == [["t"], None]
    zk.create_topic("u", {0: [1]})
    assert len(seen) == 4 and ["t", "u"] in seen[2:] and any(
        isinstance(s, bytes) and b'"partitions"' in s for s in seen[2:])
    watch.cancel()
    zk.mark_for_deletion("u")
    controller.delete_topic_znodes("u", version)
    assert seen[-1] == ["t"] and len(seen) == 5
    zk.expire(client.session)
    assert states == ["LOST"]
    client.reconnect()
    assert client.connected

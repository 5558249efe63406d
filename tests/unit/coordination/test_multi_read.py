"""Batched znode reads (ZooKeeper multiRead, weir.coordination.multi_read) used by controller
failover, on a real server."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from kazoo.exceptions import UnimplementedError

from weir.common import TopicPartition
from weir.coordination.codecs import LeaderIsr
from weir.coordination.multi_read import BatchedReader
from weir.coordination.zk import ZkClient
from weir.coordination.zkserver import ZooKeeperServer

_chroots = itertools.count()


@pytest.fixture
def zk(zk_server: ZooKeeperServer) -> Iterator[ZkClient]:
    client = ZkClient(f"{zk_server.connect_string}/batched-{next(_chroots)}")
    client.start()
    client.ensure_paths()
    try:
        yield client
    finally:
        client.stop()


def _state(leader: int, epoch: int) -> LeaderIsr:
    return LeaderIsr(leader=leader, leader_epoch=epoch, isr=[leader, 9], controller_epoch=1)


def _write(zk: ZkClient, count: int) -> dict[TopicPartition, LeaderIsr]:
    zk.create_topic("t", {p: [1, 2] for p in range(count)}, {})
    states = {TopicPartition("t", p): _state(p % 3, p) for p in range(count)}
    version = zk.get_controller_epoch()
    assert version is None
    zk.try_become_controller(1)
    epoch = zk.get_controller_epoch()
    assert epoch is not None
    created = zk.create_partition_states(states, epoch[1])
    assert all(isinstance(v, LeaderIsr) for v in created.values())
    return states


def test_multi_read_across_chunks_with_missing_nodes(zk: ZkClient) -> None:
    zk._reads.chunk = 7
    states = _write(zk, 30)
    missing = [TopicPartition("t", 99), TopicPartition("gone", 0)]
    wanted = [*missing[:1], *states, *missing[1:]]
    read = zk.get_partition_states(wanted)
    assert set(read) == set(states)
    for tp, state in states.items():
        assert read[tp] == LeaderIsr(state.leader, state.leader_epoch, state.isr,
                                     state.controller_epoch, zk_version=0)
    assert zk._reads.multi_read  # the server has multiRead: no fallback happened


def test_multi_read_matches_one_by_one_reads(zk: ZkClient) -> None:
    states = _write(zk, 20)
    batched = zk.get_partition_states(states)
    zk._reads.multi_read = False
    assert zk.get_partition_states(states) == batched
    assert len(zk.get_topics(["t", "nope"])) == 1


def test_falls_back_without_multi_read(zk: ZkClient, monkeypatch) -> None:
    states = _write(zk, 10)

    def unimplemented(self: BatchedReader, wanted: list[str]) -> dict:
        raise UnimplementedError()

    monkeypatch.setattr(BatchedReader, "get_many_multi", unimplemented)
    assert len(zk.get_partition_states(states)) == 10
    assert zk._reads.multi_read is False


def test_topic_configs_batched(zk: ZkClient) -> None:
    for i in range(10):
        zk.create_topic(f"c{i}", {0: [1]}, {"retention.ms": str(i)} if i % 2 else {})
    configs = zk.get_topic_configs([f"c{i}" for i in range(10)] + ["none"])
    assert configs["c3"] == {"retention.ms": "3"} and configs["c2"] == {}
    assert configs["none"] == {}
    assert all(configs[f"c{i}"] == zk.get_topic_config(f"c{i}") for i in range(10))


def test_large_batches_go_out_as_multi_read_small_ones_pipelined(zk: ZkClient,
                                                                 monkeypatch) -> None:
    states = _write(zk, 12)
    calls: list[tuple[str, int]] = []
    for name in ("get_many_multi", "get_many_pipelined"):
        real = getattr(BatchedReader, name)

        def spy(self, wanted, real=real, name=name):
            calls.append((name, len(wanted)))
            return real(self, wanted)

        monkeypatch.setattr(BatchedReader, name, spy)
    assert len(zk.get_partition_states(states)) == 12
    assert len(zk.get_partition_states(list(states)[:3])) == 3
    assert calls == [("get_many_multi", 12), ("get_many_pipelined", 3)]

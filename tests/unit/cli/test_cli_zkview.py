"""Snapshot collection from a ZkClient-like object and the text rendering."""

from __future__ import annotations

from cli_fakes import FakeZk, broker, state

from weir.common import TopicPartition
from weir.ops.zkview import collect_snapshot, format_table, registered_broker_ids, render_snapshot


def cluster_zk() -> FakeZk:
    zk = FakeZk(brokers=[broker(2), broker(1)], controller=2, epoch=4)
    zk.topics = {"orders": {0: [1, 2, 3], 1: [2, 3, 1]}, "logs": {0: [3]}}
    zk.states = {
        TopicPartition("orders", 0): state(1, [1, 2], epoch=3),
        TopicPartition("orders", 1): state(2, [2, 3, 1]),
        TopicPartition("logs", 0): state(3, [3]),
    }
    return zk


def test_collect_snapshot() -> None:
    snap = collect_snapshot(cluster_zk())
    assert [b.id for b in snap.brokers] == [1, 2]
    assert snap.controller_id == 2 and snap.controller_epoch == 4
    assert snap.topics == ["logs", "orders"]
    by_tp = {(p.topic, p.partition): p for p in snap.partitions}
    assert by_tp[("orders", 0)].leader_epoch == 3
    assert by_tp[("orders", 0)].replicas == [1, 2, 3]
    assert [(p.topic, p.partition) for p in snap.offline()] == [("logs", 0)]  # 3 not registered
    assert {(p.topic, p.partition) for p in snap.under_replicated()} == {("orders", 0)}


def test_no_controller_and_missing_state() -> None:
    zk = FakeZk(brokers=[broker(1)], controller=-1, topics={"t": {0: [1]}})
    snap = collect_snapshot(zk)
    assert snap.controller_id is None
    assert snap.partitions[0].leader == -1
    assert len(snap.offline()) == 1


def test_registered_broker_ids() -> None:
    assert registered_broker_ids(cluster_zk()) == {1, 2}


def test_format_table_aligns() -> None:
    text = format_table(["a", "bb"], [[1, [1, 2]], ["long", None]])
    assert text.splitlines() == ["a     bb", "----  ---", "1     1,2", "long  -"]


def test_render_snapshot_local() -> None:
    text = render_snapshot(collect_snapshot(cluster_zk()), processes={1: 111, 2: 222, 3: None})
    lines = text.splitlines()
    assert lines[0].split() == ["broker", "pid", "endpoints", "registered", "controller"]
    assert lines[2].split() == ["1", "111", "PLAINTEXT://127.0.0.1:9092", "yes"]
    assert lines[3].split()[-1] == "*"
    assert lines[4].split() == ["3", "-", "-", "no"]
    assert "controller: 2 (epoch 4)" in text
    assert "topics: 2  partitions: 3  offline: 1  under-replicated: 1" in text
    assert any(line.split()[:2] == ["logs", "0"] and "OFFLINE" in line for line in lines)
    assert any(line.startswith("orders") and "under-replicated" in line for line in lines)


def test_render_snapshot_without_partitions() -> None:
    text = render_snapshot(collect_snapshot(cluster_zk()), partitions=False)
    assert "orders" not in text and "pid" not in text.splitlines()[0]

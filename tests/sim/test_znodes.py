"""The znode-level ZooKeeper fake answers as ZooKeeper and kazoo do."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, WatchedEvent

from weir.sim.znodes import SimKazoo, ZnodeTree


class _Clock:
    """A schedule that runs nothing until told (latency 5 ms, then 1 ms)."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, int, Callable[[], None]]] = []
        self.latencies = [5, 1, 1, 1, 1, 1]

    def schedule(self, delay: int, fn: Callable[[], None]) -> None:
        self.pending.append((delay, len(self.pending), fn))

    def latency(self) -> int:
        return self.latencies.pop(0) if self.latencies else 1

    def run(self) -> None:
        while self.pending:
            self.pending.sort(key=lambda p: (p[0], p[1]))
            self.pending.pop(0)[2]()


def test_versions_conditional_writes_and_errors() -> None:
    zk = SimKazoo(ZnodeTree())
    assert zk.create("/a", b"1") == "/a"
    with pytest.raises(NodeExistsError):
        zk.create("/a")
    with pytest.raises(NoNodeError):
        zk.create("/x/y")
    assert zk.create("/x/y", makepath=True) == "/x/y"
    assert zk.set("/a", b"2", version=0).version == 1
    with pytest.raises(BadVersionError):
        zk.set("/a", b"3", version=0)
    with pytest.raises(NotEmptyError):
        zk.delete("/x")
    with pytest.raises(BadVersionError):
        zk.delete("/a", version=7)
    data, stat = zk.get("/a")
    assert data == b"2" and stat.version == 1 and stat.mzxid > stat.czxid
    assert zk.get("/")[1].cversion == 2 and zk.get_children("/") == ["a", "x"]
    assert zk.delete("/a", version=1) and zk.exists("/a") is None


def test_sequential_nodes_are_numbered_by_the_children_created_before() -> None:
    zk = SimKazoo(ZnodeTree())
    zk.create("/q")
    zk.create("/q/other")
    assert zk.create("/q/n-", sequence=True) == "/q/n-0000000001"
    zk.delete("/q/other")  # the parent's cversion moves, the numbering does not
    assert zk.get("/q")[1].cversion == 3
    assert zk.create("/q/n-", sequence=True) == "/q/n-0000000002"


def test_a_multi_applies_all_or_nothing_with_zookeepers_per_operation_errors() -> None:
    tree = ZnodeTree()
    zk = SimKazoo(tree)
    zk.create("/e", b"0")
    zxid = tree.zxid
    txn = zk.transaction()
    txn.check("/e", 0)
    txn.create("/new")
    txn.set_data("/e", b"1", version=5)  # stale
    txn.delete("/missing")
    results = txn.commit()
    assert isinstance(results[0], RolledBackError) and isinstance(results[1], RolledBackError)
    assert isinstance(results[2], BadVersionError)
    assert isinstance(results[3], RuntimeInconsistency)
    assert zk.exists("/new") is None and zk.get("/e")[0] == b"0"  # nothing applied
    assert zk.get("/")[1].cversion == 1
    txn = zk.transaction()
    txn.check("/e", 0)
    txn.create("/new", b"n")
    txn.set_data("/e", b"1", version=0)
    assert [type(r).__name__ for r in txn.commit()] == ["bool", "str", "ZnodeStat"]
    assert zk.get("/new")[1].czxid == zk.get("/e")[1].mzxid > zxid  # one zxid per multi


def test_ephemerals_go_with_their_session_and_a_dead_session_fails_calls() -> None:
    tree = ZnodeTree()
    owner, other = SimKazoo(tree), SimKazoo(tree)
    owner.create("/brokers", b"")
    owner.create("/brokers/1", b"b1", ephemeral=True)
    assert owner.get("/brokers/1")[1].ephemeralOwner == owner.session
    with pytest.raises(NoChildrenForEphemeralsError):
        owner.create("/brokers/1/child")
    events: list[WatchedEvent] = []
    other.get_children("/brokers", watch=events.append)
    tree.expire(owner.session)
    assert other.get_children("/brokers") == []
    assert events == [WatchedEvent(EventType.CHILD, "CONNECTED", "/brokers")]
    with pytest.raises(SessionExpiredError):
        owner.get("/brokers")
    other.close()
    with pytest.raises(ConnectionClosedError):
        other.get("/brokers")


def test_watches_fire_once_in_order_per_session_through_the_schedule() -> None:
    clock = _Clock()
    tree = ZnodeTree(clock.schedule, clock.latency)
    zk = SimKazoo(tree)
    zk.create("/n", b"0")
    seen: list[str] = []
    zk.get("/n", watch=lambda e: seen.append(f"data {e.type}"))
    zk.exists("/m", watch=lambda e: seen.append(f"exists {e.type}"))
    zk.set("/n", b"1")  # delivered after 5 ms
    zk.create("/m")  # after 1 ms, yet after the first: one session's events keep order
    zk.set("/n", b"2")  # the data watch fired already: nothing more
    assert seen == []
    clock.run()
    assert seen == ["data CHANGED", "exists CREATED"]


def test_the_recipes_follow_changes_and_stop_on_false() -> None:
    tree = ZnodeTree()
    zk = SimKazoo(tree)
    zk.create("/d")
    data: list[object] = []
    children: list[list[str]] = []
    zk.DataWatch("/c", lambda d, stat: data.append(d))
    zk.ChildrenWatch("/d", lambda c: children.append(c) if len(children) < 2 else False)
    zk.create("/c", b"x")
    zk.set("/c", b"y")
    zk.delete("/c")
    zk.create("/d/1")
    zk.create("/d/2")
    zk.create("/d/3")
    assert data == [None, b"x", b"y", None]
    assert children == [[], ["1"]]

"""The simulation's znode-level ZooKeeper (weir.sim.znodes) answers as a real ZooKeeper:
one script of kazoo calls, run against both, gives the same results, errors, versions,
sequential names and watch events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.states import ZnodeStat

from tests.conftest import wait_for
from weir.coordination.zk import ZkClient
from weir.sim.znodes import SimKazoo, ZnodeTree


def _norm(value: Any) -> Any:
    if isinstance(value, ZnodeStat):
        return ("stat", value.version, value.cversion, value.dataLength, value.numChildren,
                value.ephemeralOwner != 0)
    if isinstance(value, Exception):
        return type(value).__name__
    if isinstance(value, tuple | list):
        return [_norm(v) for v in value]
    return value


def _script(zk: Any, settle: Callable[[Callable[[], bool]], None]) -> list[Any]:
    out: list[Any] = []

    def do(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        try:
            out.append(_norm(fn(*args, **kwargs)))
        except KazooException as exc:  # the error is the result
            out.append(_norm(exc))

    do(zk.create, "/t")
    do(zk.create, "/t/a", b"1")
    do(zk.create, "/t/a", b"again")
    do(zk.create, "/t/x/y")
    do(zk.create, "/t/x/y", b"", makepath=True)
    do(zk.set, "/t/a", b"22", version=0)
    do(zk.set, "/t/a", b"333", version=0)
    do(zk.create, "/t/q")
    do(zk.create, "/t/q/n-", b"", sequence=True)
    do(zk.create, "/t/q/n-", b"", sequence=True)
    do(zk.delete, "/t/q/n-0000000000")
    do(zk.exists, "/t/q")
    do(zk.create, "/t/q/n-", b"", sequence=True)
    do(lambda: sorted(zk.get_children("/t/q")))
    do(zk.exists, "/t/q")
    do(zk.delete, "/t/q/n-0000000001")
    do(zk.delete, "/t/q/" + max(zk.get_children("/t/q")))
    do(zk.exists, "/t/q")
    do(zk.create, "/t/q/n-", b"", sequence=True)
    do(zk.exists, "/t/q")
    do(zk.create, "/t/e", b"eph", ephemeral=True)
    do(zk.create, "/t/e/c")
    do(zk.exists, "/t/e")
    txn = zk.transaction()
    txn.check("/t/a", 1)
    txn.create("/t/new")
    txn.set_data("/t/a", b"x", version=5)
    txn.delete("/t/missing")
    do(txn.commit)
    do(zk.exists, "/t/new")
    txn = zk.transaction()
    txn.check("/t/a", 1)
    txn.create("/t/new", b"n")
    txn.set_data("/t/a", b"4444", version=1)
    txn.delete("/t/x/y")
    do(txn.commit)
    do(zk.get, "/t")
    do(zk.delete, "/t/x")
    do(zk.delete, "/t")
    do(zk.delete, "/t/a", version=9)
    events: list[Any] = []
    zk.get("/t/a", watch=lambda e: events.append(("data", e.type, e.path)))
    zk.get_children("/t/q", watch=lambda e: events.append(("children", e.type, e.path)))
    zk.exists("/t/m", watch=lambda e: events.append(("exists", e.type, e.path)))
    zk.set("/t/a", b"5")
    zk.set("/t/a", b"6")  # the data watch fired once already
    zk.create("/t/q/z")
    zk.create("/t/m")
    zk.delete("/t/m")  # the exists watch fired at the creation
    settle(lambda: len(events) >= 3)
    out.append(sorted(events))
    return out


def test_the_fake_answers_as_zookeeper(connect: str) -> None:
    bootstrap = ZkClient(connect)
    bootstrap.start()  # creates the chroot
    real = KazooClient(hosts=connect)
    real.start(timeout=20)
    try:
        expected = _script(real, lambda done: wait_for(done, timeout_s=20, what="events"))
    finally:
        real.stop()
        real.close()
        bootstrap.stop()
    got = _script(SimKazoo(ZnodeTree()), lambda done: None)
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        print(i, a, b, "" if a == b else "<<<")
    assert got == expected

"""The simulated world as the simulation's planes see it.

The data path (:mod:`weir.sim.data`), consumer groups (:mod:`weir.sim.groups`),
idempotent producers (:mod:`weir.sim.idempotent`), disk faults (:mod:`weir.sim.disk`) and
the invariants take a :class:`World`, not the :class:`~weir.sim.cluster.Simulation` that
implements it: they schedule with the one clock, draw from the one seeded ``rng``, send
through the simulated network, kill and restart brokers, and report violations, all
through these names (TigerBeetle's simulator hands its parts the same few handles: time,
the message bus, storage, and the PRNG).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from weir.sim.config import SimConfig
from weir.sim.vloop import VirtualTimeLoop
from weir.sim.zk import SimZk

__all__ = ["VirtualClock", "World"]


class World(Protocol):
    """What a plane of the simulation may use of the simulated world."""

    config: SimConfig
    rng: random.Random
    """The run's one source of randomness (``random.Random(seed)``)."""
    zk: SimZk
    """The ZooKeeper ensemble (its admin writes, session expiry, read-only views)."""
    # The planes' own types are named, not imported: this module sits below them all.
    nodes: dict[int, Any]
    """The simulated brokers (:class:`weir.sim.node.SimNode`) by id."""
    loop: VirtualTimeLoop
    data: Any
    """The data path (:class:`weir.sim.data.DataPlane`), or None."""
    groups: Any
    """The consumer groups (:class:`weir.sim.groups.GroupPlane`), or None."""
    txn: Any
    """The transactions (:class:`weir.sim.txn.TxnPlane`), or None."""
    disks: Any
    """The disk faults (:class:`weir.sim.disk.DiskFaults`), or None."""
    invariants: list[Any]
    """The checked :class:`weir.sim.invariants.Invariant` s."""
    faults: list[str]
    """The injected faults, in order (printed with a failing seed)."""
    ticking: bool
    """False once the run is over (periodic work stops rescheduling itself)."""

    @property
    def now(self) -> int:
        """Simulated milliseconds since the start."""
        ...

    def schedule(self, delay_ms: int, fn: Callable[[], object]) -> None:
        """Run ``fn`` after ``delay_ms`` as the world (in no broker process)."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task of the world."""
        ...

    def net_delay(self) -> int:
        """One message's network delay (ms), drawn from ``rng``."""
        ...

    def zk_latency(self) -> int:
        """One ZooKeeper round trip's half (ms), drawn from ``rng``."""
        ...

    def deliver(self, src: int, dst: int, fn: Callable[[], object]) -> None:
        """Send a message from broker ``src`` to ``dst`` (``fn`` runs on arrival), FIFO per
        link like one TCP connection."""
        ...

    def kill(self, node: Any, what: str, lose_unflushed: bool = False) -> None:
        """Crash a broker (``lose_unflushed``: a power loss); its ZooKeeper session expires
        later."""
        ...

    def restart(self, node: Any) -> None:
        """Start a dead broker again (once its old session has expired)."""
        ...

    def create_topic(self, name: str) -> None:
        """What kafka-topics --create writes."""
        ...

    def delete_topic(self, topic: str) -> None:
        """What kafka-topics --delete writes."""
        ...

    def violation(self, message: str) -> None:
        """Record a broken invariant."""
        ...


class VirtualClock:
    """A coordinator's clock (``weir.coordinator_runtime.Clock``) on the world's virtual
    time."""

    def __init__(self, world: World) -> None:
        self.world = world

    def now_ms(self) -> int:
        return self.world.now

    def monotonic(self) -> float:
        return self.world.loop.time()

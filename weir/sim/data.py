"""The data path of the simulation: producers, fetch traffic, power loss and the data
invariants (acks=all, min.insync.replicas, KIP-101 truncation), on top of the controller simulation in :mod:`weir.sim.cluster`.

Each broker incarnation has a :class:`~weir.sim.replica.SimReplicas` (the production
``ReplicaManager``, fetchers, purgatories and ``LogManager`` over real ``Log`` files under
one temporary directory per run).  Producers append with acks=all and
min.insync.replicas=2 through ``ReplicaManager.append``; an append is acknowledged when its
produce purgatory says so.  A simulated consumer (:meth:`DataPlane.observe`) reads each
partition from its current leader up to the high watermark.  The invariants, named objects
in :mod:`weir.sim.invariants` (its data-path section), are checked after every step (once a
partition is online, i.e. ZooKeeper's leader is alive and has applied that leader epoch):

* **no acknowledged record is lost**: every acknowledged (offset, value) is in the
  leader's log at that offset;
* **the committed offset never goes back**: let C be the largest high watermark any online
  leader ever exposed; every record a consumer read below C is still in the leader's log at
  its offset (a new leader's *high watermark* may start below C - it learns it from its
  followers - but its *log* never lacks what was committed, and by the end of the run its
  high watermark is back at or above C);
* **the high watermark of one leader epoch never decreases** on that leader;
* **replicas agree below the high watermark**: each follower that finished truncating for
  the current leader epoch holds byte-for-byte the leader's batches below
  min(its high watermark, the leader's).

Exemption, Kafka's durability model: acks=all relies on replication, not fsync.  A record
a broker lost to power failure (it was in its log, the machine lost its unflushed bytes)
may legitimately disappear if that very broker later leads without it; such losses are
counted as ``excused_losses`` and forgotten, never reported as violations (also by the
idempotent producers' "written once" check: a retry may write the batch again, at another
offset); the committed offset C then restarts at the first such offset (the new leader
cannot bring it back).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.sim.idempotent import IdempotentProducers
from weir.sim.replica import SimReplicas

if TYPE_CHECKING:
    from weir.sim.config import SimConfig
    from weir.sim.node import SimNode
    from weir.sim.world import World

__all__ = ["ACKNOWLEDGED", "COMMITTED", "DataPlane"]

ACKNOWLEDGED = "acknowledged"
COMMITTED = "committed"

Record = tuple[int, bytes]


class DataPlane:
    """Data-path state of a whole simulated cluster."""

    def __init__(self, sim: World, root: Path) -> None:
        self.sim = sim
        self.config: SimConfig = sim.config
        self.root = root
        self.disks = {b: root / f"broker-{b}" for b in sim.nodes}
        self._versions = itertools.count(1)
        self._values = itertools.count()
        self.acked: dict[TopicPartition, dict[int, bytes]] = {}
        self.consumed: dict[TopicPartition, dict[int, bytes]] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.amnesia: dict[tuple[TopicPartition, int, bytes], set[int]] = {}
        self.stats: Counter[str] = Counter()
        # (ACKNOWLEDGED or COMMITTED, tp) -> every promise made, in order (append-only)
        self.promises: dict[tuple[str, TopicPartition], list[Record]] = {}
        self.forgotten: Counter[str] = Counter()  # topic name -> times forgotten
        self._dying: dict[asyncio.Task[Any], None] = {}  # see bury
        # Idempotent producers (weir.sim.idempotent): half the produce turns, when enabled.
        self.idempotent = (IdempotentProducers(
            self, lambda tp, offset, value: self._promise(ACKNOWLEDGED, tp, offset, value))
            if self.config.idempotent_producers else None)
        # Every task of the run stays referenced until it finishes: a crashed process's
        # object graph (its tasks included) is dropped at once, and a pending task the
        # garbage collector destroys is reported at a moment that depends on memory, not
        # on the seed.
        sim.loop.set_task_factory(self._task_factory)

    def _task_factory(self, loop: asyncio.AbstractEventLoop, coro: Any,
                      **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        self.bury([task])
        return task

    def bury(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Keep a dead process's cancelled tasks referenced until they finish (a pending
        task nobody references is destroyed by the garbage collector, at a moment that
        depends on memory, not on the seed)."""
        for task in tasks:
            if not task.done():
                self._dying[task] = None
                task.add_done_callback(lambda t: self._dying.pop(t, None))

    def next_version(self) -> int:
        """A new number for a log generation (see SimReplicas.generation)."""
        return next(self._versions)

    # -- lifecycle of broker processes ---------------------------------------------------

    def start(self, node: SimNode) -> None:
        node.replicas = SimReplicas(self, node)
        if self.sim.groups is not None:  # its group coordinator (weir.sim.groups)
            self.sim.groups.start(node)
        if self.sim.txn is not None:  # its transaction coordinator (weir.sim.txn)
            self.sim.txn.start(node)
        incarnation = node.incarnation

        def tick() -> None:
            if self.sim.ticking and node.alive and node.incarnation == incarnation:
                node.replicas.checkpoint()
                self.sim.schedule(self.sim.rng.randint(*self.config.flush_every_ms), tick)
        self.sim.schedule(self.sim.rng.randint(*self.config.flush_every_ms), tick)

    def crash(self, node: SimNode, lose_unflushed: bool) -> None:
        if node.replicas is None:
            return
        if self.sim.groups is not None:
            self.sim.groups.crash(node)
        if self.sim.txn is not None:
            self.sim.txn.crash(node)
        for tp, offset, value in node.replicas.close(lose_unflushed):
            self.stats["records_lost_to_power_failure"] += 1
            self.amnesia.setdefault((tp, offset, value), set()).add(node.id)
        node.replicas = None

    def forget_topic(self, topic: str) -> None:
        """A topic marked for deletion: its data is no longer promised to anyone."""
        for table in (self.acked, self.consumed, self.committed):
            for tp in [tp for tp in table if tp.topic == topic]:
                del table[tp]
        for key in [k for k in self.promises if k[1].topic == topic]:
            del self.promises[key]
        self.forgotten[topic] += 1  # a later topic of that name starts afresh
        if self.idempotent is not None:
            self.idempotent.forget_topic(topic)

    # -- network -------------------------------------------------------------------------

    def send(self, src_id: int, dst: SimNode, fn: Callable[[SimReplicas], object],
             may_duplicate: bool = False) -> None:
        """A message that may be lost, reordered (overtaking earlier ones on its link) or,
        if ``may_duplicate`` (an idempotent read), delivered twice; ``fn`` runs on ``dst``
        if it is still the same incarnation when the message arrives."""
        rng, config = self.sim.rng, self.config
        if rng.random() < config.data_drop_ratio:
            return
        incarnation = dst.incarnation

        def arrive() -> None:
            if dst.alive and dst.incarnation == incarnation and dst.replicas is not None:
                fn(dst.replicas)
        copies = 2 if may_duplicate and rng.random() < config.data_duplicate_ratio else 1
        for _ in range(copies):
            if rng.random() < config.data_reorder_ratio:
                self.stats["reordered_messages"] += 1
                self.sim.schedule(self.sim.net_delay(), arrive)
            else:
                self.sim.deliver(src_id, dst.id, arrive)
        self.stats["duplicated_messages"] += copies - 1

    # -- producers -----------------------------------------------------------------------

    def start_producers(self) -> None:
        self.sim.schedule(self.sim.rng.randint(*self.config.produce_every_ms), self._produce)

    def _produce(self) -> None:
        sim = self.sim
        if sim.now >= self.config.fault_ms + self.config.settle_ms // 3:
            return
        sim.schedule(sim.rng.randint(*self.config.produce_every_ms), self._produce)
        # (Clients do not produce to internal topics such as __consumer_offsets.)
        live = sorted(tp for tp in sim.zk.states
                      if tp.topic not in sim.zk.to_delete and not tp.topic.startswith("__"))
        if not live:
            return
        tp = sim.rng.choice(live)
        if self.idempotent is not None and sim.rng.random() < 0.5:
            self.idempotent.produce(tp)  # it finds the leader, and retries, itself
            return
        leader = sim.zk.states[tp].leader
        if leader < 0 or not sim.nodes[leader].alive:
            return
        count = sim.rng.randint(1, 3)
        values = [f"{tp}#{next(self._values)}".encode() for _ in range(count)]
        self.stats["produced"] += count
        node = sim.nodes[leader]
        self.send(0, node, lambda r: r.serve_produce(
            tp, values, self.config.produce_timeout_ms,
            lambda code, records: self._produced(tp, code, records)))

    def _produced(self, tp: TopicPartition, code: ErrorCode, records: list[Record]) -> None:
        if code != ErrorCode.none:
            self.stats[f"produce_{code.name}"] += 1
            return
        if tp.topic in self.sim.zk.to_delete or tp.topic not in self.sim.zk.topics:
            return
        acked = self.acked.setdefault(tp, {})
        for offset, value in records:
            if offset in acked and acked[offset] != value:
                self.sim.violation(f"{tp}: offset {offset} acknowledged twice, for "
                                   f"{acked[offset]!r} and {value!r}")
            self._promise(ACKNOWLEDGED, tp, offset, value)
        self.stats["acked"] += len(records)

    # -- invariants ----------------------------------------------------------------------

    def online_leader(self, tp: TopicPartition) -> SimReplicas | None:
        """The leader's replicas if ZooKeeper's leader is alive and applied that epoch."""
        state = self.sim.zk.states.get(tp)
        if state is None or state.leader < 0 or tp.topic in self.sim.zk.to_delete:
            return None
        replicas = self.sim.nodes[state.leader].replicas
        if replicas is None:
            return None
        part = replicas.partitions.get(tp)
        if part is None or not part.is_leader or part.leader_epoch != state.leader_epoch \
                or tp not in replicas.logs:
            return None
        return replicas

    def online_leaders(self) -> list[tuple[TopicPartition, SimReplicas]]:
        """Every partition whose leader is online, in a fixed order."""
        out = []
        for tp in sorted(self.sim.zk.states):
            leader = self.online_leader(tp)
            if leader is not None:
                out.append((tp, leader))
        return out

    def observe(self) -> None:
        """The consumer, after every step (before the invariants look): what an online
        leader exposes below its high watermark is committed; C, the largest high watermark
        ever exposed, only grows (see the module docstring for the exemption)."""
        for tp, leader in self.online_leaders():
            hw = leader.logs[tp].high_watermark
            committed = self.committed.get(tp, 0)
            if hw > committed:
                records = leader.records(tp)
                for offset in range(committed, hw):
                    if offset in records:
                        self._promise(COMMITTED, tp, offset, records[offset])
                        if self.idempotent is not None:
                            self.idempotent.committed(tp, offset, records[offset])
                self.committed[tp] = hw

    def table(self, what: str) -> dict[TopicPartition, dict[int, bytes]]:
        """``acknowledged`` (what producers were told is written) or ``committed`` (what
        the consumer read below the high watermark): tp -> offset -> value."""
        return self.acked if what == ACKNOWLEDGED else self.consumed

    def _promise(self, what: str, tp: TopicPartition, offset: int, value: bytes) -> None:
        self.table(what).setdefault(tp, {})[offset] = value
        self.promises.setdefault((what, tp), []).append((offset, value))

    def new_promises(self, what: str, tp: TopicPartition, since: int) -> list[Record]:
        """The promises of kind ``what`` for ``tp`` from the ``since``-th on (an
        append-only history; entries excused or reported since are skipped by callers)."""
        return self.promises.get((what, tp), [])[since:]

    def excuse(self, tp: TopicPartition, offset: int, value: bytes, leader_id: int,
               promised: dict[int, bytes]) -> bool:
        """The power-loss exemption: True (and the promise forgotten) if ``leader_id``
        itself lost this record to power failure; the committed offset then restarts at
        it (the new leader cannot bring it back)."""
        if leader_id not in self.amnesia.get((tp, offset, value), ()):
            return False
        self.stats["excused_losses"] += 1
        del promised[offset]
        if self.idempotent is not None:  # nor is it "written" there any more
            self.idempotent.excused(tp, offset, value)
        if offset < self.committed.get(tp, 0):
            self.committed[tp] = offset
        return True


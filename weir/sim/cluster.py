"""The seeded, deterministic simulation: scheduler, network, faults and invariants.

Everything random comes from one ``random.Random(seed)`` and time is a simulated clock, so
a seed replays exactly.  :meth:`Simulation.run` injects faults for ``fault_ms``, then
restarts every dead broker and lets the cluster settle; safety invariants are checked after
every step and convergence at the end.  Violations are collected in
:attr:`Simulation.violations` (the first few are enough to debug a seed).
"""

from __future__ import annotations

import dataclasses
import heapq
import os
import random
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.common import TopicPartition
from weir.controller.events import AlterPartition, ControlledShutdown, IsrChange
from weir.controller.settings import ControllerSettings
from weir.coordination.codecs import LeaderIsr
from weir.protocol.errors import ErrorCode
from weir.sim.data import DataPlane
from weir.sim.node import PartitionView, SimNode
from weir.sim.zk import SimZk

__all__ = ["SimConfig", "SimResult", "Simulation", "data_config"]


@dataclass(frozen=True)
class SimConfig:
    """Knobs of one run (times in simulated milliseconds)."""

    brokers: int = 4
    topics: int = 3
    partitions: int = 4
    replication: int = 3
    fault_ms: int = 6000
    settle_ms: int = 4000
    session_timeout_ms: int = 150
    fault_every_ms: tuple[int, int] = (80, 400)
    isr_tick_ms: int = 40
    rebalance_tick_ms: int = 700
    max_steps: int = 400_000
    # -- the data path (weir.sim.data); off: the controller-only simulation -----------------
    data: bool = False
    min_insync_replicas: int = 2
    power_loss_ratio: float = 0.5  # of broker kills, those that also lose unflushed bytes
    flush_every_ms: tuple[int, int] = (40, 250)  # OS writeback + checkpoint files
    data_drop_ratio: float = 0.01  # data-path messages lost outright
    fetch_timeout_ms: int = 150
    fetch_backoff_ms: int = 40
    fetch_idle_ms: tuple[int, int] = (5, 20)  # an empty fetch answer: the long poll's wait
    fetch_max_bytes: int = 400
    produce_every_ms: tuple[int, int] = (2, 10)
    produce_timeout_ms: int = 600
    replica_lag_time_max_ms: int = 300
    data_dir: str | None = None  # where the runs' log directories go (default: a temp dir)


def _fast_dir() -> str | None:
    """A RAM-backed directory if there is one (fsync is then nearly free)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def data_config(**overrides: Any) -> SimConfig:
    """The configuration of data-path runs: a smaller cluster, real logs, producers."""
    base = SimConfig(data=True, topics=2, partitions=2, fault_ms=3000, settle_ms=3000,
                     fault_every_ms=(30, 150), flush_every_ms=(100, 800))
    return dataclasses.replace(base, **overrides)


@dataclass
class SimResult:
    seed: int
    steps: int
    violations: list[str]
    faults: list[str]
    zk_ops_per_event: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """event type -> (events, ZooKeeper operations, max operations in one event)."""
    data_stats: dict[str, int] = field(default_factory=dict)
    """Data path only: records produced/acknowledged, truncations, power losses..."""

    @property
    def ok(self) -> bool:
        return not self.violations


class Simulation:
    """One simulated cluster; see the module docstring."""

    def __init__(self, seed: int, config: SimConfig | None = None) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.now = 0
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self._links: dict[tuple[int, int], int] = {}
        self.data: DataPlane | None = None
        self.zk = SimZk()
        self.zk.watchers.append(self._on_zk_change)
        self.zk.on_state_write = self._check_write
        settings = {b: ControllerSettings(broker_id=b, leader_imbalance_check_interval_seconds=1)
                    for b in range(1, self.config.brokers + 1)}
        self.nodes = {b: SimNode(self, b, s) for b, s in settings.items()}
        self.violations: list[str] = []
        self.faults: list[str] = []
        self.ticking = True
        self._ops: dict[str, list[int]] = {}
        self._event_ops: dict[int, int] = {}
        self._writers: dict[int, int] = {}

    # -- scheduling ------------------------------------------------------------------------

    def schedule(self, delay_ms: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (self.now + delay_ms, self._seq, fn))

    def zk_latency(self) -> int:
        return self.rng.randint(1, 4)

    def net_delay(self) -> int:
        delay = self.rng.randint(1, 8)
        if self.rng.random() < 0.05:
            delay += self.rng.randint(50, 250)  # a lost packet, resent after a timeout
        return delay

    def _deliver(self, src: int, dst: int, fn: Callable[[], None]) -> None:
        """FIFO per link, like one TCP connection."""
        at = max(self.now + self.net_delay(), self._links.get((src, dst), 0))
        self._links[(src, dst)] = at
        self.schedule(at - self.now, fn)

    # -- network ---------------------------------------------------------------------------

    def send_request(self, controller: SimNode, broker_id: int, request: Any) -> None:
        incarnation = controller.incarnation
        target = self.nodes[broker_id]

        def deliver() -> None:
            if controller.alive and controller.incarnation == incarnation and target.alive:
                target.receive(controller.id, request)
        self._deliver(controller.id, broker_id, deliver)

    def respond(self, broker: SimNode, controller_id: int, event: Any) -> None:
        node = self.nodes[controller_id]
        self._deliver(broker.id, controller_id,
                      lambda: node.enqueue(("watch", node.generation, event)))

    def next_token(self) -> int:
        self._seq += 1
        return self._seq

    def send_alter_partition(self, node: SimNode, topic_id: uuid.UUID, tp: TopicPartition,
                             change: IsrChange, token: int) -> None:
        holder = self.zk.controller
        reply_to = ("alter", node.id, node.incarnation, tp, topic_id, token)
        incarnation = node.incarnation
        self.schedule(500, lambda: node.alive and node.incarnation == incarnation
                      and node.on_alter_partition_answer(tp, None, token))
        if holder is None:
            self.schedule(50, lambda: self.reply(reply_to, ErrorCode.not_controller))
            return
        event = AlterPartition(node.id, node.epoch, {topic_id: {tp.partition: change}},
                               reply_to)
        target = self.nodes[holder[0]]
        self._deliver(node.id, target.id, lambda: target.enqueue(("call", event)))

    def reply(self, reply_to: Any, value: Any) -> None:
        kind, node_id, incarnation = reply_to[:3]
        node = self.nodes[node_id]

        def deliver() -> None:
            if not node.alive or node.incarnation != incarnation:
                return
            if kind == "alter":
                tp, topic_id, token = reply_to[3:6]
                outcome = value if isinstance(value, ErrorCode) else value[topic_id][tp.partition]
                node.on_alter_partition_answer(tp, outcome, token)
            else:
                self._shutdown_answer(node, value, reply_to[3])
        self.schedule(self.net_delay(), deliver)

    # -- ZooKeeper notifications -----------------------------------------------------------

    def _on_zk_change(self, what: str) -> None:
        for node in self.nodes.values():
            if not node.alive or not self.zk.alive(node.session):
                continue
            if what == "controller":
                self.schedule(self.zk_latency(), lambda n=node: n.enqueue("elect"))
            elif node.core.active:
                item = ("watch", node.generation, what)
                self.schedule(self.zk_latency(), lambda n=node, i=item: n.enqueue(i))

    def on_elected(self, node: SimNode, epoch: int) -> None:
        if self.config.rebalance_tick_ms:
            generation = node.generation

            def tick() -> None:
                if self.ticking and node.alive and node.generation == generation:
                    node.enqueue(("watch", generation, "rebalance"))
                    self.schedule(self.config.rebalance_tick_ms, tick)
            self.schedule(self.config.rebalance_tick_ms, tick)

    def on_resigned(self, node: SimNode) -> None:
        """Nothing to do: generations make the old controllership's items stale."""

    # -- statistics ------------------------------------------------------------------------

    def count_event(self, event: Any) -> None:
        name = type(event).__name__
        self._ops.setdefault(name, [0, 0, 0])[0] += 1
        self._event_ops[id(event)] = 0

    def count_zk_op(self, event: Any) -> None:
        name = type(event).__name__
        stats = self._ops.setdefault(name, [0, 0, 0])
        stats[1] += 1
        n = self._event_ops.get(id(event), 0) + 1
        self._event_ops[id(event)] = n
        stats[2] = max(stats[2], n)

    # -- faults ----------------------------------------------------------------------------

    def _fault(self) -> None:
        if not self.ticking or self.now >= self.config.fault_ms:
            return
        alive = [n for n in self.nodes.values() if n.alive]
        dead = [n for n in self.nodes.values() if not n.alive]
        roll = self.rng.random()
        controller = next((n for n in alive if n.core.active), None)
        if roll < 0.25 and alive:
            node = self.rng.choice(alive)
            if self.data is not None and self.rng.random() < self.config.power_loss_ratio:
                self._kill(node, "power loss of", lose_unflushed=True)
            else:
                self._kill(node, "kill")
        elif roll < 0.35 and controller is not None:
            self._kill(controller, "kill controller")
        elif roll < 0.45 and alive:
            node = self.rng.choice(alive)
            self.faults.append(f"{self.now}: controlled shutdown of {node.id}")
            self._request_shutdown(node, attempt=1)
        elif roll < 0.55 and alive:
            node = self.rng.choice(alive)
            self.faults.append(f"{self.now}: session expiry of {node.id}")
            self._expire_session(node)
        elif roll < 0.6 and self.zk.topics:
            topic = self.rng.choice(sorted(self.zk.topics))
            self.faults.append(f"{self.now}: delete topic {topic}")
            self.zk.mark_for_deletion(topic)
            if self.data is not None:
                self.data.forget_topic(topic)
        elif roll < 0.65:
            self._create_topic(f"x{self.now}")
        elif dead:
            self._restart(self.rng.choice(dead))
        self.schedule(self.rng.randint(*self.config.fault_every_ms), self._fault)

    def _kill(self, node: SimNode, what: str, lose_unflushed: bool = False) -> None:
        self.faults.append(f"{self.now}: {what} {node.id}")
        session = node.session
        node.crash(lose_unflushed)
        self.schedule(self.config.session_timeout_ms, lambda: self.zk.expire(session))

    def _expire_session(self, node: SimNode) -> None:
        incarnation = node.incarnation
        self.zk.expire(node.session)

        def reconnect() -> None:
            if not node.alive or node.incarnation != incarnation:
                return
            node.enqueue("session_lost")
            node.session = self.zk.open_session()
            node.epoch = self.zk.register_broker(node.id, node.session)
            node.enqueue("elect")
        self.schedule(self.zk_latency() + 5, reconnect)

    def _restart(self, node: SimNode) -> None:
        if node.alive:
            return
        if node.id in self.zk.brokers:  # the old session has not expired yet
            self.schedule(50, lambda: self._restart(node))
            return
        self.faults.append(f"{self.now}: restart {node.id}")
        node.start()

    def _request_shutdown(self, node: SimNode, attempt: int) -> None:
        holder = self.zk.controller
        reply_to = ("shutdown", node.id, node.incarnation, attempt)
        if holder is None:
            self.reply(reply_to, ErrorCode.not_controller)
            return
        target = self.nodes[holder[0]]
        event = ControlledShutdown(node.id, node.epoch, reply_to)
        self._deliver(node.id, target.id, lambda: target.enqueue(("call", event)))

    def _shutdown_answer(self, node: SimNode, value: Any, attempt: int) -> None:
        if isinstance(value, list) and not value or attempt >= 3:
            self.faults.append(f"{self.now}: {node.id} stops after controlled shutdown")
            session = node.session
            node.crash()
            self.zk.expire(session)  # a clean stop closes the session at once
            if self.now >= self.config.fault_ms:
                self.schedule(10, lambda: self._restart(node))
        else:
            self.schedule(30, lambda: self._request_shutdown(node, attempt + 1))

    def _create_topic(self, name: str) -> None:
        cfg = self.config
        ids = sorted(self.nodes)
        start = self.rng.randrange(len(ids))
        parts = {p: [ids[(start + p + i) % len(ids)] for i in range(cfg.replication)]
                 for p in range(cfg.partitions)}
        self.zk.create_topic(name, parts)

    def _isr_tick(self) -> None:
        if not self.ticking:
            return
        for node in self.nodes.values():
            if node.alive and self.rng.random() < 0.5:
                node.propose_isr_changes()
        self.schedule(self.config.isr_tick_ms, self._isr_tick)

    def follows(self, replica: int, tp: TopicPartition, leader_view: PartitionView) -> bool:
        """Whether ``replica`` is a caught-up follower of the leader's current epoch."""
        node = self.nodes.get(replica)
        if node is None or not node.alive:
            return False
        view = node.broker.hosted.get(tp)
        return (view is not None and view.leader == leader_view.leader
                and view.leader_epoch == leader_view.leader_epoch)

    # -- invariants ------------------------------------------------------------------------

    def violation(self, message: str) -> None:
        if len(self.violations) < 20:
            self.violations.append(f"t={self.now}: {message}")

    def _check_write(self, tp: TopicPartition, old: LeaderIsr | None, new: LeaderIsr) -> None:
        version = self.zk.epoch_version
        writer = self.zk.writer
        if self._writers.setdefault(version, writer) != writer:
            self.violation(f"two controllers wrote at controller epoch version {version}")
        assignment = self.zk.topics[tp.topic].partitions.get(tp.partition, [])
        if not set(new.isr) <= set(assignment) or not new.isr:
            self.violation(f"{tp}: ISR {new.isr} not a non-empty subset of {assignment}")
        if new.leader >= 0 and new.leader not in new.isr:
            self.violation(f"{tp}: leader {new.leader} not in ISR {new.isr}")
        if old is None:
            return
        if new.leader_epoch < old.leader_epoch:
            self.violation(f"{tp}: leader epoch went back {old.leader_epoch}->{new.leader_epoch}")
        if new.leader != old.leader and new.leader_epoch <= old.leader_epoch:
            self.violation(f"{tp}: leader changed without a new leader epoch")
        if new.leader >= 0 and new.leader != old.leader and new.leader not in old.isr:
            self.violation(f"{tp}: unclean election of {new.leader} (ISR was {old.isr})")

    def _check_step(self) -> None:
        epochs = [n.core.ctx.controller_epoch for n in self.nodes.values()
                  if n.alive and n.core.active]
        if len(epochs) != len(set(epochs)):
            self.violation(f"two active controllers share an epoch: {sorted(epochs)}")
        if self.data is not None:
            self.data.check_step()

    def _check_converged(self) -> None:
        zk = self.zk
        active = [n for n in self.nodes.values() if n.alive and n.core.active]
        if len(active) != 1 or zk.controller is None or active[0].id != zk.controller[0]:
            self.violation(f"no single controller at the end: {[n.id for n in active]}, "
                           f"ZooKeeper says {zk.controller}")
        if zk.to_delete:
            self.violation(f"topic deletion did not complete: {sorted(zk.to_delete)}")
        for tp, state in sorted(zk.states.items()):
            replicas = zk.topics[tp.topic].partitions[tp.partition]
            if state.leader < 0 or not self.nodes[state.leader].alive:
                self.violation(f"{tp} has no live leader at the end: {state}")
            if sorted(state.isr) != sorted(replicas):
                self.violation(f"{tp}: ISR {state.isr} did not converge to {replicas}")
            for node in self.nodes.values():
                if not node.alive:
                    self.violation(f"broker {node.id} is not running at the end")
                    continue
                seen = node.broker.metadata.get(tp)
                if seen is None or (seen.leader, seen.leader_epoch, seen.isr,
                                    seen.partition_epoch) != (
                        state.leader, state.leader_epoch, state.isr, state.zk_version):
                    self.violation(f"broker {node.id} metadata of {tp} is {seen}, "
                                   f"ZooKeeper has {state}")
                hosted = node.broker.hosted.get(tp)
                if node.id in replicas and (hosted is None or (hosted.leader, hosted.leader_epoch)
                                            != (state.leader, state.leader_epoch)):
                    self.violation(f"broker {node.id} replica of {tp} is {hosted}, "
                                   f"ZooKeeper has {state}")

    # -- running ---------------------------------------------------------------------------

    def run(self) -> SimResult:
        if not self.config.data:
            return self._run()
        root = Path(tempfile.mkdtemp(prefix=f"weir-sim-{self.seed}-",
                                     dir=self.config.data_dir or _fast_dir()))
        try:
            self.data = DataPlane(self, root)
            return self._run()
        finally:
            for node in self.nodes.values():
                if node.replicas is not None:
                    node.replicas.close(lose_unflushed=False)
            shutil.rmtree(root, ignore_errors=True)

    def _run(self) -> SimResult:
        cfg = self.config
        for node in self.nodes.values():
            node.start()
        for t in range(cfg.topics):
            self._create_topic(f"t{t}")
        self.schedule(cfg.isr_tick_ms, self._isr_tick)
        self.schedule(300, self._fault)
        if self.data is not None:
            self.data.start_producers()
        self.schedule(cfg.fault_ms, self._restart_all)
        self.schedule(cfg.fault_ms + cfg.settle_ms, self._stop_ticking)
        steps = 0
        while self._heap and steps < cfg.max_steps:
            at, _, fn = heapq.heappop(self._heap)
            self.now = at
            fn()
            steps += 1
            self._check_step()
        if self._heap:
            self.violation(f"did not settle within {cfg.max_steps} steps")
        self._check_converged()
        stats: dict[str, int] = {}
        if self.data is not None:
            self.data.check_converged()
            stats = dict(sorted(self.data.stats.items()))
        ops = {name: (s[0], s[1], s[2]) for name, s in sorted(self._ops.items())}
        return SimResult(self.seed, steps, list(self.violations), self.faults, ops, stats)

    def _restart_all(self) -> None:
        for node in self.nodes.values():
            if not node.alive:
                self._restart(node)

    def _stop_ticking(self) -> None:
        self.ticking = False

"""The seeded, deterministic simulation: virtual time, network, faults and invariants.

Every broker runs the production :class:`~weir.controller.service.ControllerService` (see
:mod:`weir.sim.node`) on one :class:`~weir.sim.vloop.VirtualTimeLoop`, against the
in-memory ZooKeeper :class:`~weir.sim.zk.SimZk`.  Everything random comes from one
``random.Random(seed)``, time is the loop's virtual clock and nothing runs on threads, so a
seed replays exactly.  :meth:`Simulation.run` injects faults for ``fault_ms`` (crashes,
controller kills, ZooKeeper session expiry, controlled shutdown, topic creation and
deletion, reassignments through ``/admin/reassign_partitions`` and KIP-455's
AlterPartitionReassignments, preferred elections through the znode and ElectLeaders),
then restarts every dead broker and lets the cluster settle.  The invariants of
:mod:`weir.sim.invariants` are checked after every step and at the end; violations are
collected in :attr:`Simulation.violations` (the first few are enough to debug a seed).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.common import TopicPartition
from weir.controller.settings import ControllerSettings
from weir.coordination.codecs import LeaderIsr
from weir.protocol.errors import ErrorCode, KafkaError
from weir.sim.config import SimConfig, data_config
from weir.sim.data import DataPlane
from weir.sim.disk import DiskFaults
from weir.sim.group_invariants import GroupInvariants
from weir.sim.groups import GroupPlane
from weir.sim.invariants import (
    DataPathInvariants,
    Invariant,
    ReassignmentsResolve,
    controller_invariants,
)
from weir.sim.node import SimNode
from weir.sim.txn import TxnPlane
from weir.sim.txn_invariants import TxnInvariants
from weir.sim.vloop import Deadlock, VirtualTimeLoop
from weir.sim.zk import SimZk

__all__ = ["SimConfig", "SimResult", "Simulation", "data_config"]

def _fast_dir() -> str | None:
    """A RAM-backed directory if there is one (fsync is then nearly free)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


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


class _TooManySteps(Exception):
    pass


class _ErrorLog(logging.Handler):
    """Errors the controller shell logs with a traceback while its broker is alive (the
    consumer's catch-all: a crash in handling an event) are violations."""

    def __init__(self, sim: Simulation) -> None:
        super().__init__(logging.ERROR)
        self.sim = sim

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info is None:
            return
        broker = record.args[0] if isinstance(record.args, tuple) and record.args else None
        node = self.sim.nodes.get(broker) if isinstance(broker, int) else None
        if node is None or node.alive:
            self.sim.violation(f"logged error: {record.getMessage()}: "
                               f"{record.exc_info[1]!r}")


class Simulation:
    """One simulated cluster; see the module docstring."""

    def __init__(self, seed: int, config: SimConfig | None = None,
                 invariants: list[Invariant] | None = None) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.loop = VirtualTimeLoop()
        self._links: dict[tuple[int, int], int] = {}
        self._due: dict[tuple[int, int, int], list[Callable[[], object]]] = {}
        self.data: DataPlane | None = None
        self.disks: DiskFaults | None = None  # the disk errors (SimConfig.disk_faults)
        self.zk = SimZk(schedule=self.schedule, latency=self.zk_latency,
                        now_ms=self.loop.now_ms)
        self.zk.on_state_write = self._check_write
        settings = {b: ControllerSettings(
            broker_id=b, leader_imbalance_check_interval_seconds=self.config.rebalance_interval_s,
            auto_leader_rebalance_enable=self.config.rebalance_interval_s > 0)
            for b in range(1, self.config.brokers + 1)}
        self.nodes = {b: SimNode(self, b, s) for b, s in settings.items()}
        self.invariants = (controller_invariants() if invariants is None else invariants)
        self.invariants.append(DataPathInvariants())
        self.invariants.append(GroupInvariants())
        self.invariants.append(TxnInvariants())
        self.groups: GroupPlane | None = None
        self.txn: TxnPlane | None = None  # transactions (SimConfig.transactions)
        self.reassignments = next((i for i in self.invariants
                                   if isinstance(i, ReassignmentsResolve)), None)
        self.violations: list[str] = []
        self.faults: list[str] = []
        self.ticking = True
        self._seq = 0
        self._ops: dict[str, list[int]] = {}
        self._event_ops: dict[tuple[int, int, int], int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._retired_events: Counter[str] = Counter()
        self._root: Path | None = None  # see disk_root

    @property
    def now(self) -> int:
        """Simulated milliseconds since the start."""
        return self.loop.now_ms()

    # -- scheduling ------------------------------------------------------------------------

    def schedule(self, delay_ms: int, fn: Callable[[], object]) -> None:
        """Run ``fn`` later as the simulated world (a delivery, a timer), in no process's
        context: see :mod:`weir.sim.process`."""
        self.loop.call_later(delay_ms / 1000, fn, context=contextvars.Context())

    def spawn(self, coro: Any) -> None:
        """Run ``coro`` as a task of the simulation (kept referenced until it ends)."""
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def zk_latency(self) -> int:
        return self.rng.randint(1, 4)

    async def run_zk(self, node: SimNode, fn: Callable[..., Any], *args: Any) -> Any:
        """A node's ControllerService ``run_blocking``: a ZooKeeper call takes a simulated
        round trip and runs inline (deterministically) on the loop."""
        self._count_zk_op(node)
        await asyncio.sleep(self.zk_latency() / 1000)
        result = fn(*args)
        await asyncio.sleep(self.zk_latency() / 1000)
        return result

    def net_delay(self) -> int:
        delay = self.rng.randint(1, 8)
        if self.rng.random() < 0.05:
            delay += self.rng.randint(50, 250)  # a lost packet, resent after a timeout
        return delay

    def deliver(self, src: int, dst: int, fn: Callable[[], object]) -> None:
        """FIFO per link, like one TCP connection.  Messages due at the same millisecond
        share one timer and run in the order sent: two timers' float deadlines, taken at
        different clock values, could fire in either order."""
        at = max(self.now + self.net_delay(), self._links.get((src, dst), 0))
        self._links[(src, dst)] = at
        due = self._due.get((src, dst, at))
        if due is not None:
            due.append(fn)
            return
        self._due[(src, dst, at)] = [fn]

        def run() -> None:
            for queued in self._due.pop((src, dst, at)):
                queued()
        self.schedule(at - self.now, run)

    def next_token(self) -> int:
        self._seq += 1
        return self._seq

    # -- RPCs to the controller ------------------------------------------------------------

    def _controller_node(self) -> SimNode | None:
        holder = self.zk.controller
        return None if holder is None else self.nodes[holder[0]]

    def _rpc(self, source: SimNode, call: Callable[[SimNode], Any],
             answer: Callable[[Any], None]) -> None:
        """Send ``call(controller)`` (a coroutine of its ControllerService) from ``source``
        to the broker ZooKeeper names as controller; its result, or the KafkaError it
        raised, comes back to ``answer`` unless either process died meanwhile."""
        target = self._controller_node()
        incarnation = source.incarnation

        def back(value: Any) -> None:
            if source.alive and source.incarnation == incarnation:
                answer(value)
        if target is None:
            self.schedule(50, lambda: back(ErrorCode.not_controller))
            return
        target_incarnation = target.incarnation

        async def serve() -> None:
            try:
                value = await call(target)
            except KafkaError as exc:
                value = exc.code
            except TimeoutError:  # the controller did not answer within its socket timeout
                value = ErrorCode.request_timed_out
            if target.alive and target.incarnation == target_incarnation:
                self.deliver(target.id, source.id, lambda: back(value))

        def arrive() -> None:
            if target.alive and target.incarnation == target_incarnation \
                    and target.service is not None:
                target.spawn(serve())
        self.deliver(source.id, target.id, arrive)

    # -- ZooKeeper sessions ----------------------------------------------------------------

    def _count_zk_op(self, node: SimNode) -> None:
        """Statistics: ZooKeeper operations per controller event (those run while the
        service processes an event: the core's operations)."""
        service = node.service
        if service is None or service.current_event is None:
            return
        stats = self._ops.setdefault(service.current_event, [0, 0, 0])
        key = (node.id, node.incarnation, service.events_processed)
        n = self._event_ops.get(key, 0) + 1
        self._event_ops[key] = n
        stats[1] += 1
        stats[2] = max(stats[2], n)

    def retire_service(self, service: Any) -> None:
        """A process's ControllerService is replaced: keep its event counts."""
        self._retired_events.update(service.events_by_type)

    def on_broker_leader_epoch(self, broker: int, tp: TopicPartition, old: int | None,
                               new: int) -> None:
        for invariant in self.invariants:
            for message in invariant.on_broker_leader_epoch(self, broker, tp, old, new):
                self.violation(f"{invariant.name}: {message}")

    # -- faults ----------------------------------------------------------------------------

    def _fault(self) -> None:
        if not self.ticking or self.now >= self.config.fault_ms:
            return
        alive = [n for n in self.nodes.values() if n.alive]
        dead = [n for n in self.nodes.values() if not n.alive]
        roll = self.rng.random()
        controller = next((n for n in alive if n.active), None)
        if roll < 0.2 and alive:
            node = self.rng.choice(alive)
            if self.data is not None and self.rng.random() < self.config.power_loss_ratio:
                self.kill(node, "power loss of", lose_unflushed=True)
            else:
                self.kill(node, "kill")
        elif roll < 0.28 and controller is not None:
            self.kill(controller, "kill controller")
        elif roll < 0.36 and alive:
            node = self.rng.choice(alive)
            self.faults.append(f"{self.now}: controlled shutdown of {node.id}")
            self._request_shutdown(node, attempt=1)
        elif roll < 0.44 and alive:
            node = self.rng.choice(alive)
            what = "controller " if node.active else ""
            self.faults.append(f"{self.now}: session expiry of {what}{node.id}")
            self._expire_session(node)
        elif roll < 0.48 and self._deletable():
            self.delete_topic(self.rng.choice(self._deletable()))
        elif roll < 0.53:
            self._create_topic(self._new_topic_name())
        elif roll < 0.63 and alive:
            if self.config.reassignments:
                self._reassign(self.rng.choice(alive))
        elif roll < 0.7 and alive:
            self._preferred_election(self.rng.choice(alive))
        elif dead:
            self.restart(self.rng.choice(dead))
        self.schedule(self.rng.randint(*self.config.fault_every_ms), self._fault)

    def delete_topic(self, topic: str) -> None:
        """What kafka-topics --delete writes (``/admin/delete_topics/<topic>``)."""
        self.faults.append(f"{self.now}: delete topic {topic}")
        self.zk.mark_for_deletion(topic)
        if self.data is not None:
            self.data.forget_topic(topic)
        if self.groups is not None:
            self.groups.topic_marked_for_deletion(topic, self.zk.topics[topic].topic_id)

    def _new_topic_name(self) -> str:
        """A fresh name or, in group runs (half the time), the name of a topic whose
        deletion has completed: a new incarnation (a new topic id) under an old name, whose
        group offsets must start afresh."""
        if self.groups is not None:
            gone = sorted(name for name in self.groups.deleted_names()
                          if name not in self.zk.topics)
            if gone and self.rng.random() < 0.5:
                name = self.rng.choice(gone)
                self.faults.append(f"{self.now}: re-create topic {name}")
                return name
        return f"x{self.now}"

    def _deletable(self) -> list[str]:
        """Topics a deletion may pick: not the internal ones (Kafka refuses to delete them)."""
        return sorted(t for t in self.zk.topics if not t.startswith("__"))

    def kill(self, node: SimNode, what: str, lose_unflushed: bool = False) -> None:
        self.faults.append(f"{self.now}: {what} {node.id}")
        session = node.session
        node.crash(lose_unflushed)
        self.schedule(self.config.session_timeout_ms, lambda: self.zk.expire(session))
        if self.now >= self.config.fault_ms:
            # A death after the fault phase (a broker halting when its last log dir fails
            # under a write queued before): the settle phase restarts it, as it restarts
            # every broker dead at its start.
            self.schedule(self.config.session_timeout_ms, lambda: self.restart(node))

    def _expire_session(self, node: SimNode) -> None:
        """ZooKeeper expires the session (the client hears LOST at once); the broker
        reconnects a little later with a new session and registers again."""
        incarnation = node.incarnation
        self.zk.expire(node.session)
        self.schedule(self.zk_latency() + 5,
                      lambda: node.incarnation == incarnation and node.session_expired())

    def restart(self, node: SimNode) -> None:
        if node.alive:
            return
        if node.id in self.zk.brokers:  # the old session has not expired yet
            self.schedule(50, lambda: self.restart(node))
            return
        self.faults.append(f"{self.now}: restart {node.id}")
        node.start()


    # The broker side (weir.sim.node, weir.sim.replica) calls these by their old names.
    _deliver = deliver
    _kill = kill
    _restart = restart

    def _request_shutdown(self, node: SimNode, attempt: int) -> None:
        """ControlledShutdown (Kafka's KafkaServer.controlledShutdown: retried while the
        broker still leads partitions, then the broker stops anyway).  A request that gets
        no answer (the controller died or moved while serving it) fails the attempt after
        the request timeout, as the broker's NetworkClient reports a disconnection or a
        timeout: without it the broker would stay half shut down for good (its followers
        stopped by StopReplica, never exiting)."""
        epoch = node.epoch
        incarnation = node.incarnation
        pending = [True]

        def answer(value: Any) -> None:
            if pending[0]:
                pending[0] = False
                self._shutdown_answer(node, value, attempt)

        def timed_out() -> None:
            if pending[0] and node.alive and node.incarnation == incarnation:
                answer(ErrorCode.request_timed_out)
        self._rpc(node, lambda c: c.service.on_controlled_shutdown(node.id, epoch), answer)
        self.schedule(self.config.controller_socket_timeout_ms, timed_out)

    def _shutdown_answer(self, node: SimNode, value: Any, attempt: int) -> None:
        if isinstance(value, list) and not value or attempt >= 3:
            self.faults.append(f"{self.now}: {node.id} stops after controlled shutdown")
            session = node.session
            node.crash()
            self.zk.expire(session)  # a clean stop closes the session at once
            if self.now >= self.config.fault_ms:
                self.schedule(10, lambda: self.restart(node))
        else:
            self.schedule(30, lambda: self._request_shutdown(node, attempt + 1))

    def create_topic(self, name: str) -> None:
        """A new topic (``cfg.partitions`` partitions, ``cfg.replication`` replicas)."""
        self._create_topic(name)

    def _create_topic(self, name: str) -> None:
        cfg = self.config
        ids = sorted(self.nodes)
        start = self.rng.randrange(len(ids))
        parts = {p: [ids[(start + p + i) % len(ids)] for i in range(cfg.replication)]
                 for p in range(cfg.partitions)}
        if self.reassignments is not None:
            # A topic re-created under an old name: the old one's acknowledged moves (and
            # answers still on their way about it) promise nothing about the new one.
            for p in parts:
                self.reassignments.supersede(TopicPartition(name, p))
        self.zk.create_topic(name, parts)

    def _reassign(self, admin: SimNode) -> None:
        """Move one partition to other brokers (or cancel a move): through KIP-455's
        AlterPartitionReassignments, or by writing ``/admin/reassign_partitions`` as the
        old kafka-reassign-partitions tool does."""
        live = [t for t in sorted(self.zk.topics) if t not in self.zk.to_delete]
        if not live:
            return
        topic = self.zk.topics[self.rng.choice(live)]
        tp = TopicPartition(topic.name, self.rng.choice(sorted(topic.partitions)))
        cancel = tp.partition in topic.adding and self.rng.random() < 0.3
        target = None if cancel else tuple(self.rng.sample(sorted(self.nodes),
                                                           self.config.replication))
        if self.rng.random() < 0.3 and target is not None:
            self.faults.append(f"{self.now}: /admin/reassign_partitions {tp} -> {list(target)}")
            try:
                self.zk.create_reassignments({tp: list(target)})
            except KafkaError:
                return  # one is in progress: the tool refuses
            if self.reassignments is not None:  # the controller may refuse it (dead brokers)
                self.reassignments.supersede(tp)
            return
        self.faults.append(f"{self.now}: AlterPartitionReassignments {tp} -> "
                           f"{'cancel' if target is None else list(target)} via {admin.id}")

        # Sent, the request may be applied even if its answer never comes back (its sender
        # dies): it replaces the promise of any earlier acknowledged move.
        if self.reassignments is not None:
            self.reassignments.supersede(tp)
        version = self.reassignments.version(tp) if self.reassignments is not None else 0

        def answer(value: Any) -> None:
            if isinstance(value, dict) and value.get(tp, (None,))[0] == ErrorCode.none \
                    and self.reassignments is not None:
                self.reassignments.acknowledge(tp, target, version)
        self._rpc(admin, lambda c: c.service.alter_reassignments({tp: target}), answer)

    def _preferred_election(self, admin: SimNode) -> None:
        """A preferred-leader election: ElectLeaders (KIP-460) or the znode written by the
        old kafka-preferred-replica-election tool."""
        states = sorted(tp for tp in self.zk.states if tp.topic not in self.zk.to_delete)
        if not states:
            return
        chosen = frozenset(self.rng.sample(states, min(3, len(states))))
        if self.rng.random() < 0.5:
            self.faults.append(f"{self.now}: /admin/preferred_replica_election {sorted(chosen)}")
            with contextlib.suppress(KafkaError):
                self.zk.create_preferred_election(chosen)
            return
        self.faults.append(f"{self.now}: ElectLeaders {sorted(chosen)} via {admin.id}")
        self._rpc(admin, lambda c: c.service.elect_leaders(0, chosen), lambda _value: None)

    def _isr_tick(self) -> None:
        """The replica managers' isr-expiration job (Kafka's ReplicaManager.maybeShrinkIsr,
        scheduled every replica.lag.time.max.ms / 2 in a broker; here at seeded times)."""
        if not self.ticking:
            return
        for node in self.nodes.values():
            if node.alive and node.core is not None and self.rng.random() < 0.5:
                node.run(node.core.replica_manager.maybe_shrink_isr)
        self.schedule(self.config.isr_tick_ms, self._isr_tick)

    # -- invariants ------------------------------------------------------------------------

    def violation(self, message: str) -> None:
        if len(self.violations) < 20:
            self.violations.append(f"t={self.now}: {message}")

    def _check_write(self, tp: TopicPartition, old: LeaderIsr | None, new: LeaderIsr) -> None:
        for invariant in self.invariants:
            for message in invariant.on_state_write(self, tp, old, new, self.zk.writer,
                                                    self.zk.epoch_version):
                self.violation(f"{invariant.name}: {message}")

    def _check_step(self) -> None:
        if self.loop.steps > self.config.max_steps:
            raise _TooManySteps
        for invariant in self.invariants:
            for message in invariant.after_step(self):
                self.violation(f"{invariant.name}: {message}")

    def _convergence(self) -> list[str]:
        """What is not yet as it must end (empty: converged)."""
        zk = self.zk
        out: list[str] = []
        active = [n for n in self.nodes.values() if n.active]
        if len(active) != 1 or zk.controller is None or active[0].id != zk.controller[0]:
            out.append(f"no single controller at the end: {[n.id for n in active]}, "
                       f"ZooKeeper says {zk.controller}")
        if zk.to_delete:
            out.append(f"topic deletion did not complete: {sorted(zk.to_delete)}")
        if zk.preferred:
            out.append(f"preferred election not processed: {sorted(zk.preferred)}")
        for node in self.nodes.values():
            if not node.alive:
                out.append(f"broker {node.id} is not running at the end")
        for invariant in self.invariants:
            out.extend(f"{invariant.name}: {m}" for m in invariant.at_end(self))
        for tp, state in sorted(zk.states.items()):
            replicas = zk.topics[tp.topic].partitions[tp.partition]
            if state.leader < 0 or not self.nodes[state.leader].alive:
                out.append(f"{tp} has no live leader at the end: {state}")
            if sorted(state.isr) != sorted(replicas):
                out.append(f"{tp}: ISR {state.isr} did not converge to {replicas}")
            for node in self.nodes.values():
                if not node.alive:
                    continue
                assert node.core is not None
                seen = node.core.metadata.partition(tp)
                if seen is None or (seen.leader, seen.leader_epoch, list(seen.isr),
                                    seen.partition_epoch) != (
                        state.leader, state.leader_epoch, list(state.isr), state.zk_version):
                    out.append(f"broker {node.id} metadata of {tp} is {seen}, "
                               f"ZooKeeper has {state}")
                hosted = node.core.replica_manager.partitions.get(tp)
                if node.id in replicas and (hosted is None or (hosted.leader, hosted.leader_epoch)
                                            != (state.leader, state.leader_epoch)):
                    shown = None if hosted is None else (hosted.leader, hosted.leader_epoch)
                    out.append(f"broker {node.id} replica of {tp} is (leader, epoch) {shown}, "
                               f"ZooKeeper has {state}")
        return out

    # -- running ---------------------------------------------------------------------------

    def run(self) -> SimResult:
        errors = _ErrorLog(self)
        logger = logging.getLogger("weir.controller")
        logger.addHandler(errors)
        self.loop.set_exception_handler(self._on_loop_error)
        self.loop.add_step_hook(self._check_step)
        asyncio.set_event_loop(self.loop)
        try:
            if self.config.data:
                self.data = DataPlane(self, self.disk_root)
                if self.config.groups:
                    self.groups = GroupPlane(self, self.data)
                if self.config.transactions:
                    self.txn = TxnPlane(self, self.data)
                if self.config.disk_faults:
                    self.disks = DiskFaults(self)
            return self._run()
        finally:
            logger.removeHandler(errors)
            self._close_loop()

    @property
    def disk_root(self) -> Path:
        """The run's disks, one directory per broker (made on first use): every broker's
        BrokerCore has a log manager (controller-only runs too: the real LeaderAndIsr
        handler creates the replicas' logs)."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix=f"weir-sim-{self.seed}-",
                                               dir=self.config.data_dir or _fast_dir()))
        return self._root

    def _close_disks(self) -> None:
        if self.disks is not None:
            self.disks.close()
            self.disks = None
        for node in self.nodes.values():
            if node.replicas is not None:
                node.replicas.close(lose_unflushed=False)
                node.replicas = None
            elif node.alive and node.core is not None:
                for logs in node.core.log_manager.logs_by_dir().values():
                    for log, _future in logs:
                        log.close()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def _close_loop(self) -> None:
        # As asyncio.run does: cancel what is left and let it finish, so that a task's
        # ``finally`` (a controller channel cancels its answers, then disconnects) runs
        # here rather than when the garbage collector closes its coroutine on a closed loop.
        # A task's cleanup may start another (a resigning controller's channels): rounds.
        for _ in range(10):
            tasks = asyncio.all_tasks(self.loop)
            if not tasks:
                break
            for task in tasks:
                task.cancel()
            with contextlib.suppress(_TooManySteps, Deadlock):
                self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        asyncio.set_event_loop(None)
        self.loop.close()
        self._close_disks()

    def _on_loop_error(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.violation(f"unhandled in the event loop: {context.get('message')} "
                       f"{context.get('exception')!r}")

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
        if self.groups is not None:
            self.groups.start_members()
        if self.txn is not None:
            self.txn.start_producers()
        self.schedule(cfg.fault_ms, self._restart_all)
        self.schedule(cfg.fault_ms + cfg.settle_ms, self._stop_ticking)
        try:
            self.loop.run_for((cfg.fault_ms + cfg.settle_ms) / 1000)
            pending = self._convergence()
            deadline = self.now + cfg.converge_ms
            while pending and self.now < deadline:
                self.loop.run_for(0.1)
                pending = self._convergence()
            for message in pending:
                self.violation(message)
        except _TooManySteps:
            self.violation(f"did not settle within {cfg.max_steps} steps")
        stats: dict[str, int] = {}
        if self.data is not None:
            stats = dict(sorted(self.data.stats.items()))
        events = Counter(self._retired_events)
        for node in self.nodes.values():
            if node.service is not None:
                events.update(node.service.events_by_type)
        for name, count in events.items():
            self._ops.setdefault(name, [0, 0, 0])[0] = count
        ops = {name: (s[0], s[1], s[2]) for name, s in sorted(self._ops.items())}
        return SimResult(self.seed, self.loop.steps, list(self.violations), self.faults, ops,
                         stats)

    def _restart_all(self) -> None:
        for node in self.nodes.values():
            if not node.alive:
                self.restart(node)

    def _stop_ticking(self) -> None:
        self.ticking = False

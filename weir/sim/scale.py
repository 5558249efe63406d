"""The controller at scale under the simulation: CPU of one broker failure or controlled
shutdown in an N-partition cluster.

:func:`measure` builds a cluster of ``SimConfig.brokers`` simulated brokers running the
production :class:`~weir.controller.service.ControllerService` (no injected faults, no ISR
proposals, no automatic rebalance, invariants off: only the controller works), creates
``topics`` x ``partitions`` partitions and waits until every broker has applied them.  Then,
on a broker other than the controller that leads about ``1/brokers`` of the partitions:

- ``failure``: the process dies and its ZooKeeper session expires at once (the
  ``/brokers/ids`` change is the start): the controller's BrokerChange elects new leaders,
  shrinks ISRs and sends LeaderAndIsr / UpdateMetadata;
- ``shutdown``: ControlledShutdown (Kafka's ``KafkaController.doControlledShutdown``): the
  controller moves the broker's leaderships and takes it out of the ISRs.

The run ends when every live broker's metadata and replicas equal ZooKeeper's state, the
controller has answered, and its event queue has stayed empty for 100 simulated ms (the
brokers' answers handled).  CPU is ``time.process_time`` over the loop's run from the start
to the end, minus the time spent in the simulated brokers' request handling (their half of
the simulation, not the controller's): what remains is the controller - its shell, core,
channels and the in-memory ZooKeeper calls.  The core's own part (``ControllerCore.handle``
and ``complete``) is counted too.  Convergence checks run between slices of the loop and
are not counted.
"""

from __future__ import annotations

import asyncio
import cProfile
import dataclasses
import gc
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weir.server import gc_tuning
from weir.sim.cluster import SimConfig, Simulation
from weir.sim.node import SimNode

__all__ = ["ScaleResult", "measure", "scale_config"]

SLICE_S = 0.005
"""Simulated seconds between two convergence checks."""


@dataclass
class ScaleResult:
    scenario: str
    partitions: int
    brokers: int
    replication: int
    zk_latency_ms: int
    victim: int
    led: int
    """Partitions the victim led before the event."""
    controller_cpu_s: float
    core_cpu_s: float
    broker_cpu_s: float
    """The simulated brokers' request handling during the measure (not counted above)."""
    gc_cpu_s: float
    """Cyclic garbage collection during the measure (in the figures above: whoever
    allocates pays; the heap walked is the whole simulation's, all brokers included)."""
    simulated_ms: int
    setup_cpu_s: float
    remaining: int = 0
    """ControlledShutdown's answer: partitions the broker still leads."""
    frozen_heap: bool = False
    """Whether the built cluster's heap was frozen out of the collector before the measure."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def scale_config(topics: int, partitions: int, brokers: int = 3, replication: int = 3
                 ) -> SimConfig:
    """A quiet cluster: no faults, no ISR proposals, no rebalance; the followers' fetchers
    long-poll with Kafka's defaults (replica.fetch.wait.max.ms 500, replica.lag.time.max.ms
    30 s), so that their requests hardly count in the measure."""
    return SimConfig(brokers=brokers, topics=topics, partitions=partitions,
                     replication=replication, fault_ms=0, settle_ms=0,
                     rebalance_interval_s=0, reassignments=False, max_steps=10**12,
                     fetch_max_wait_ms=500, replica_lag_time_max_ms=30_000,
                     fetch_timeout_ms=30_000)


class _ScaleSimulation(Simulation):
    """A :class:`Simulation` with a fixed ZooKeeper latency (round trips and watches)."""

    def __init__(self, seed: int, config: SimConfig, zk_latency_ms: int) -> None:
        self.fixed_zk_latency_ms = zk_latency_ms
        super().__init__(seed, config, invariants=[])
        self.invariants = []

    def zk_latency(self) -> int:
        return self.fixed_zk_latency_ms


class _Meter:
    """CPU seconds spent inside the wrapped callables."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap_coroutine(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (a coroutine function) counting the CPU of each step of its coroutine."""
        meter = self

        @types.coroutine
        def timed(coro: Any) -> Any:
            value: Any = None
            error: BaseException | None = None
            while True:
                start = time.process_time()
                try:
                    step = coro.send(value) if error is None else coro.throw(error)
                except StopIteration as done:
                    return done.value
                finally:
                    meter.seconds += time.process_time() - start
                try:
                    value, error = (yield step), None
                except BaseException as exc:  # noqa: BLE001 - handed to the coroutine
                    value, error = None, exc

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await timed(fn(*args, **kwargs))
        return call

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - start
        return timed


def _converged(sim: Simulation, stopping: int = -1) -> bool:
    """Every live broker's metadata (and its replicas, but those of ``stopping``, which got
    StopReplica) equal ZooKeeper's states."""
    live = [n for n in sim.nodes.values() if n.alive]
    topics = sim.zk.topics
    for tp, state in sim.zk.states.items():
        want = (state.leader, state.leader_epoch)
        replicas = topics[tp.topic].partitions[tp.partition]
        for node in live:
            assert node.core is not None
            seen = node.core.metadata.partition(tp)
            if seen is None or (seen.leader, seen.leader_epoch, seen.partition_epoch) != (
                    *want, state.zk_version):
                return False
            if node.id in replicas and node.id != stopping:
                hosted = node.core.replica_manager.partitions.get(tp)
                if hosted is None or (hosted.leader, hosted.leader_epoch) != want:
                    return False
    return True


def _controller(sim: Simulation) -> SimNode | None:
    return next((n for n in sim.nodes.values() if n.active), None)


def _idle(node: SimNode) -> bool:
    service = node.service
    return service is not None and service.event_queue_size == 0 \
        and service.current_event is None


class _Runner:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.cpu = 0.0
        self.gc_cpu = 0.0
        self.profile: cProfile.Profile | None = None
        self._running = False
        self._gc_start = 0.0

    def on_gc(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.process_time()
        elif self._running:
            self.gc_cpu += time.process_time() - self._gc_start

    def run_until(self, done: Callable[[], bool], limit_s: float = 600.0) -> None:
        """Run the loop in slices (counting their CPU) until ``done()`` (not counted)."""
        loop = self.sim.loop
        deadline = loop.time() + limit_s
        while True:
            start = time.process_time()
            self._running = True
            if self.profile is not None:
                self.profile.enable()
            loop.run_for(SLICE_S)
            if self.profile is not None:
                self.profile.disable()
            self._running = False
            self.cpu += time.process_time() - start
            if done():
                return
            if loop.time() > deadline:
                raise TimeoutError(f"not done after {limit_s} simulated seconds")

    def settle(self, node: SimNode, quiet_s: float = 0.1) -> None:
        """Run until ``node``'s controller queue stayed empty for ``quiet_s``."""
        quiet_since = [self.sim.loop.time()]

        def quiet() -> bool:
            now = self.sim.loop.time()
            if not _idle(node):
                quiet_since[0] = now
            return now - quiet_since[0] >= quiet_s
        self.run_until(quiet)


def measure(scenario: str, config: SimConfig, zk_latency_ms: int = 1, seed: int = 1,
            profile: cProfile.Profile | None = None, freeze_heap: bool = False
            ) -> ScaleResult:
    """Build the cluster of ``config`` and measure ``scenario`` (``failure``/``shutdown``);
    ``profile`` is enabled while the loop runs the measured part.  The garbage collector
    runs with the broker's thresholds (:func:`weir.server.gc_tuning.tune_thresholds`);
    with ``freeze_heap`` the heap of the built cluster is frozen before the measure, as a
    broker freezes its startup heap (:func:`weir.server.gc_tuning.freeze_startup_heap`)."""
    if scenario not in ("failure", "shutdown"):
        raise ValueError(f"unknown scenario {scenario!r}")
    sim = _ScaleSimulation(seed, config, zk_latency_ms)
    asyncio.set_event_loop(sim.loop)
    thresholds = gc.get_threshold()
    # Unfreezing moves every frozen object back: only when nothing was frozen before us.
    unfreeze = freeze_heap and gc.get_freeze_count() == 0
    gc_tuning.tune_thresholds()
    runner = _Runner(sim)
    gc.callbacks.append(runner.on_gc)
    try:
        return _measure(sim, runner, scenario, profile, freeze_heap)
    finally:
        if unfreeze:
            gc.unfreeze()
        gc.callbacks.remove(runner.on_gc)
        gc.set_threshold(*thresholds)
        sim._close_loop()


def _measure(sim: _ScaleSimulation, runner: _Runner, scenario: str,
             profile: cProfile.Profile | None, freeze_heap: bool) -> ScaleResult:
    cfg = sim.config
    setup = time.process_time()
    for node in sim.nodes.values():
        node.start()
    runner.run_until(lambda: _controller(sim) is not None)
    for t in range(cfg.topics):
        sim._create_topic(f"t{t}")
    total = cfg.topics * cfg.partitions
    runner.run_until(lambda: len(sim.zk.states) == total and _converged(sim))
    controller = _controller(sim)
    assert controller is not None
    runner.settle(controller)
    setup_cpu = time.process_time() - setup
    if freeze_heap:
        gc_tuning.freeze_startup_heap()

    leaders: dict[int, int] = {}
    for state in sim.zk.states.values():
        leaders[state.leader] = leaders.get(state.leader, 0) + 1
    victim = max((b for b in sim.nodes if b != controller.id), key=lambda b: leaders.get(b, 0))
    node = sim.nodes[victim]
    brokers_cpu = _Meter()
    core_cpu = _Meter()
    for n in sim.nodes.values():
        # The brokers' side: each request frame through the broker's Dispatcher and
        # handler, encoding the answer (the CPU of each step of the coroutine).
        n.serve_frame = brokers_cpu.wrap_coroutine(n.serve_frame)  # type: ignore[method-assign]
    service = controller.service
    assert service is not None
    service.core.handle = core_cpu.wrap(service.core.handle)  # type: ignore[method-assign]
    service.core.complete = core_cpu.wrap(service.core.complete)  # type: ignore[method-assign]

    runner.cpu = runner.gc_cpu = 0.0
    runner.profile = profile
    started = sim.now
    answer: list[Any] = []
    if scenario == "failure":
        start = time.process_time()
        session = node.session
        node.crash()
        sim.zk.expire(session)
        runner.cpu += time.process_time() - start
        runner.run_until(lambda: victim not in controller.service.core.ctx.live_brokers
                         and _converged(sim))
    else:
        async def shutdown() -> None:
            answer.append(await service.on_controlled_shutdown(victim, node.epoch))
        sim.spawn(shutdown())
        runner.run_until(lambda: bool(answer) and _converged(sim, stopping=victim))
    runner.settle(controller)
    return ScaleResult(
        scenario=scenario, partitions=total, brokers=cfg.brokers, replication=cfg.replication,
        zk_latency_ms=sim.fixed_zk_latency_ms, victim=victim, led=leaders.get(victim, 0),
        controller_cpu_s=runner.cpu - brokers_cpu.seconds, core_cpu_s=core_cpu.seconds,
        broker_cpu_s=brokers_cpu.seconds, gc_cpu_s=runner.gc_cpu, simulated_ms=sim.now - started,
        setup_cpu_s=setup_cpu, remaining=len(answer[0]) if answer else 0,
        frozen_heap=freeze_heap)

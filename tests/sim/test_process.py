"""A simulated broker dies as a killed process does: all its tasks at once, no shutdown code
(weir.sim.process)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from weir.sim import SimConfig, Simulation
from weir.sim import process as sim_process
from weir.sim.node import SimNode
from weir.sim.process import SimProcess
from weir.sim.vloop import VirtualTimeLoop


def test_tasks_created_by_a_process_and_its_tasks_are_its_own() -> None:
    loop = VirtualTimeLoop()
    sim_process.install(loop)
    sim_process.install(loop)  # idempotent
    proc, other = SimProcess("a"), SimProcess("b")
    seen: list[Any] = []
    grandchild: list[asyncio.Task[Any]] = []

    async def child() -> None:
        seen.append(sim_process.current())
        await asyncio.sleep(10)

    async def root() -> None:
        grandchild.append(asyncio.get_running_loop().create_task(child()))
        other.run(lambda: seen.append(sim_process.current()))
        await asyncio.sleep(10)

    world: list[asyncio.Task[Any]] = []
    loop.call_soon(lambda: world.append(loop.create_task(asyncio.sleep(10))),
                   context=contextvars.Context())
    first = proc.spawn(loop, root())
    loop.run_for(0.001)
    assert seen == [other, proc]
    assert set(proc.tasks) == {first, grandchild[0]}
    assert other.tasks == [] and world and not world[0].done()
    dying = proc.kill()
    assert set(dying) == {first, grandchild[0]}
    assert all(t.cancelling() for t in dying)
    loop.run_for(0.001)
    assert all(t.cancelled() for t in dying) and proc.tasks == []
    # Code of a dead process still unwinding starts nothing that runs.
    late = proc.spawn(loop, asyncio.sleep(1))
    assert late.cancelling()
    world[0].cancel()
    loop.run_for(0.001)
    loop.close()


def _started(config: SimConfig) -> Simulation:
    sim = Simulation(3, config, invariants=[])
    asyncio.set_event_loop(sim.loop)
    for node in sim.nodes.values():
        node.start()
    for t in range(config.topics):
        sim._create_topic(f"t{t}")
    sim.loop.run_for(1.0)
    return sim


def test_a_killed_controller_runs_no_more_code() -> None:
    """Killing the active controller cancels its event consumer and every channel sender in
    the same step, and none of its code runs afterwards: it does not resign (its
    /controller znode goes with the session), retry or send."""
    sim = _started(SimConfig(topics=2, partitions=2))
    try:
        victim = next(n for n in sim.nodes.values() if n.active)
        service = victim.service
        assert service is not None and service._channels is not None
        tasks = [service._consumer, *(s.task for s in service._channels._senders.values())]
        assert len(tasks) == 1 + len(sim.nodes) and not any(t.done() for t in tasks)
        handled: list[str] = []
        handle = service.core.handle

        def spy(event: Any, now: int) -> Any:
            handled.append(type(event).__name__)
            return handle(event, now)
        service.core.handle = spy  # type: ignore[method-assign]
        session = victim.session
        victim.crash()
        assert all(t.cancelling() for t in tasks)
        sim.schedule(sim.config.session_timeout_ms, lambda: sim.zk.expire(session))
        sim.loop.run_for(1.0)
        assert handled == []
        assert all(t.done() for t in tasks) and victim.process is not None
        assert victim.process.tasks == []
        successor = [n.id for n in sim.nodes.values() if n.active]
        assert len(successor) == 1 and successor[0] != victim.id
    finally:
        sim._close_loop()


def test_requests_run_as_their_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    """A controller request is applied as code of the broker receiving it, so what it starts
    dies with that broker, not with the controller that sent it."""
    sim = _started(SimConfig(topics=1, partitions=2, data=False))
    try:
        receivers: list[tuple[Any, Any]] = []
        serve_frame = SimNode.serve_frame

        async def spy(node: SimNode, frame: bytes, peer: str) -> bytes:
            receivers.append((sim_process.current(), node.process))
            return await serve_frame(node, frame, peer)
        monkeypatch.setattr(SimNode, "serve_frame", spy)
        sim._create_topic("more")
        sim.loop.run_for(0.5)
        assert receivers
        assert all(current is own for current, own in receivers)
    finally:
        sim._close_loop()


def test_a_controlled_shutdown_the_dying_controller_never_answers_still_ends_in_an_exit(
        ) -> None:
    """The controller dies with a ControlledShutdown in flight: the attempt fails after the
    request timeout, as in KafkaServer.controlledShutdown, and after its retries the broker
    stops (disk seed 387: broker 2 stayed alive with its followers stopped, out of every ISR
    for good)."""
    config = SimConfig(topics=2, partitions=2)
    sim = _started(config)
    try:
        controller = next(n for n in sim.nodes.values() if n.active)
        leaving = next(n for n in sim.nodes.values() if not n.active)
        sim._request_shutdown(leaving, attempt=1)
        session = controller.session
        controller.crash()  # before the request arrives: no answer ever comes back
        sim.schedule(config.session_timeout_ms, lambda: sim.zk.expire(session))
        sim.loop.run_for(1.0)
        assert leaving.alive  # the attempt is still waiting for its answer
        sim.loop.run_for(3 * config.controller_socket_timeout_ms / 1000)
        assert not leaving.alive
        assert any(f.endswith(f"{leaving.id} stops after controlled shutdown")
                   for f in sim.faults)
    finally:
        sim._close_loop()


def test_messages_on_one_link_arrive_in_the_order_sent() -> None:
    """Two messages due at the same virtual millisecond on one link run in the order sent:
    their two timers' float deadlines (``loop.time() + delay``, taken at different clock
    values) could otherwise order them either way (disk seed 200: two
    AlterPartitionReassignments from one client applied in reverse)."""
    sim = Simulation(3, SimConfig(), invariants=[])
    asyncio.set_event_loop(sim.loop)
    try:
        got: list[int] = []
        sent = 0
        for _ in range(2000):
            sim.schedule(sim.rng.randint(1, 7), lambda: None)  # the clock moves unevenly
            sim.loop.run_for(0.001 * sim.rng.randint(1, 3))
            for _ in range(2):
                sim.deliver(1, 2, lambda i=sent: got.append(i))
                sent += 1
        sim.loop.run_for(1.0)
        assert len(got) == sent
        assert got == sorted(got)
    finally:
        sim._close_loop()

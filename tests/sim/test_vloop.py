"""The virtual-time event loop: sleeps take no wall time, order is deterministic."""

from __future__ import annotations

import asyncio
import time

import pytest

from weir.sim.vloop import Deadlock, VirtualTimeLoop


def _run(coro_fn):
    loop = VirtualTimeLoop()
    try:
        return loop, loop.run_until_complete(coro_fn())
    finally:
        loop.close()


def test_an_hour_of_sleeps_passes_at_once() -> None:
    async def main() -> float:
        for _ in range(60):
            await asyncio.sleep(60)
        return asyncio.get_running_loop().time()

    started = time.monotonic()
    loop, end = _run(main)
    assert end == pytest.approx(3600.0)
    assert loop.now_ms() == 3_600_000
    assert time.monotonic() - started < 30  # bounded, not a timing assertion on the loop


def test_timers_fire_in_virtual_order_and_wait_for_times_out() -> None:
    async def main() -> list[str]:
        seen: list[str] = []
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, seen.append, "c")
        loop.call_later(0.1, seen.append, "a")
        loop.call_later(0.2, seen.append, "b")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(loop.create_future(), 0.25)
        seen.append(f"timeout@{loop.time():.2f}")
        await asyncio.sleep(0.1)
        return seen

    _, seen = _run(main)
    assert seen == ["a", "b", "timeout@0.25", "c"]


def test_to_thread_runs_inline_and_step_hooks_run() -> None:
    import threading

    async def main() -> tuple[int, Exception | None]:
        ident = await asyncio.to_thread(threading.get_ident)
        try:
            await asyncio.to_thread(lambda: 1 / 0)
        except ZeroDivisionError as exc:
            return ident, exc
        return ident, None

    loop = VirtualTimeLoop()
    calls: list[int] = []
    loop.add_step_hook(lambda: calls.append(loop.steps))
    try:
        ident, error = loop.run_until_complete(main())
        assert ident == threading.get_ident()
        assert isinstance(error, ZeroDivisionError)
        assert calls and calls == sorted(calls)
        assert loop.run_until_complete(loop.run_in_executor(None, sum, [1, 2])) == 3
    finally:
        loop.close()


def test_call_soon_threadsafe_from_the_loop_thread_and_run_for() -> None:
    loop = VirtualTimeLoop(start=5.0)
    seen: list[float] = []
    try:
        loop.call_soon_threadsafe(lambda: seen.append(loop.time()))
        loop.call_later(2.0, lambda: seen.append(loop.time()))
        loop.run_for(10.0)
        assert seen == [5.0, 7.0]
        assert loop.time() == pytest.approx(15.0)
    finally:
        loop.close()


def test_a_future_nobody_completes_is_a_deadlock() -> None:
    loop = VirtualTimeLoop()
    try:
        with pytest.raises(Deadlock):
            loop.run_until_complete(loop.create_future())
    finally:
        loop.close()

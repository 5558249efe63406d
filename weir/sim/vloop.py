"""An asyncio event loop on a virtual clock, for running Weir's real asyncio shells under
the seeded simulation.

:class:`VirtualTimeLoop` is a :class:`asyncio.SelectorEventLoop` whose :meth:`time` is a
virtual clock and whose selector never blocks: when the loop has nothing ready it would
wait ``timeout`` seconds for I/O; the virtual selector instead polls the real selector once
(only the loop's own self-pipe is registered in a simulation) and moves the clock forward by
``timeout``, straight to the next timer.  So ``asyncio.sleep``, ``call_later``,
``wait_for`` timeouts and every ``loop.time()`` read see simulated time, an hour of it
passes in as many steps as it has timers, and one seed replays exactly: nothing depends on
wall time or on threads.

The API (small on purpose):

- ``VirtualTimeLoop(start=0.0)``: the loop; ``loop.time()`` in seconds, ``loop.now_ms()``
  in whole milliseconds.
- ``loop.steps``: loop iterations run so far (one iteration runs every callback that was
  ready at its start).
- ``loop.add_step_hook(fn)``: ``fn()`` runs before each iteration, i.e. after the
  callbacks of the previous one: invariant checks go here.  An exception it raises stops
  the loop (propagates out of ``run_until_complete``/``run_forever``).
- ``loop.run_for(seconds)``: run until the virtual clock reaches ``time() + seconds``.
- ``run_in_executor(None, fn, *args)`` (and so ``asyncio.to_thread``) runs ``fn`` inline on
  the loop's thread, as the next step of a task: blocking work that the production code
  sends to worker threads happens deterministically.  An explicit executor is honoured
  (threads: not deterministic), so code under simulation passes None.
- :class:`Deadlock` is raised when the loop would wait forever (nothing ready, no timer,
  no I/O): under simulation, that is a bug (a future nobody will ever complete).

Usage::

    loop = VirtualTimeLoop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(main())
    finally:
        asyncio.set_event_loop(None)
        loop.close()
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable
from typing import Any

__all__ = ["Deadlock", "VirtualTimeLoop"]


class Deadlock(RuntimeError):
    """The virtual-time loop has nothing to run and nothing to wait for."""


class _VirtualSelector(selectors.BaseSelector):
    """Wraps the real selector: polls it without blocking, then advances the clock."""

    def __init__(self, loop_clock: _Clock) -> None:
        self._real = selectors.DefaultSelector()
        self._clock = loop_clock

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        self._clock.before_step()
        ready = self._real.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise Deadlock("the virtual-time loop would wait forever: nothing is ready or "
                           "scheduled")
        self._clock.now += timeout
        return ready


class _Clock:
    def __init__(self, start: float) -> None:
        self.now = start
        self.steps = 0
        self.hooks: list[Callable[[], None]] = []

    def before_step(self) -> None:
        self.steps += 1
        for hook in self.hooks:
            hook()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """See the module docstring."""

    def __init__(self, start: float = 0.0) -> None:
        self._clock = _Clock(start)
        super().__init__(_VirtualSelector(self._clock))
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._clock.now

    def now_ms(self) -> int:
        """The virtual clock in whole milliseconds."""
        return round(self._clock.now * 1000)

    @property
    def steps(self) -> int:
        return self._clock.steps

    def add_step_hook(self, hook: Callable[[], None]) -> None:
        """Run ``hook()`` before every iteration of the loop (after the previous one)."""
        self._clock.hooks.append(hook)

    def run_for(self, seconds: float) -> None:
        """Run the loop until the virtual clock reaches ``time() + seconds``."""
        self.call_later(seconds, self.stop)
        self.run_forever()

    def run_in_executor(self, executor: Any, func: Callable[..., Any],
                        *args: Any) -> asyncio.Future[Any]:
        if executor is not None:
            return super().run_in_executor(executor, func, *args)
        return self.create_task(_inline(func, args))


async def _inline(func: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``func(*args)`` as a task's step: its result or exception goes to the task."""
    return func(*args)

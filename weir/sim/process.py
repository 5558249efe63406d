"""The tasks of one simulated broker process, so that a crash can kill them all.

A real broker that is killed runs no more code: its controller's event consumer, its
``ControllerChannelManager`` senders, its leader-rebalance timer, the requests it was
serving and the ZooKeeper calls it was waiting on all vanish at once, and nothing of it
resigns, closes or retries.  Under simulation every broker shares one event loop, so each
process is a :class:`SimProcess`: a :mod:`contextvars` context naming it.  A task created
while that context is current (the process's own tasks, and every task they create, since
asyncio copies the creator's context) is registered with the process by the loop's task
factory (:func:`install`); :meth:`SimProcess.kill` cancels every one of them in the same
step.  Messages between processes and the simulation's timers run their callbacks in an
empty context (``Simulation.schedule``), and a request arriving runs as code of its
receiver (:meth:`SimProcess.run`), so a delivery does not make the receiver's tasks the
sender's.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["SimProcess", "current", "install"]

_PROCESS: contextvars.ContextVar[SimProcess | None] = contextvars.ContextVar(
    "weir_sim_process", default=None)

def current() -> SimProcess | None:
    """The process whose code is running now (None: the simulated world)."""
    return _PROCESS.get()


class SimProcess:
    """One incarnation of a broker process: its context and every task created in it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dead = False
        self.context = contextvars.Context()
        self.context.run(_PROCESS.set, self)
        self._tasks: dict[asyncio.Task[Any], None] = {}  # ordered: replayable cancels

    def __repr__(self) -> str:
        return f"SimProcess({self.name}{', dead' if self.dead else ''})"

    def spawn(self, loop: asyncio.AbstractEventLoop,
              coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Start ``coro`` as a task of this process (also from another process's code)."""
        return loop.create_task(coro, context=self.context)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``fn`` as code of this process (tasks it creates are the process's)."""
        if _PROCESS.get() is self:
            return fn(*args)
        return self.context.copy().run(fn, *args)

    def adopt(self, task: asyncio.Task[Any]) -> None:
        if self.dead:  # created by code of a dead process still unwinding: it never runs
            task.cancel()
        if not task.done():
            self._tasks[task] = None
            task.add_done_callback(lambda t: self._tasks.pop(t, None))

    @property
    def tasks(self) -> list[asyncio.Task[Any]]:
        """Its tasks not yet finished."""
        return [t for t in self._tasks if not t.done()]

    def kill(self) -> list[asyncio.Task[Any]]:
        """The process dies: every task of it is cancelled now.  Returns them (the
        caller keeps them referenced until they have unwound)."""
        self.dead = True
        dying = self.tasks
        for task in dying:
            task.cancel()
        return dying


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Register every task the loop creates with the process current where it is created
    (wrapping the loop's task factory, if any; a second call does nothing)."""
    inner = loop.get_task_factory()
    if getattr(inner, "weir_sim_process", False):
        return

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = (inner(loop, coro, **kwargs) if inner is not None
                else asyncio.Task(coro, loop=loop, **kwargs))
        context = kwargs.get("context")
        owner = context.get(_PROCESS) if context is not None else _PROCESS.get()
        if owner is not None:
            owner.adopt(task)
        return task

    factory.weir_sim_process = True  # type: ignore[attr-defined]
    loop.set_task_factory(factory)  # type: ignore[arg-type]

"""Small asyncio helpers shared by the shells."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable

# The request a task is handling holds a place in the socket server's queue
# (queued.max.requests); a handler that parks the request calls parked() to give it back.
request_slot: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "request_slot", default=None)


def parked() -> None:
    """The current request waits in a purgatory (or for a rebalance): as in Kafka, it no
    longer counts against ``queued.max.requests``. Idempotent; a no-op outside a request."""
    release = request_slot.get()
    if release is not None:
        release()


async def cancel_and_wait(*tasks: asyncio.Task | None) -> None:
    """Cancel ``tasks`` and wait until each has really finished.

    On Python 3.11 ``asyncio.wait_for`` can swallow a cancellation that races with its inner
    future completing (fixed in 3.12); a task that loses its cancel that way carries on, and
    a plain ``cancel(); await task`` then waits forever.  Cancelling again until the task is
    done closes that hole.
    """
    pending = {t for t in tasks if t is not None and not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=0.5)
    for task in tasks:
        if task is not None and task.done() and not task.cancelled():
            task.exception()  # retrieved: nothing to log about a task we stopped

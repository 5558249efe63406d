"""Delayed operations: produce waiting for the high watermark, fetch waiting for bytes.

A waiter names the keys (partitions) it watches and a ``check`` that says whether it can
complete; :meth:`Purgatory.notify` re-runs the checks of a key's waiters after an append, a
high-watermark move or a role change.  Timeouts are the caller's ``timeout_s``.

An operation object (:class:`DelayedOperation`, e.g. ``DelayedProduce``) is watched with
:meth:`Purgatory.watch`, Kafka's ``DelayedOperationPurgatory.tryCompleteElseWatch``: its
``try_complete`` is the check, its ``on_expire`` runs at the timeout.

A waiter over many keys (a follower's fetch of thousands of partitions) can instead give a
check that takes the notified key (``per_key``): an append then costs one partition's check,
not a walk of every partition the waiter watches, as Kafka's ``DelayedFetch.tryComplete``
looks at each partition's end offset incrementally.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Protocol

from weir.asyncutil import parked


class DelayedOperation(Protocol):
    """Kafka's ``DelayedOperation``: what :meth:`Purgatory.watch` holds."""

    @property
    def keys(self) -> Iterable[Hashable]: ...

    def try_complete(self) -> bool: ...

    def on_expire(self) -> None: ...


class _Waiter:
    __slots__ = ("check", "future", "per_key")

    def __init__(self, check: Callable[..., bool], future: asyncio.Future,
                 per_key: bool) -> None:
        self.check = check
        self.future = future
        self.per_key = per_key


def _expire(future: asyncio.Future) -> None:
    """A waiter's timeout: it ends not completed (unless a notification came first)."""
    if not future.done():
        future.set_result(False)


class Purgatory:
    def __init__(self) -> None:
        # Waiters per key in arrival order (a dict as an ordered set): completing them in a
        # fixed order keeps a run replayable (the simulation's seeds).
        self._watchers: dict[Hashable, dict[_Waiter, None]] = defaultdict(dict)

    async def wait(self, keys: Iterable[Hashable], check: Callable[..., bool],
                   timeout_s: float, *, per_key: bool = False) -> bool:
        """Wait until ``check()`` is true (True) or the timeout passes (False).

        ``per_key``: ``check(key)`` is asked after each notification of ``key``; the caller
        has found it not done yet, and at the timeout nothing is checked (False)."""
        if not per_key and check():
            return True
        return await self._park(keys, check, timeout_s, per_key)

    async def watch(self, op: DelayedOperation, timeout_s: float) -> None:
        """Kafka's ``tryCompleteElseWatch`` for an operation whose first ``try_complete``
        the caller has made (it was not complete): held under its keys until a
        notification completes it, or ``on_expire`` at the timeout."""
        if not await self._park(op.keys, op.try_complete, timeout_s, False):
            op.on_expire()

    async def _park(self, keys: Iterable[Hashable], check: Callable[..., bool],
                    timeout_s: float, per_key: bool) -> bool:
        if timeout_s <= 0:
            return False if per_key else check()
        parked()
        loop = asyncio.get_running_loop()
        waiter = _Waiter(check, loop.create_future(), per_key)
        keys = list(keys)
        for key in keys:
            self._watchers[key][waiter] = None
        # The waiting task awaits the future itself, with its own timer: a notification
        # resumes it on the loop's next turn.  ``wait_for`` over a ``shield`` took three
        # turns (shield's callback, wait_for's, then the task), each one running whatever
        # else was ready, on the path of every acks=all acknowledgement and every parked
        # fetch (Kafka completes a DelayedOperation on the thread that satisfied it).
        timer = loop.call_later(timeout_s, _expire, waiter.future)
        try:
            if await waiter.future:
                return True
            return False if per_key else check()
        finally:
            timer.cancel()
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.pop(waiter, None)
                    if not watchers:
                        del self._watchers[key]

    def notify(self, key: Hashable) -> None:
        for waiter in list(self._watchers.get(key, ())):
            if waiter.future.done():
                continue
            # A check may complete this very waiter before it returns: reading a partition
            # can fail its log dir, and taking the dir offline notifies every waiter.
            if (waiter.check(key) if waiter.per_key else waiter.check()) \
                    and not waiter.future.done():
                waiter.future.set_result(True)

    def notify_all(self) -> None:
        for key in list(self._watchers):
            self.notify(key)

    def __len__(self) -> int:
        return len({w for ws in self._watchers.values() for w in ws})

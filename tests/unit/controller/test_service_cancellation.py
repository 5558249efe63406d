"""A caller cancelled while the controller's answer arrives is cancelled, not answered.

Python 3.11's ``asyncio.wait_for`` returns the inner future's result when the awaiting task
is cancelled in the loop iteration that completes it: the cancellation is lost and the task
carries on (a handler outliving the broker's shutdown, a resigned controller's caller going
on as if answered).  The shell waits with ``asyncio.timeout`` instead, which keeps it."""

from __future__ import annotations

import asyncio

import pytest

from weir.controller.events import ElectionType
from weir.controller.service import ControllerService
from weir.protocol.errors import ErrorCode


class ActiveCore:
    active = True


def _service(timeout_ms: int = 30_000) -> ControllerService:
    service = ControllerService(1, zk=None)
    service.core = ActiveCore()
    service._timeout_ms = timeout_ms
    return service


def test_a_cancellation_racing_the_answer_is_kept() -> None:
    async def scenario() -> asyncio.Task:
        service = _service()
        caller = asyncio.create_task(service.elect_leaders(ElectionType.PREFERRED, None))
        _queued_at, call = await service._queue.get()
        # The core answers and the caller is cancelled in one and the same iteration.
        call.event.reply_to.set_result({})
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        return caller

    assert asyncio.run(scenario()).cancelled()


def test_an_unanswered_call_times_out_with_timeout_error() -> None:
    async def scenario() -> None:
        service = _service(timeout_ms=10)
        with pytest.raises(TimeoutError):
            await service.elect_leaders(ElectionType.PREFERRED, None)

    asyncio.run(scenario())


def test_an_answered_call_returns_the_answer() -> None:
    async def scenario() -> dict:
        service = _service()
        caller = asyncio.create_task(service.elect_leaders(ElectionType.PREFERRED, None))
        _queued_at, call = await service._queue.get()
        call.event.reply_to.set_result({"t": (ErrorCode.none, None)})
        return await caller

    assert asyncio.run(scenario()) == {"t": (ErrorCode.none, None)}

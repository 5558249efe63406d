import asyncio

from weir.asyncutil import cancel_and_wait


def test_cancel_and_wait_outlasts_a_swallowed_cancellation():
    """A task that swallows its first cancellation (as a racing wait_for can on 3.11)
    and goes back to waiting is still stopped."""
    swallowed = []

    async def stubborn(queue: asyncio.Queue) -> None:
        while True:
            try:
                await queue.get()
            except asyncio.CancelledError:
                if not swallowed:
                    swallowed.append(True)
                    asyncio.current_task().uncancel()
                    continue
                raise

    async def scenario():
        task = asyncio.create_task(stubborn(asyncio.Queue()))
        await asyncio.sleep(0)
        await asyncio.wait_for(cancel_and_wait(task), 5)
        return task

    task = asyncio.run(scenario())
    assert swallowed and task.cancelled()

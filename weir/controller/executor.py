"""The one executor of the core's ZooKeeper operations.

:func:`execute` maps each :class:`~weir.controller.effects.ZkOperation` to the
:class:`~weir.controller.store.ControllerStore` calls that carry it out and returns the
result the core expects (see each operation's docstring).  It blocks on the store, so the
asyncio shell runs it through :func:`run` (worker threads in production, inline under the
simulation's virtual-time loop); the unit tests call it directly on the in-memory store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from weir.controller.context import ReplicaAssignment
from weir.controller.effects import (
    FlushRequests,
    TopicsRead,
    ZkCreatePartitionStates,
    ZkDeletePreferredElection,
    ZkDeleteTopic,
    ZkOperation,
    ZkReadPartitionStates,
    ZkReadTopics,
    ZkSetReassignments,
    ZkUpdatePartitionStates,
    ZkUpdateTopicAssignments,
)
from weir.controller.log_dir_events import ZkDeleteLogDirEvents
from weir.controller.reassignment import merge_topic_assignment
from weir.controller.store import ControllerStore
from weir.coordination.errors import ControllerMovedError, ZkVersionMismatchError
from weir.protocol.errors import ErrorCode, KafkaError

__all__ = ["RunBlocking", "execute", "run", "start_writes", "update_topic_assignment", "znodes"]


RunBlocking = Callable[..., Awaitable[Any]]
"""``run_blocking(fn, *args)``: ``fn(*args)`` off the event loop (``asyncio.to_thread``)."""


def znodes(op: ZkOperation) -> int:
    """How many partition states (or topics) an operation names (the controller's event
    timing reports it next to the ZooKeeper time)."""
    for name in ("states", "partitions", "changes", "topics", "names"):
        value = getattr(op, name, None)
        if value is not None and hasattr(value, "__len__"):
            return len(value)
    return 1


def execute(store: ControllerStore, op: ZkOperation) -> Any:
    """Run one ZooKeeper operation on ``store`` (blocking); its result for the core."""
    if isinstance(op, FlushRequests):
        return None  # nothing to do in ZooKeeper (the asyncio shell awaits its channels)
    if isinstance(op, ZkCreatePartitionStates):
        return store.create_partition_states(dict(op.states), op.epoch_zk_version)
    if isinstance(op, ZkUpdatePartitionStates):
        return store.update_partition_states(dict(op.states), op.epoch_zk_version)
    if isinstance(op, ZkReadPartitionStates):
        return store.get_partition_states(op.partitions)
    if isinstance(op, ZkReadTopics):
        topics = store.get_topics(op.topics)
        return TopicsRead(topics, store.get_topic_configs(topics))
    if isinstance(op, ZkDeleteTopic):
        store.delete_topic_znodes(op.topic, op.epoch_zk_version)
        return None
    if isinstance(op, ZkDeletePreferredElection):
        store.delete_preferred_election(op.epoch_zk_version)
        return None
    if isinstance(op, ZkUpdateTopicAssignments):
        return {topic: update_topic_assignment(store, topic, changes, op.epoch_zk_version)
                for topic, changes in op.changes.items()}
    if isinstance(op, ZkDeleteLogDirEvents):
        store.delete_log_dir_events(op.names, op.epoch_zk_version)
        return None
    if isinstance(op, ZkSetReassignments):
        store.set_reassignments({tp: list(r) for tp, r in op.partitions.items()},
                                op.epoch_zk_version)
        return None
    raise TypeError(f"unknown ZooKeeper operation {op!r}")


def update_topic_assignment(store: ControllerStore, topic: str,
                            changes: Mapping[int, ReplicaAssignment], epoch_zk_version: int,
                            attempts: int = 5) -> Exception | None:
    """Read-modify-write of one topic znode, conditional on its version (Kafka's
    ``KafkaZkClient.setTopicAssignment`` after re-reading on a version conflict)."""
    error: Exception | None = None
    for _ in range(attempts):
        current = store.get_topic(topic)
        if current is None:
            return KafkaError(ErrorCode.unknown_topic_or_partition, f"{topic} is gone")
        merged = merge_topic_assignment(current, changes)
        try:
            store.set_topic_assignment(merged, current.zk_version,
                                       controller_epoch_zk_version=epoch_zk_version)
            return None
        except ControllerMovedError:
            raise
        except ZkVersionMismatchError as exc:
            error = exc  # someone else wrote the topic znode: merge again
        except KafkaError as exc:
            return exc
    return error


async def run(store: ControllerStore, op: ZkOperation, run_blocking: RunBlocking) -> Any:
    """:func:`execute` through ``run_blocking``: one call, on one worker thread, whatever the
    operation's size.

    A large state update is pipelined by the ZooKeeper client itself (fenced multis of
    ``weir.coordination.fenced.CHUNK`` partitions, all in flight before the first answer is
    read).  It used to be split over concurrent worker threads as well, one per 1,000
    partitions: that overlapped nothing more, but the threads took the interpreter lock
    from the event loop while they built their requests.  6,667 ISR shrinks against a real
    ZooKeeper, four interleaved pairs: worst event-loop lag 65-370 ms -> 13-52 ms, process
    CPU 121-140 -> 95-105 ms, wall time 311-468 -> 229-380 ms.
    """
    return await run_blocking(execute, store, op)


_pipelines: set[asyncio.Future] = set()
"""The worker-thread calls of :func:`start_writes` still running."""


def start_writes(store: ControllerStore, batches: Sequence[Mapping[Any, Any]],
                 epoch_zk_version: int, run_blocking: RunBlocking) -> list[asyncio.Future]:
    """Send the conditional state writes of ``batches`` together, in order; a future of
    each one's result (as :class:`ZkUpdatePartitionStates`'s).

    With a store that sends and waits in two halves (``start_partition_state_updates``,
    the ZooKeeper client's), one worker thread sends them all, then waits for each in turn
    and hands its result to the loop as it lands: more threads building requests at once
    would take the interpreter lock from the event loop (see :func:`run`).  Other stores
    (the simulation's) get one operation per batch.
    """
    start = getattr(store, "start_partition_state_updates", None)
    if start is None or len(batches) == 1:
        futures = [asyncio.ensure_future(run(
            store, ZkUpdatePartitionStates(b, epoch_zk_version), run_blocking))
            for b in batches]
    else:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in batches]

        def land(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        def pipeline() -> None:
            waits: list[Callable[[], Any]] = []
            try:
                for b in batches:
                    waits.append(start(b, epoch_zk_version))
            except Exception as exc:  # noqa: BLE001 - handed to each future left
                for future in futures[len(waits):]:
                    loop.call_soon_threadsafe(land, future, None, exc)
            for future, wait in zip(futures, waits, strict=False):
                try:
                    loop.call_soon_threadsafe(land, future, wait(), None)
                except Exception as exc:  # noqa: BLE001 - handed to its future
                    loop.call_soon_threadsafe(land, future, None, exc)
        task = asyncio.ensure_future(run_blocking(pipeline))
        _pipelines.add(task)
        task.add_done_callback(_pipelines.discard)
    for future in futures:
        # an error of a write the core never awaited (its event ended first) is dropped
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
    return futures

"""The lifecycle every coordinator of an internal topic shares (Kafka's CoordinatorRuntime,
and the loading half of GroupMetadataManager and TransactionStateManager).

A coordinator follows leadership of its internal topic's partitions (the replica manager's
leadership listeners): it loads a partition by replaying its log when this broker becomes its
leader, unloads it when leadership goes, answers for a key only while the key's partition is
loaded here, runs one tick loop with its periodic jobs, and stops all of its tasks on stop.
What a partition holds and how a record replays is the subclass's business.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from weir.asyncutil import cancel_and_wait
from weir.common import TopicPartition
from weir.coordinator_runtime.collaborators import Clock, MetadataView
from weir.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


class Loading(enum.Enum):
    LOADING = 1
    LOADED = 2


@dataclass
class CoordinatorPartition:
    """One partition of the internal topic this broker leads; ``epoch`` is its leader epoch
    (the transaction coordinator's epoch)."""

    index: int
    epoch: int
    status: Loading = Loading.LOADING


P = TypeVar("P", bound=CoordinatorPartition)
S = TypeVar("S")

# A periodic job: called with the wall-clock time in ms; may be a coroutine function.
Job = Callable[[int], Awaitable[None] | None]


class CoordinatorShell(Generic[P, S]):
    """Subclasses set ``topic`` and implement :meth:`_new_partition`, :meth:`_scan` (read a
    partition's log into its state ``S``) and :meth:`_install` (put the state into the
    partition); they may override :meth:`_on_unloaded` and :meth:`_periodic_jobs`."""

    topic: str = ""
    # Kafka's TransactionStateManager reloads a partition when its leader epoch changes (the
    # coordinator epoch moves on); GroupMetadataManager keeps what it loaded.
    reload_on_new_epoch: bool = False

    def __init__(self, *, broker_id: int, metadata: MetadataView, default_partitions: int,
                 clock: Clock, create_topic: Callable[[], Awaitable[None]] | None) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.clock = clock
        self._default_partitions = default_partitions
        self._create_topic = create_topic
        self.partitions: dict[int, P] = {}
        self._tasks: set[asyncio.Task] = set()
        self._loop_task: asyncio.Task | None = None
        self._creating: asyncio.Task | None = None

    # -- the subclass's part -----------------------------------------------------------------

    def _new_partition(self, index: int, epoch: int) -> P:
        raise NotImplementedError

    async def _scan(self, tp: TopicPartition) -> S:
        raise NotImplementedError

    def _install(self, part: P, state: S, elapsed_ms: float) -> None:
        raise NotImplementedError

    def _on_unloaded(self, part: P) -> None:
        """``part`` is no longer ours (resigned, or the coordinator stops)."""

    def _periodic_jobs(self) -> tuple[float, Job, list[tuple[float, Job]]]:
        """(tick interval in s, the job run every tick, [(interval in s, job)] run when
        their interval has passed)."""
        raise NotImplementedError

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._loop_task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        await cancel_and_wait(self._loop_task, *self._tasks, self._creating)
        for index in list(self.partitions):
            self._unload(index)

    def abandon(self) -> list[asyncio.Task]:
        """The process dies (a simulated crash): cancel every task at once, without waiting
        and without unloading anything; returns the tasks (the caller keeps them referenced
        until they finish)."""
        tasks = [t for t in (self._loop_task, self._creating, *self._tasks)
                 if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        return tasks

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """A background task of this coordinator, cancelled by :meth:`stop`."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _next_deadline_ms(self, now_ms: int) -> int | None:
        """The earliest time after ``now_ms`` at which the tick job has something to do
        (None: nothing scheduled; the tick runs at its interval)."""
        return None

    def _tick_delay_s(self, tick_s: float) -> float:
        """How long the loop sleeps before the next tick: the tick interval, or less when a
        deadline falls sooner, so that an operation expires at its deadline and not up to
        an interval later (as Kafka's purgatories expire a delayed operation from their
        timing wheel at its deadline)."""
        now = self.clock.now_ms()
        deadline = self._next_deadline_ms(now)
        if deadline is None:
            return tick_s
        return min(tick_s, max(0.0, (deadline - now) / 1000))

    async def _run(self) -> None:
        tick_s, tick, periodic = self._periodic_jobs()
        last = [self.clock.monotonic()] * len(periodic)
        while True:
            await asyncio.sleep(self._tick_delay_s(tick_s))
            await self._run_job(tick)
            for i, (interval_s, job) in enumerate(periodic):
                if self.clock.monotonic() - last[i] >= interval_s:
                    last[i] = self.clock.monotonic()
                    await self._run_job(job)

    async def _run_job(self, job: Job) -> None:
        try:
            result = job(self.clock.now_ms())
            if result is not None:
                await result
        except Exception:
            log.exception("%s coordinator: periodic job %s failed", self.topic,
                          getattr(job, "__name__", job))

    # -- placement and leadership ------------------------------------------------------------

    def num_partitions(self) -> int:
        parts = self.metadata.topics.get(self.topic)
        return len(parts) if parts else self._default_partitions

    def on_leadership(self, tp: TopicPartition, is_leader: bool, leader_epoch: int) -> None:
        """Replica manager hook (Kafka's onElection / onResignation): load a partition we now
        lead, drop one we no longer lead."""
        if tp.topic != self.topic:
            return
        current = self.partitions.get(tp.partition)
        if is_leader:
            if current is not None:
                if not self.reload_on_new_epoch:
                    current.epoch = leader_epoch
                    return
                if current.epoch == leader_epoch:
                    return
            # (A reload replaces the partition: work in flight under the old epoch sees it
            # is no longer the owner, and the load resumes what it finds.)
            part = self._new_partition(tp.partition, leader_epoch)
            self.partitions[tp.partition] = part
            self._spawn(self._load(part))
        elif current is not None:
            self._unload(tp.partition)

    def owns(self, part: P) -> bool:
        """Whether ``part`` is still the loaded-or-loading partition at its index."""
        return self.partitions.get(part.index) is part

    def _unload(self, index: int) -> None:
        part = self.partitions.pop(index, None)
        if part is not None:
            self._on_unloaded(part)

    async def _load(self, part: P) -> None:
        tp = TopicPartition(self.topic, part.index)
        started = self.clock.monotonic()
        await asyncio.sleep(0)  # let the LeaderAndIsr that made us leader finish first
        try:
            state = await self._scan(tp)
        except Exception:
            log.exception("loading %s failed", tp)
            if self.owns(part):
                del self.partitions[part.index]
            return
        if not self.owns(part):
            return  # leadership moved on while we read
        part.status = Loading.LOADED
        self._install(part, state, (self.clock.monotonic() - started) * 1000)

    def loaded_partition(self, index: int, what: str) -> P:
        """Our partition ``index`` once loaded; NOT_COORDINATOR when we do not lead it,
        COORDINATOR_LOAD_IN_PROGRESS while it loads (``what`` names the key in messages)."""
        part = self.partitions.get(index)
        if part is None:
            raise KafkaError(ErrorCode.not_coordinator,
                             f"broker {self.broker_id} is not the coordinator of {what}")
        if part.status == Loading.LOADING:
            raise KafkaError(ErrorCode.coordinator_load_in_progress,
                             f"{self.topic}-{part.index} is loading")
        return part

    def loaded_partitions(self) -> list[P]:
        return [p for p in self.partitions.values() if p.status == Loading.LOADED]

    def loading(self) -> bool:
        return any(p.status == Loading.LOADING for p in self.partitions.values())

    # -- FindCoordinator ---------------------------------------------------------------------

    async def coordinator_for(self, key_partition: Callable[[int], int]) -> tuple[ErrorCode, int]:
        """(error, node id) of the leader of the key's partition (``key_partition`` maps the
        topic's partition count to the key's partition); the first lookup creates the
        internal topic (Kafka's AutoTopicCreationManager) and answers
        COORDINATOR_NOT_AVAILABLE, as does a partition without a live leader."""
        parts = self.metadata.topics.get(self.topic)
        if not parts:
            await self._ensure_topic()
            return ErrorCode.coordinator_not_available, -1
        meta = parts.get(key_partition(len(parts)))
        if meta is None or meta.leader < 0 or meta.leader not in self.metadata.brokers:
            return ErrorCode.coordinator_not_available, -1
        return ErrorCode.none, meta.leader

    async def _ensure_topic(self) -> None:
        if self._create_topic is None:
            log.warning("%s does not exist and this coordinator cannot create it", self.topic)
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.ensure_future(self._create_topic_logged())
        await asyncio.shield(self._creating)

    async def _create_topic_logged(self) -> None:
        assert self._create_topic is not None
        try:
            await self._create_topic()
        except Exception:  # e.g. ZooKeeper unreachable: the client simply retries
            log.exception("cannot create %s", self.topic)

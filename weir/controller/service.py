"""The controller's asyncio shell: election, ZooKeeper watches, effect execution.

One ``asyncio.Queue`` and one consumer task.  ZooKeeper watch callbacks run on kazoo's
threads and only put a marker on the queue (``loop.call_soon_threadsafe``); the consumer
reads ZooKeeper off the loop (``asyncio.to_thread``), feeds events to the sans-I/O
:class:`~weir.controller.core.ControllerCore`, executes its ZooKeeper operations (feeding
the results back through :mod:`weir.controller.executor`) and hands its requests to the
:class:`ControllerChannelManager`.  Its collaborators (the ZooKeeper store, the clock, the
channels' transport, the blocking-call runner) come through the constructor, so the seeded
simulation runs this very class on a virtual-time loop (:mod:`weir.sim`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from weir.asyncutil import cancel_and_wait
from weir.common import TopicPartition
from weir.controller import executor
from weir.controller.channel import ControllerChannelManager
from weir.controller.context import ReplicaAssignment
from weir.controller.core import ControllerCore
from weir.controller.effects import (
    Effect,
    FlushRequests,
    Log,
    Reply,
    SendRequests,
    UnwatchTopics,
    WatchTopics,
    ZkOperation,
    ZkUpdatePartitionStates,
)
from weir.controller.events import (
    AlterReassignments,
    AutoLeaderRebalance,
    BrokerChange,
    ControlledShutdown,
    ControllerEvent,
    ControllerResigned,
    ElectionType,
    ElectLeaders,
    ListReassignments,
    PartitionModifications,
    PreferredReplicaElection,
    Startup,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
    UncleanLeaderElectionEnable,
    ZkReassignmentChange,
)
from weir.controller.executor import RunBlocking
from weir.controller.log_dir_events import LogDirEventNotification
from weir.controller.rpc import alter_partition_event, alter_partition_response
from weir.controller.settings import ControllerSettings
from weir.controller.stats import SLOW_EVENT_MS, ControllerStats, EventTiming
from weir.controller.store import ControllerZk
from weir.coordination import codecs, paths
from weir.coordination.errors import ControllerMovedError, ZnodeDataError
from weir.protocol.errors import ErrorCode, KafkaError

__all__ = ["ControllerService", "StateChange"]


log = logging.getLogger(__name__)

STATE_CHANGE_HISTORY = 200
"""Entries of the controller's state-change log kept in memory (for the metrics endpoint)."""
FLUSH_WAIT_S = 0.5
"""The longest an event pauses for its requests to be written (:class:`FlushRequests`)."""


@dataclass(frozen=True, slots=True)
class StateChange:
    """One line of the controller's state-change log (Kafka's ``state.change.logger``),
    kept in a bounded ring: when, while handling which event, at what level."""

    time_ms: int
    event: str
    level: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"time_ms": self.time_ms, "event": self.event, "level": self.level,
                "message": self.message}


@dataclass(frozen=True, slots=True)
class _Elect:
    """``/controller`` changed or the session came back: (re)check the election."""


@dataclass(frozen=True, slots=True)
class _SessionLost:
    """The ZooKeeper session expired: stop acting as controller."""


@dataclass(frozen=True, slots=True)
class _BrokersChanged:
    generation: int


@dataclass(frozen=True, slots=True)
class _Watched:
    """A controller-only watch fired; ``event`` is dropped if the generation is stale."""

    generation: int
    event: ControllerEvent


@dataclass(frozen=True, slots=True)
class _Reread:
    """A controller-only watch fired: ``read`` (run on a worker thread when the marker is
    processed, so that it sees ZooKeeper as it is then) makes the event, or None."""

    generation: int
    read: Callable[[], ControllerEvent | None]


@dataclass(frozen=True, slots=True)
class _Call:
    """An RPC for the active controller; ``event.reply_to`` is the future to answer."""

    event: Any


def _nonempty(value: Any, make: Callable[[Any], ControllerEvent]) -> ControllerEvent | None:
    """``make(value)``, or None when the znode read back empty (or gone)."""
    return make(frozenset(value) if isinstance(value, set) else value) if value else None


def _sequence(child: str) -> int:
    """The sequence number of a ``config_change_<n>`` znode (-1 if it has none)."""
    digits = child.rpartition("_")[2]
    return int(digits) if digits.isdigit() else -1


def _wall_ms() -> int:
    return int(time.time() * 1000)


class ControllerService:
    """Runs the controller election and, while elected, the controller."""

    def __init__(self, broker_id: int, zk: ControllerZk, config: Any = None, *,
                 now_ms: Callable[[], int] = _wall_ms,
                 settings: ControllerSettings | None = None,
                 channel_factory: Callable[..., ControllerChannelManager] | None = None,
                 run_blocking: RunBlocking = asyncio.to_thread) -> None:
        """``zk`` is the ZooKeeper store, ``now_ms`` the clock, ``channel_factory`` makes
        the channels to the brokers (``ControllerChannelManager(on_event,
        request_timeout_ms=...)``: its ``connect`` is the transport) and ``run_blocking``
        runs blocking ZooKeeper calls off the loop (worker threads; inline under the
        simulation's virtual-time loop)."""
        self.broker_id = broker_id
        self._zk = zk
        self._now_ms = now_ms
        self._run_blocking = run_blocking
        self.settings = settings or (
            ControllerSettings.from_config(config) if config is not None
            else ControllerSettings(broker_id=broker_id))
        self._timeout_ms = self.settings.controller_socket_timeout_ms
        self._channel_factory = channel_factory or ControllerChannelManager
        self.core = ControllerCore(self.settings)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._consumer: asyncio.Task | None = None
        self._controller_watch: Any = None
        self._watches: list[Any] = []
        self._topic_watches: dict[str, Any] = {}
        self._broker_watches: dict[int, Any] = {}
        self._generation = 0
        self._channels: ControllerChannelManager | None = None
        self._rebalance_task: asyncio.Task | None = None
        self._stopped = False
        self._config_change_seen = -1
        """The newest ``/config/changes`` notification already taken into account."""
        self.state_changes: deque[StateChange] = deque(maxlen=STATE_CHANGE_HISTORY)
        """The newest lines of the state-change log (oldest first)."""
        self.current_event: str | None = None
        """The event being handled now (Kafka's ControllerEventManager state), or None."""
        self.events_processed = 0
        self.events_by_type: Counter[str] = Counter()
        """Events handled, per event type (as Kafka's per-ControllerState rate metrics)."""
        self.stats = ControllerStats()
        """Kafka's EventQueueTimeMs, EventQueueProcessingTimeMs and per-ControllerState
        ``RateAndTimeMs`` timers (weir.controller.stats), for the broker's ``/metrics``."""
        self._timing: EventTiming | None = None
        """The breakdown of the item being handled (None between items)."""
        self._ahead: dict[int, tuple[Any, asyncio.Future]] = {}
        """State writes started ahead of the core's asking (``pipelined``), by the id of
        their states (kept, so the id stays theirs)."""

    @property
    def event_queue_size(self) -> int:
        """Events waiting for the consumer (Kafka's ``EventQueueSize`` gauge)."""
        return self._queue.qsize()

    @property
    def is_active(self) -> bool:
        """Whether this broker is the active controller."""
        return self.core.active

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the consumer and take part in the election."""
        self._loop = asyncio.get_running_loop()
        self._consumer = asyncio.create_task(self._run(), name="controller-events")
        self._zk.add_session_listener(self._on_session_state)
        self._controller_watch = self._zk.watch_data(
            paths.CONTROLLER, lambda _data, _stat: self._enqueue(_Elect()))

    async def stop(self) -> None:
        """Resign (deleting ``/controller`` if held) and stop the consumer."""
        self._stopped = True
        if self._controller_watch is not None:
            self._controller_watch.cancel()
        if self._consumer is not None:
            await cancel_and_wait(self._consumer)
        was_active = self.core.active
        await self._resign()
        if was_active:
            with contextlib.suppress(Exception):
                await self._run_blocking(self._zk.resign_controller, self.broker_id)

    def set_unclean_leader_election_enable(self, enabled: bool) -> None:
        """The broker default of ``unclean.leader.election.enable`` changed (a dynamic broker
        config of this broker): queued for the core, active or not."""
        self.settings = replace(self.settings, unclean_leader_election_enable=enabled)
        if self._loop is not None and not self._stopped:
            self._queue.put_nowait((time.perf_counter(), UncleanLeaderElectionEnable(enabled)))

    async def on_controlled_shutdown(self, broker_id: int, broker_epoch: int
                                     ) -> list[TopicPartition]:
        """ControlledShutdown from a broker: the replicated partitions it still leads.

        Raises :class:`KafkaError` (NOT_CONTROLLER, STALE_BROKER_EPOCH, ...).
        """
        result = await self._call(lambda f: ControlledShutdown(broker_id, broker_epoch, f))
        if isinstance(result, ErrorCode):
            raise KafkaError(result, f"controlled shutdown of broker {broker_id}: {result.name}")
        return list(result)

    async def on_alter_partition(self, request: Any) -> Any:
        """AlterPartition (v2/v3) from a partition leader: the response, same version."""
        result = await self._call(lambda f: alter_partition_event(request, f))
        return alter_partition_response(int(request.__version__), result)

    async def elect_leaders(self, election_type: int,
                            partitions: frozenset[TopicPartition] | None
                            ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """ElectLeaders: per-partition (error code, message); None elects every partition."""
        return await self._call(
            lambda f: ElectLeaders(ElectionType(election_type), partitions, f))

    async def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None]
                                  ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: per-partition (error code, message); None cancels."""
        frozen = {tp: None if r is None else tuple(r) for tp, r in targets.items()}
        return await self._call(lambda f: AlterReassignments(frozen, f))

    async def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                 ) -> dict[TopicPartition, ReplicaAssignment]:
        """ListPartitionReassignments: the moves in progress (of ``partitions`` or all)."""
        wanted = None if partitions is None else frozenset(partitions)
        return await self._call(lambda f: ListReassignments(wanted, f))

    async def _call(self, make_event: Callable[[asyncio.Future], ControllerEvent]) -> Any:
        """Queue an RPC event for the controller and wait for the core's reply."""
        if not self.is_active:
            raise KafkaError(ErrorCode.not_controller, "this broker is not the controller")
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((time.perf_counter(), _Call(make_event(future))))
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the answer to a
        # caller cancelled in the iteration the answer arrives, and the cancellation is lost.
        async with asyncio.timeout(self._timeout_ms / 1000):
            return await future

    # -- enqueueing (any thread) -------------------------------------------------------------

    def _enqueue(self, item: Any) -> None:
        loop = self._loop
        if loop is None or self._stopped or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop is shutting down
            loop.call_soon_threadsafe(self._queue.put_nowait, (time.perf_counter(), item))

    def _on_session_state(self, state: str) -> None:
        if state == "LOST":
            self._enqueue(_SessionLost())
        elif state == "CONNECTED":
            self._enqueue(_Elect())

    # -- the consumer ------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            queued_at, item = await self._queue.get()
            started = time.perf_counter()
            self._timing = EventTiming("", queue_ms=(started - queued_at) * 1000,
                                       started=started)
            try:
                await self._dispatch(item)
            except ControllerMovedError:
                log.info("controller %d: controller moved; resigning", self.broker_id)
                await self._resign()
            except Exception:
                log.exception("controller %d: failed to handle %r", self.broker_id, item)
            finally:
                self._finish_timing(started)

    def _finish_timing(self, started: float) -> None:
        """Record the item's timers (if it reached the core) and log a slow one's breakdown
        (Kafka's ControllerEventManager timers; the line is Weir's)."""
        timing, self._timing = self._timing, None
        if timing is None or not timing.event:
            return
        timing.processing_ms = (time.perf_counter() - started) * 1000
        self.stats.record(timing)
        if timing.queue_ms + timing.processing_ms >= SLOW_EVENT_MS:
            log.info("controller %d: %s", self.broker_id, timing.summary())

    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        """A blocking ZooKeeper read off the loop, counted in the event's ZooKeeper time."""
        t0 = time.perf_counter()
        try:
            return await self._run_blocking(fn, *args)
        finally:
            if self._timing is not None:
                self._timing.zk_ms += (time.perf_counter() - t0) * 1000
                self._timing.zk_ops += 1

    async def _dispatch(self, item: Any) -> None:
        match item:
            case _Elect():
                await self._elect()
            case _SessionLost():
                await self._resign()
            case _BrokersChanged(generation=g) if g == self._generation and self.is_active:
                live = await self._read(self._zk.get_all_brokers)
                await self._process(BrokerChange(live))
                self._watch_brokers()
            case _Watched(generation=g, event=event) if g == self._generation:
                await self._process(event)
            case _Reread(generation=g, read=read) if g == self._generation and self.is_active:
                event = await self._read(read)
                if event is not None and g == self._generation:
                    await self._process(event)
            case _Call(event=event):
                await self._process_call(event)
            case UncleanLeaderElectionEnable():
                await self._process(item)

    async def _process_call(self, event: Any) -> None:
        future: asyncio.Future = event.reply_to
        if future.done():
            return  # the caller timed out
        if self.is_active:
            try:
                await self._process(event)
            finally:
                if not future.done():
                    future.set_exception(KafkaError(
                        ErrorCode.not_controller, "the controller moved while handling it"))
        elif not future.done():
            future.set_exception(KafkaError(ErrorCode.not_controller,
                                            "this broker is not the controller"))

    async def _elect(self) -> None:
        holder = await self._run_blocking(self._zk.get_controller_id)
        if self.is_active:
            if holder == self.broker_id:
                return
            await self._resign()
        if holder is not None and holder != self.broker_id:
            return
        won = await self._run_blocking(self._zk.try_become_controller, self.broker_id)
        if won is None:
            return
        epoch, epoch_zk_version = won
        log.info("broker %d won the controller election (epoch %d)", self.broker_id, epoch)
        self._register_watches()
        startup = await self._read(self._read_snapshot, epoch, epoch_zk_version)
        await self._process(startup)
        self._watch_brokers()

    def _watch_brokers(self) -> None:
        """A watch on each live broker's registration (Kafka's BrokerModificationsHandler):
        a broker rewriting it (new advertised endpoints) is a broker change to process."""
        if not self.is_active:
            return
        live = set(self.core.ctx.live_brokers)
        for broker in set(self._broker_watches) - live:
            self._broker_watches.pop(broker).cancel()
        generation = self._generation
        for broker in sorted(live - set(self._broker_watches)):
            self._broker_watches[broker] = self._zk.watch_broker(
                broker, lambda: self._enqueue(_BrokersChanged(generation)))

    def _register_watches(self) -> None:
        self._generation += 1
        generation = self._generation
        self._channels = self._channel_factory(
            self._enqueue_response, request_timeout_ms=self._timeout_ms)
        zk = self._zk
        # As Kafka's controller, the watches only say that something changed; the data is
        # read when the event is processed (after the failover snapshot, which is read
        # after these watches are registered): children or data carried from the moment a
        # watch fired can be older than the snapshot.
        reread = self._reread
        self._config_change_seen = max(
            (_sequence(c) for c in zk.get_children(paths.CONFIG_CHANGES)), default=-1)
        self._watches = [
            zk.watch_children(paths.BROKER_IDS,
                              lambda _c: self._enqueue(_BrokersChanged(generation))),
            zk.watch_children(paths.BROKER_TOPICS, reread(
                lambda: TopicChange(frozenset(zk.get_topic_names())))),
            zk.watch_children(paths.DELETE_TOPICS, reread(
                lambda: TopicDeletion(frozenset(zk.get_topics_to_delete())))),
            zk.watch_data(paths.PREFERRED_REPLICA_ELECTION, self._if_data(reread(
                lambda: _nonempty(zk.get_preferred_election(), PreferredReplicaElection)))),
            zk.watch_data(paths.REASSIGN_PARTITIONS, self._if_data(reread(
                lambda: _nonempty({tp: tuple(r) for tp, r in zk.get_reassignments().items()},
                                  ZkReassignmentChange)))),
            zk.watch_children(paths.CONFIG_CHANGES, reread(self._read_config_changes)),
            zk.watch_children(paths.LOG_DIR_EVENT_NOTIFICATION, reread(  # JBOD (KIP-112)
                lambda: _nonempty(zk.get_log_dir_events(), LogDirEventNotification))),
        ]
        if self.settings.auto_leader_rebalance_enable:
            self._rebalance_task = asyncio.get_running_loop().create_task(
                self._rebalance_ticks(generation), name="controller-rebalance")

    def _reread(self, read: Callable[[], ControllerEvent | None]) -> Callable[..., None]:
        """A watch callback that enqueues ``read`` for the consumer (current generation)."""
        generation = self._generation

        def callback(*_args: Any) -> None:
            self._enqueue(_Reread(generation, read))
        return callback

    def _read_config_changes(self) -> TopicConfigChange | None:
        """The current overrides of the topics named by new ``/config/changes``
        notifications (worker thread; Kafka's TopicConfigHandler telling the controller)."""
        zk = self._zk
        children = sorted(zk.get_children(paths.CONFIG_CHANGES), key=_sequence)
        new = [c for c in children if _sequence(c) > self._config_change_seen]
        if not new:
            return None
        self._config_change_seen = _sequence(new[-1])
        topics = set()
        for child in new:
            path = f"{paths.CONFIG_CHANGES}/{child}"
            found = zk.get_data(path)
            if not found:
                continue  # purged meanwhile
            try:
                entity = codecs.decode_config_change(found[0], path=path)
            except ZnodeDataError as exc:
                log.warning("controller %d: ignoring config change %s: %s", self.broker_id,
                            path, exc)
                continue
            kind, _, name = entity.partition("/")
            if kind == "topics" and name:
                topics.add(name)
        if not topics:
            return None
        return TopicConfigChange(zk.get_topic_configs(sorted(topics)))

    @staticmethod
    def _if_data(callback: Callable[..., None]) -> Callable[[Any, Any], None]:
        """A data watch callback that ignores a missing or empty znode."""
        def on_data(data: Any, _stat: Any) -> None:
            if data:
                callback()
        return on_data

    async def _rebalance_ticks(self, generation: int) -> None:
        interval = max(self.settings.leader_imbalance_check_interval_seconds, 0.01)
        while generation == self._generation and not self._stopped:
            await asyncio.sleep(interval)
            self._queue.put_nowait((time.perf_counter(),
                                    _Watched(generation, AutoLeaderRebalance())))

    def _enqueue_response(self, event: ControllerEvent) -> None:
        self._queue.put_nowait((time.perf_counter(), _Watched(self._generation, event)))

    def _read_snapshot(self, epoch: int, epoch_zk_version: int) -> Startup:
        zk = self._zk
        live = zk.get_all_brokers()
        names = zk.get_topic_names()
        topics = zk.get_topics(names)
        tps = [TopicPartition(t, p) for t, a in topics.items() for p in a.partitions]
        return Startup(
            controller_epoch=epoch,
            epoch_zk_version=epoch_zk_version,
            brokers=live,
            topics=topics,
            partition_states=zk.get_partition_states(tps),
            topics_to_delete=frozenset(zk.get_topics_to_delete()),
            topic_configs=zk.get_topic_configs(topics),
            zk_reassignments={tp: tuple(r) for tp, r in zk.get_reassignments().items()},
        )

    async def _resign(self) -> None:
        self._generation += 1
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        for watch in [*self._watches, *self._topic_watches.values(),
                      *self._broker_watches.values()]:
            watch.cancel()
        self._watches, self._topic_watches, self._broker_watches = [], {}, {}
        if self.core.awaiting_result:
            effects = self.core.abort()
        else:
            effects = self.core.handle(ControllerResigned(), self._now_ms())
        for effect in effects:
            if isinstance(effect, Log):
                self._log(effect, "ControllerResigned")
        channels, self._channels = self._channels, None
        if channels is not None:
            await channels.close()

    # -- effects -----------------------------------------------------------------------------

    async def _process(self, event: ControllerEvent) -> None:
        """Feed one event to the core and carry out its effects to the end."""
        self.current_event = type(event).__name__
        if self._timing is not None and not self._timing.event:
            self._timing.event = self.current_event
        try:
            t0 = time.perf_counter()
            effects = self.core.handle(event, self._now_ms())
            self._add_core_time(t0)
            await self._process_effects(effects)
        finally:
            self._drop_writes_ahead()
            self.events_by_type[self.current_event] += 1
            self.current_event = None
            self.events_processed += 1

    async def _process_effects(self, effects: list[Effect]) -> None:
        while True:
            op = None
            for effect in effects:
                if isinstance(effect, ZkOperation):
                    op = effect
                else:
                    await self._apply(effect)
            if op is None:
                return
            if isinstance(op, FlushRequests):
                await self._flush_requests()
                t0 = time.perf_counter()
                effects = self.core.complete(None, self._now_ms())
                self._add_core_time(t0)
                continue
            try:
                result = await self._run_zk(op)
            except ControllerMovedError:
                raise
            except Exception:
                log.exception("controller %d: ZooKeeper operation %s failed; re-electing",
                              self.broker_id, type(op).__name__)
                await self._resign()
                self._enqueue(_Elect())
                return
            t0 = time.perf_counter()
            effects = self.core.complete(result, self._now_ms())
            self._add_core_time(t0)

    def _drop_writes_ahead(self) -> None:
        """At an event's end: writes started ahead that the core did not ask for (it must
        ask for each; they still land in ZooKeeper, and a later conditional write of
        those partitions fails and re-reads them)."""
        if self._ahead:
            log.warning("controller %d: %d pipelined state writes were not awaited by %s",
                        self.broker_id, len(self._ahead), self.current_event)
            self._ahead.clear()

    async def _flush_requests(self) -> None:
        """Let the channels write what was sent so far (:class:`FlushRequests`), for at most
        ``FLUSH_WAIT_S`` (a broker being reconnected to must not hold the event)."""
        if self._channels is None:
            return
        t0 = time.perf_counter()
        await self._channels.written(FLUSH_WAIT_S)
        if self._timing is not None:
            self._timing.send_ms += (time.perf_counter() - t0) * 1000

    def _add_core_time(self, t0: float) -> None:
        if self._timing is not None:
            self._timing.core_ms += (time.perf_counter() - t0) * 1000

    def _log(self, entry: Log, event: str | None) -> None:
        """Write a state-change log line and keep it in the ring."""
        log.log(entry.level, "controller %d: %s", self.broker_id, entry.message)
        self.state_changes.append(StateChange(
            self._now_ms(), event or "", logging.getLevelName(entry.level), entry.message))

    async def _apply(self, effect: Effect) -> None:
        if isinstance(effect, Log):
            self._log(effect, self.current_event)
        elif isinstance(effect, Reply):
            future = effect.reply_to
            if isinstance(future, asyncio.Future) and not future.done():
                future.set_result(effect.value)
        elif isinstance(effect, SendRequests):
            if self._channels is not None:
                t0 = time.perf_counter()
                await self._channels.update_brokers(self.core.ctx.live_brokers)
                self._channels.send(effect.requests)
                if self._timing is not None:
                    self._timing.send_ms += (time.perf_counter() - t0) * 1000
                    self._timing.sends.append(
                        (self._timing.elapsed_ms(t0), len(effect.requests)))
        elif isinstance(effect, WatchTopics):
            for topic in effect.topics - set(self._topic_watches):
                self._topic_watches[topic] = self._zk.watch_data(
                    paths.topic(topic), self._topic_callback(topic))
        elif isinstance(effect, UnwatchTopics):
            for topic in effect.topics:
                watch = self._topic_watches.pop(topic, None)
                if watch is not None:
                    watch.cancel()

    def _topic_callback(self, topic: str) -> Callable[[Any, Any], None]:
        generation = self._generation
        first = True

        def callback(data: Any, _stat: Any) -> None:
            nonlocal first
            if first or data is None:  # the immediate call, or the topic's znode is gone
                first = False
                return
            self._enqueue(_Watched(generation, PartitionModifications(topic)))
        return callback

    async def _run_zk(self, op: ZkOperation) -> Any:
        """Run one ZooKeeper operation off the loop (:func:`weir.controller.executor.run`).

        The writes a state update names as ``pipelined`` start now with it, from one worker
        thread (:func:`weir.controller.executor.start_writes`); the core yields them next and
        gets the results they got."""
        t0 = time.perf_counter()
        try:
            if not isinstance(op, ZkUpdatePartitionStates):
                return await executor.run(self._zk, op, self._run_blocking)
            started = self._ahead.pop(id(op.states), None)
            if started is not None and started[0] is op.states:
                return await started[1]
            later = [states for states in op.pipelined if id(states) not in self._ahead]
            futures = executor.start_writes(self._zk, [op.states, *later],
                                            op.epoch_zk_version, self._run_blocking)
            for states, future in zip(later, futures[1:], strict=True):
                self._ahead[id(states)] = (states, future)
            return await futures[0]
        finally:
            if self._timing is not None:
                self._timing.zk_ms += (time.perf_counter() - t0) * 1000
                self._timing.zk_ops += 1
                self._timing.zk_znodes += executor.znodes(op)

"""Controller-to-broker channels (Kafka's ControllerChannelManager), the asyncio side.

One queue and one sender task per live broker keep each broker's requests in order.  A
sender connects with :class:`~weir.protocol.client.BrokerConnection`, retries a request
with backoff while its broker is registered, and turns answers into controller events
(:class:`StopReplicaResult`, :class:`LeaderAndIsrResult`) for the controller queue.
Removing a broker drops its queued requests.  Unlike Kafka's ``RequestSendThread`` (one
request on the wire at a time), a sender writes what is queued (up to ``PIPELINE_DEPTH``)
before reading the first answer; the broker still applies them one at a time, in order
(see :meth:`_BrokerSender._send_group`).

The UpdateMetadata requests of one batch usually differ only in the recipient's broker
epoch (the batch builds their topic and broker states once): over connections that take an
encoded body (``pre_encode``), the senders encode that body once and patch the epoch in for
each broker, instead of encoding ~10,000 partition states per broker.  The encoding stays
on the event loop, in send order: on worker threads the encodes of one batch ran at once,
sharing the interpreter lock, so every request of the batch went out late (a 10,000-partition
A/B in 901f837:bench/results/control_plane-summary.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from weir.asyncutil import cancel_and_wait
from weir.common import TopicPartition
from weir.controller.events import ControllerEvent, LeaderAndIsrResult, StopReplicaResult
from weir.controller.requests import OutboundRequest
from weir.coordination.codecs import BrokerInfo
from weir.protocol.client import BrokerConnection
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import (
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)
from weir.protocol.interbroker.state_encoding import encode_request

__all__ = ["ControllerChannelManager", "SharedBodies", "response_event"]

log = logging.getLogger(__name__)

ConnectionFactory = Callable[[str, int], Any]

_UPDATE_METADATA_HEAD = struct.Struct(">i?iq")
"""UpdateMetadata v8's leading fields: ControllerId, IsKRaftController, ControllerEpoch,
BrokerEpoch (fixed widths, so the broker epoch sits at a fixed offset; Type is a tagged
field, written at the end)."""
_BROKER_EPOCH = struct.Struct(">q")
PIPELINE_DEPTH = 8
"""Requests a sender writes to its broker's connection before reading the first answer (the
broker reads at most 16 ahead of its answers on one connection: weir.server.network)."""
SLOW_REQUEST_MS = 100.0
"""A request this long from queued to answered is logged with its breakdown..."""
LARGE_REQUEST_PARTITIONS = 1000
"""... and so is one naming this many partitions."""
_BROKER_EPOCH_AT = _UPDATE_METADATA_HEAD.size - _BROKER_EPOCH.size
_SHARED_FIELDS = tuple(f.name for f in dataclasses.fields(UpdateMetadataRequest)
                       if f.name not in ("broker_epoch", "topic_states", "live_brokers"))


class SharedBodies:
    """The request bodies of one batch, with its UpdateMetadata encoded once per content.

    Bodies are written by :func:`~weir.protocol.interbroker.state_encoding.encode_request`
    (kio's bytes; the partition states by hand), which keeps each partition state's bytes
    for the batch: the state object that every replica's LeaderAndIsr shares is encoded
    once.

    Requests that share their ``topic_states`` and ``live_brokers`` objects and every other
    field but ``broker_epoch`` get one encoding, with each recipient's broker epoch written
    over the first one's; other requests are encoded as they are.  Thread-safe: the
    ``run_blocking`` may run it on worker threads.  One per
    :meth:`ControllerChannelManager.send`.
    """

    def __init__(self) -> None:
        self._templates: dict[tuple[Any, ...], tuple[Any, Any, bytes]] = {}
        self._lock = threading.Lock()
        self._states: dict[int, tuple[Any, bytes]] = {}  # a partition state's bytes

    def body(self, request: Any) -> bytes:
        if type(request) is not UpdateMetadataRequest or request.__version__ != 8:
            return encode_request(request, self._states)
        key = (id(request.topic_states), id(request.live_brokers),
               *(getattr(request, name) for name in _SHARED_FIELDS))
        with self._lock:  # the first sender encodes, the others wait and patch
            found = self._templates.get(key)
            if found is None or found[0] is not request.topic_states \
                    or found[1] is not request.live_brokers:
                body = encode_request(request, self._states)
                head = _UPDATE_METADATA_HEAD.pack(
                    request.controller_id, request.is_kraft_controller,
                    request.controller_epoch, request.broker_epoch)
                if body.startswith(head):  # the layout this relies on
                    self._templates[key] = (request.topic_states, request.live_brokers, body)
                return body
        template = found[2]
        return (template[:_BROKER_EPOCH_AT] + _BROKER_EPOCH.pack(request.broker_epoch)
                + template[_UPDATE_METADATA_HEAD.size:])


async def _inline(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


async def _cancel(in_flight: list[tuple[int, asyncio.Future, float]]) -> None:
    """Cancel the answers still awaited (a failed or stopped group) and wait for them."""
    futures = [answer for _, answer, _ in in_flight]
    in_flight.clear()
    for answer in futures:
        answer.cancel()
    if futures:
        await asyncio.gather(*futures, return_exceptions=True)


def _error_code(value: int) -> ErrorCode:
    """``ErrorCode(value)`` through the enum's value map (an answer carries a code per
    partition: 100,000 enum calls are a measurable part of a large LeaderAndIsr's)."""
    code = _CODES.get(value)
    return ErrorCode(value) if code is None else code


_CODES: dict[int, ErrorCode] = {int(code): code for code in ErrorCode}


def response_event(broker_id: int, request: Any, response: Any) -> ControllerEvent | None:
    """The controller event for a broker's answer, or None if the core needn't see it."""
    if isinstance(request, StopReplicaRequest) and isinstance(response, StopReplicaResponse):
        code = _error_code(response.error_code)
        errors = {
            TopicPartition(t.topic_name, p.partition_index): code
            for t in request.topic_states for p in t.partition_states
        }
        if code == ErrorCode.none:
            for e in response.partition_errors:
                errors[TopicPartition(e.topic_name, e.partition_index)] = _error_code(e.error_code)
        return StopReplicaResult(broker_id, errors)
    if isinstance(request, LeaderAndIsrRequest) and isinstance(response, LeaderAndIsrResponse):
        code = _error_code(response.error_code)
        if code != ErrorCode.none:
            errors = {
                TopicPartition(t.topic_name, p.partition_index): code
                for t in request.topic_states for p in t.partition_states
            }
            return LeaderAndIsrResult(broker_id, errors)
        names = {t.topic_id: t.topic_name for t in request.topic_states}
        errors = {}
        for t in response.topics:
            name = names.get(t.topic_id)
            if name is None:
                name = str(t.topic_id)
            for p in t.partition_errors:
                errors[TopicPartition(name, p.partition_index)] = _error_code(p.error_code)
        return LeaderAndIsrResult(broker_id, errors)
    error = getattr(response, "error_code", ErrorCode.none)
    if error != ErrorCode.none:
        log.warning("broker %d answered %s with %s", broker_id, type(request).__name__,
                    ErrorCode(error).name)
    return None


class _BrokerSender:
    """The queue and sender task of one broker."""

    def __init__(self, info: BrokerInfo, manager: ControllerChannelManager) -> None:
        self.info = info
        self._manager = manager
        self.queue: asyncio.Queue[tuple[OutboundRequest, SharedBodies | None, float]] = (
            asyncio.Queue())
        self._conn: Any = None
        self.unwritten = 0
        """Requests queued and not yet handed to the connection (encoded and written)."""
        self.all_written = asyncio.Event()
        self.all_written.set()
        self.task = asyncio.create_task(self._run(), name=f"controller-channel-{info.id}")

    def put(self, entry: tuple[OutboundRequest, SharedBodies | None, float]) -> None:
        self.unwritten += 1
        self.all_written.clear()
        self.queue.put_nowait(entry)

    def _handed(self) -> None:
        self.unwritten -= 1
        if self.unwritten <= 0:
            self.unwritten = 0
            self.all_written.set()

    async def _run(self) -> None:
        try:
            while True:
                group = [await self.queue.get()]
                while len(group) < PIPELINE_DEPTH and not self.queue.empty():
                    group.append(self.queue.get_nowait())
                await self._send_group(group)
        finally:
            await self._disconnect()

    def _log_slow(self, request: Any, queued_at: float, started: float,
                  encode_ms: float) -> None:
        """One INFO line for a request that took ``SLOW_REQUEST_MS`` or more from being
        queued to its answer, or named ``LARGE_REQUEST_PARTITIONS`` or more: where the time
        went (the control-plane benchmark's timeline reads it)."""
        done = time.perf_counter()
        partitions = sum(len(t.partition_states) for t in getattr(request, "topic_states", ()))
        if (done - queued_at) * 1000 < SLOW_REQUEST_MS and partitions < LARGE_REQUEST_PARTITIONS:
            return
        log.info("controller channel to broker %d: %s (%d partitions) queued %.0f ms, "
                 "encoded %.0f ms, answered %.0f ms after it was sent", self.info.id,
                 type(request).__name__, partitions, (started - queued_at) * 1000,
                 encode_ms, (done - started) * 1000 - encode_ms)

    async def _send_group(self, group: list[tuple[OutboundRequest, SharedBodies | None, float]]
                          ) -> None:
        """Send the requests of ``group`` in order, retrying with backoff, and hand each
        answer on (:func:`response_event`) in order as it arrives.

        Over a connection that takes encoded bodies (:class:`BrokerConnection`) the whole
        group is written before the first answer is read: a broker handles the requests of
        one connection one at a time, in arrival order (``weir.server.network``), so each is
        still applied after the one before it has been — as with Kafka's
        ``RequestSendThread``, which waits for each answer before it sends the next — but
        an UpdateMetadata queued behind a LeaderAndIsr no longer waits for that answer to
        cross back to a busy controller first.  After a failure the requests from the first
        unanswered one on are sent again (a request the broker may have applied already is
        sent again then, as before).  Other connections (the simulation's) get one request
        at a time.
        """
        backoff = self._manager.backoff_ms / 1000
        handed: set[int] = set()  # written once (a retry writes again: not counted again)
        bodies: dict[int, bytes] = {}
        encode_ms: dict[int, float] = {}
        first = 0
        while first < len(group):
            in_flight: list[tuple[int, asyncio.Future, float]] = []
            try:
                if self._conn is None or not self._conn.connected:
                    await self._disconnect()
                    self._conn = self._manager.connect(self.info.host, self.info.port)
                    await self._conn.connect(timeout_s=self._manager.timeout_s)
                conn = self._conn
                encoded = getattr(conn, "takes_encoded_body", False)
                for i in range(first, len(group) if encoded else first + 1):
                    item, shared, _ = group[i]
                    started = time.perf_counter()
                    if shared is None or not encoded:
                        call = conn.request(item.request, timeout_s=self._manager.timeout_s)
                    else:
                        if i not in bodies:
                            # Encoding a 3,333-partition request holds the event loop for
                            # 25-250 ms: let what is ready run first (the controlled
                            # shutdown's answer, queued just before this batch, waited
                            # behind every sender's encodes).
                            await asyncio.sleep(0)
                            started = time.perf_counter()
                            bodies[i] = await self._manager.run_blocking(shared.body,
                                                                         item.request)
                            encode_ms[i] = (time.perf_counter() - started) * 1000
                        call = conn.request(item.request, timeout_s=self._manager.timeout_s,
                                            body=bodies[i])
                    # Tasks start in creation order and write their request at their
                    # first step: the requests leave in the group's order.
                    in_flight.append((i, asyncio.ensure_future(call), started))
                    if i not in handed:
                        handed.add(i)
                        self._handed()
                while in_flight:
                    i, answer, started = in_flight[0]
                    response = await answer
                    in_flight.pop(0)
                    first = i + 1
                    item, _, queued_at = group[i]
                    self._log_slow(item.request, queued_at, started, encode_ms.get(i, 0.0))
                    event = response_event(self.info.id, item.request, response)
                    if event is not None:
                        self._manager.on_event(event)
            except (OSError, ConnectionError, TimeoutError) as exc:
                log.info("controller channel to broker %d: %r; retrying", self.info.id, exc)
                await _cancel(in_flight)
                await self._disconnect()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._manager.max_backoff_ms / 1000)
            finally:
                await _cancel(in_flight)

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def stop(self) -> None:
        await cancel_and_wait(self.task)


class ControllerChannelManager:
    """Per-broker ordered request queues; see the module docstring."""

    def __init__(self, on_event: Callable[[ControllerEvent], None],
                 request_timeout_ms: int = 30000, backoff_ms: int = 100,
                 max_backoff_ms: int = 5000,
                 connect: ConnectionFactory = BrokerConnection,
                 pre_encode: bool = True,
                 run_blocking: Callable[..., Any] | None = None) -> None:
        """``pre_encode``: the senders encode the request bodies themselves, through
        ``run_blocking`` (default: inline, on the event loop), each batch's UpdateMetadata once
        (:class:`SharedBodies`), for connections that take an encoded body (a true
        ``takes_encoded_body``, as :class:`BrokerConnection`); other connections (the
        simulation's) encode their requests themselves."""
        self.on_event = on_event
        self.pre_encode = pre_encode
        self.run_blocking = run_blocking or _inline
        self.timeout_s = request_timeout_ms / 1000
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.connect = connect
        self._senders: dict[int, _BrokerSender] = {}
        self._stopping: set[asyncio.Task] = set()
        """Removed brokers' senders winding down (see :meth:`update_brokers`)."""

    @property
    def broker_ids(self) -> frozenset[int]:
        return frozenset(self._senders)

    async def update_brokers(self, brokers: Mapping[int, BrokerInfo]) -> None:
        """Match the channels to the live brokers (a re-registered broker gets a new one).

        A removed broker's sender is cancelled at once and awaited in the background (as
        Kafka's ControllerChannelManager.removeBroker stops its RequestSendThread): the
        controller's event goes on without giving the event loop away, so the data path
        cannot run between its batches (a sender reconnecting to a dead broker took
        seconds to wind down on a loaded broker).  :meth:`close` waits for them.
        """
        for broker_id in list(self._senders):
            info = brokers.get(broker_id)
            if info is None or info != self._senders[broker_id].info:
                sender = self._senders.pop(broker_id)
                sender.task.cancel()
                stopping = asyncio.get_running_loop().create_task(
                    sender.stop(), name=f"controller-channel-{broker_id}-stop")
                self._stopping.add(stopping)
                stopping.add_done_callback(self._stopping.discard)
        for broker_id, info in brokers.items():
            if broker_id not in self._senders:
                self._senders[broker_id] = _BrokerSender(info, self)

    def send(self, requests: Iterable[OutboundRequest]) -> None:
        """Queue requests on their brokers' channels; unknown brokers' requests are dropped."""
        shared = SharedBodies() if self.pre_encode else None
        queued_at = time.perf_counter()
        for item in requests:
            sender = self._senders.get(item.broker_id)
            if sender is None:
                log.debug("dropping %s for unknown broker %d", type(item.request).__name__,
                          item.broker_id)
                continue
            sender.put((item, shared, queued_at))

    async def written(self, timeout_s: float) -> bool:
        """Wait until every request queued so far has been encoded and handed to its
        broker's connection (not answered), for at most ``timeout_s``; whether it was."""
        pending = [s.all_written for s in self._senders.values() if not s.all_written.is_set()]
        if not pending:
            return True
        # One deadline for all, awaited in turn: no helper tasks that a crash of this
        # process (or a cancelled caller) would leave with an unretrieved result.
        try:
            async with asyncio.timeout(timeout_s):
                for event in pending:
                    await event.wait()
        except TimeoutError:
            return False
        await asyncio.sleep(0)  # the connections' write tasks take their first step
        return True

    async def close(self) -> None:
        """Stop every sender and drop everything queued."""
        senders, self._senders = list(self._senders.values()), {}
        # Every sender is cancelled before any is awaited, so a close that is itself
        # cancelled while waiting leaves no sender running unowned.
        await cancel_and_wait(*(sender.task for sender in senders))
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

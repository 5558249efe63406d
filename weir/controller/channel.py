"""Controller-to-broker channels (Kafka's ControllerChannelManager), the asyncio side.

One queue and one sender task per live broker keep each broker's requests in order.  A
sender connects with :class:`~weir.protocol.client.BrokerConnection`, retries a request
with backoff while its broker is registered, and turns answers into controller events
(:class:`StopReplicaResult`, :class:`LeaderAndIsrResult`) for the controller queue.
Removing a broker drops its queued requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
)

__all__ = ["ControllerChannelManager", "response_event"]

log = logging.getLogger(__name__)

ConnectionFactory = Callable[[str, int], Any]


def response_event(broker_id: int, request: Any, response: Any) -> ControllerEvent | None:
    """The controller event for a broker's answer, or None if the core needn't see it."""
    if isinstance(request, StopReplicaRequest) and isinstance(response, StopReplicaResponse):
        errors = {
            TopicPartition(t.topic_name, p.partition_index): ErrorCode(response.error_code)
            for t in request.topic_states for p in t.partition_states
        }
        if response.error_code == ErrorCode.none:
            for e in response.partition_errors:
                errors[TopicPartition(e.topic_name, e.partition_index)] = ErrorCode(e.error_code)
        return StopReplicaResult(broker_id, errors)
    if isinstance(request, LeaderAndIsrRequest) and isinstance(response, LeaderAndIsrResponse):
        names = {t.topic_id: t.topic_name for t in request.topic_states}
        errors = {
            TopicPartition(names.get(t.topic_id, str(t.topic_id)), p.partition_index):
                ErrorCode(p.error_code)
            for t in response.topics for p in t.partition_errors
        }
        if response.error_code != ErrorCode.none:
            errors = {
                TopicPartition(t.topic_name, p.partition_index): ErrorCode(response.error_code)
                for t in request.topic_states for p in t.partition_states
            }
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
        self.queue: asyncio.Queue[OutboundRequest] = asyncio.Queue()
        self._conn: Any = None
        self.task = asyncio.create_task(self._run(), name=f"controller-channel-{info.id}")

    async def _run(self) -> None:
        try:
            while True:
                item = await self.queue.get()
                response = await self._send_until_answered(item.request)
                event = response_event(self.info.id, item.request, response)
                if event is not None:
                    self._manager.on_event(event)
        finally:
            await self._disconnect()

    async def _send_until_answered(self, request: Any) -> Any:
        backoff = self._manager.backoff_ms / 1000
        while True:
            try:
                if self._conn is None or not self._conn.connected:
                    await self._disconnect()
                    self._conn = self._manager.connect(self.info.host, self.info.port)
                    await self._conn.connect(timeout_s=self._manager.timeout_s)
                return await self._conn.request(request, timeout_s=self._manager.timeout_s)
            except (OSError, ConnectionError, TimeoutError) as exc:
                log.info("controller channel to broker %d: %r; retrying", self.info.id, exc)
                await self._disconnect()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._manager.max_backoff_ms / 1000)

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
                 connect: ConnectionFactory = BrokerConnection) -> None:
        self.on_event = on_event
        self.timeout_s = request_timeout_ms / 1000
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.connect = connect
        self._senders: dict[int, _BrokerSender] = {}

    @property
    def broker_ids(self) -> frozenset[int]:
        return frozenset(self._senders)

    async def update_brokers(self, brokers: Mapping[int, BrokerInfo]) -> None:
        """Match the channels to the live brokers (a re-registered broker gets a new one)."""
        for broker_id in list(self._senders):
            info = brokers.get(broker_id)
            if info is None or info != self._senders[broker_id].info:
                await self._senders.pop(broker_id).stop()
        for broker_id, info in brokers.items():
            if broker_id not in self._senders:
                self._senders[broker_id] = _BrokerSender(info, self)

    def send(self, requests: Iterable[OutboundRequest]) -> None:
        """Queue requests on their brokers' channels; unknown brokers' requests are dropped."""
        for item in requests:
            sender = self._senders.get(item.broker_id)
            if sender is None:
                log.debug("dropping %s for unknown broker %d", type(item.request).__name__,
                          item.broker_id)
                continue
            sender.queue.put_nowait(item)

    async def close(self) -> None:
        """Stop every sender and drop everything queued."""
        senders, self._senders = list(self._senders.values()), {}
        # Every sender is cancelled before any is awaited, so a close that is itself
        # cancelled while waiting leaves no sender running unowned.
        await cancel_and_wait(*(sender.task for sender in senders))

"""The per-broker channels: order, retry while the broker is alive, responses as events."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from weir.common import TopicPartition
from weir.controller.channel import ControllerChannelManager
from weir.controller.events import StopReplicaResult
from weir.controller.requests import OutboundRequest
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import StopReplicaRequest, StopReplicaResponse
from weir.protocol.interbroker.stop_replica.v4.request import (
    StopReplicaPartitionState,
    StopReplicaTopicState,
)
from weir.protocol.interbroker.stop_replica.v4.response import StopReplicaPartitionError

from .helpers import broker


def _stop(partition: int) -> StopReplicaRequest:
    return StopReplicaRequest(controller_id=1, controller_epoch=1, broker_epoch=1, topic_states=(
        StopReplicaTopicState(topic_name="t", partition_states=(
            StopReplicaPartitionState(partition_index=partition, delete_partition=True),)),))


class FlakyConnection:
    attempts = 0
    seen: ClassVar[list[Any]] = []

    def __init__(self, host: str, port: int) -> None:
        self.connected = False

    async def connect(self, timeout_s: float = 10.0) -> None:
        FlakyConnection.attempts += 1
        if FlakyConnection.attempts == 1:
            raise ConnectionRefusedError("not yet")
        self.connected = True

    async def request(self, payload: Any, timeout_s: float | None = None) -> Any:
        FlakyConnection.seen.append(payload)
        p = payload.topic_states[0].partition_states[0].partition_index
        return StopReplicaResponse(error_code=ErrorCode.none, partition_errors=(
            StopReplicaPartitionError(topic_name="t", partition_index=p,
                                      error_code=ErrorCode.none if p else
                                      ErrorCode.kafka_storage_error),))

    async def close(self) -> None:
        self.connected = False


def test_channel_retries_keeps_order_and_reports_results() -> None:
    events: list[Any] = []

    async def scenario() -> None:
        both_answered = asyncio.Event()

        def on_event(event: Any) -> None:
            events.append(event)
            if len(events) >= 2:
                both_answered.set()

        manager = ControllerChannelManager(on_event, backoff_ms=1,
                                           connect=FlakyConnection)
        await manager.update_brokers({2: broker(2)})
        manager.send([OutboundRequest(2, _stop(0)), OutboundRequest(2, _stop(1)),
                      OutboundRequest(3, _stop(2))])  # broker 3 unknown: dropped
        async with asyncio.timeout(10):
            await both_answered.wait()
        await manager.update_brokers({})
        assert manager.broker_ids == frozenset()
        await manager.close()

    asyncio.run(scenario())
    assert FlakyConnection.attempts == 2
    assert [r.topic_states[0].partition_states[0].partition_index
            for r in FlakyConnection.seen] == [0, 1]
    assert events == [
        StopReplicaResult(2, {TopicPartition("t", 0): ErrorCode.kafka_storage_error}),
        StopReplicaResult(2, {TopicPartition("t", 1): ErrorCode.none}),
    ]


class HangingConnection:
    """A broker that accepts the connection and never answers."""

    def __init__(self, host: str, port: int) -> None:
        self.connected = False

    async def connect(self, timeout_s: float = 10.0) -> None:
        self.connected = True

    async def request(self, payload: Any, timeout_s: float | None = None) -> Any:
        await asyncio.Event().wait()

    async def close(self) -> None:
        self.connected = False


def test_a_cancelled_close_leaves_no_sender_running() -> None:
    async def scenario() -> None:
        manager = ControllerChannelManager(lambda event: None, connect=HangingConnection)
        await manager.update_brokers({b: broker(b) for b in (1, 2, 3)})
        senders = list(manager._senders.values())
        manager.send([OutboundRequest(b, _stop(0)) for b in (1, 2, 3)])
        await asyncio.sleep(0)
        closing = asyncio.create_task(manager.close())
        await asyncio.sleep(0)  # close() is waiting on the senders now
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        async with asyncio.timeout(10):
            await asyncio.gather(*(s.task for s in senders), return_exceptions=True)
        assert all(s.task.done() for s in senders)

    asyncio.run(scenario())


class SlowClosingConnection(HangingConnection):
    """Never answers, and takes its time to close (a loaded broker's socket)."""

    async def close(self) -> None:
        await asyncio.sleep(0.05)
        self.connected = False


def test_removing_a_broker_does_not_wait_for_its_sender() -> None:
    """Kafka's removeBroker: the controller's event goes on at once (no await that would
    give the event loop to the data path); the sender winds down in the background and
    close() waits for it."""
    async def scenario() -> None:
        manager = ControllerChannelManager(lambda event: None, connect=SlowClosingConnection)
        await manager.update_brokers({1: broker(1), 2: broker(2)})
        sender = manager._senders[2]
        manager.send([OutboundRequest(2, _stop(0))])
        await asyncio.sleep(0.01)  # the request is in flight
        ran_meanwhile = []
        asyncio.get_running_loop().call_soon(ran_meanwhile.append, True)
        await manager.update_brokers({1: broker(1)})
        assert not ran_meanwhile  # it returned without yielding to the loop
        assert manager.broker_ids == frozenset({1}) and sender.task.cancelling()
        await manager.close()
        assert sender.task.done() and not manager._stopping

    asyncio.run(scenario())

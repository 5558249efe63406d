"""A sender writes its queued requests to the broker's connection before the first answer
comes back, hands the answers on in order, and after a failure sends again from the first
request left unanswered."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from weir.common import TopicPartition
from weir.controller.channel import PIPELINE_DEPTH, ControllerChannelManager
from weir.controller.events import StopReplicaResult
from weir.controller.requests import OutboundRequest
from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import StopReplicaRequest, StopReplicaResponse
from weir.protocol.interbroker.stop_replica.v4.request import (
    StopReplicaPartitionState,
    StopReplicaTopicState,
)

from .helpers import broker


def _stop(partition: int) -> StopReplicaRequest:
    return StopReplicaRequest(controller_id=1, controller_epoch=1, broker_epoch=1, topic_states=(
        StopReplicaTopicState(topic_name="t", partition_states=(
            StopReplicaPartitionState(partition_index=partition, delete_partition=False),)),))


def _partition(request: Any) -> int:
    return request.topic_states[0].partition_states[0].partition_index


class PipeConnection:
    """A broker connection that takes encoded bodies and answers only when told to; the
    first connection drops when asked for its second answer."""

    takes_encoded_body = True
    connections = 0
    written: ClassVar[list[tuple[int, int]]] = []  # (connection, partition) in write order
    release: ClassVar[asyncio.Event]
    three_written: ClassVar[asyncio.Event]

    def __init__(self, host: str, port: int) -> None:
        self.connected = False

    async def connect(self, timeout_s: float = 10.0) -> None:
        PipeConnection.connections += 1
        self.number = PipeConnection.connections
        self.connected = True

    async def request(self, payload: Any, timeout_s: float | None = None, *,
                      body: bytes | None = None) -> Any:
        assert body == codec.encode_body(payload)
        p = _partition(payload)
        PipeConnection.written.append((self.number, p))
        if len(PipeConnection.written) == 3:
            PipeConnection.three_written.set()
        await PipeConnection.release.wait()
        if self.number == 1 and p == 1:
            self.connected = False
            raise ConnectionResetError("dropped")
        return StopReplicaResponse(error_code=ErrorCode.none, partition_errors=())

    async def close(self) -> None:
        self.connected = False


def test_requests_are_written_ahead_of_answers_and_resent_from_the_first_unanswered() -> None:
    events: list[Any] = []

    async def scenario() -> None:
        PipeConnection.release = asyncio.Event()
        PipeConnection.three_written = asyncio.Event()
        done = asyncio.Event()

        def on_event(event: Any) -> None:
            events.append(event)
            if len(events) == 3:
                done.set()

        manager = ControllerChannelManager(on_event, backoff_ms=1, connect=PipeConnection)
        await manager.update_brokers({2: broker(2)})
        manager.send([OutboundRequest(2, _stop(p)) for p in (0, 1, 2)])
        async with asyncio.timeout(10):
            await PipeConnection.three_written.wait()
        # all three written, none answered yet (Kafka's RequestSendThread would have
        # written one)
        assert PipeConnection.written == [(1, 0), (1, 1), (1, 2)] and not events
        PipeConnection.release.set()
        async with asyncio.timeout(10):
            await done.wait()
        await manager.close()

    asyncio.run(scenario())
    # the first answer arrived; the second failed: 1 and 2 go again, in order
    assert PipeConnection.written[3:] == [(2, 1), (2, 2)]
    assert [list(e.errors) for e in events] == [[TopicPartition("t", p)] for p in (0, 1, 2)]
    assert all(isinstance(e, StopReplicaResult) for e in events)


class AnsweringConnection(PipeConnection):
    async def request(self, payload: Any, timeout_s: float | None = None, *,
                      body: bytes | None = None) -> Any:
        return StopReplicaResponse(error_code=ErrorCode.none, partition_errors=())


def test_work_ready_before_a_batch_runs_before_its_encoding() -> None:
    """The controlled shutdown's answer is handed on just before the new leaders' batch is
    queued, and needs two more turns of the event loop to be written (the request's task,
    then the connection's responder): a sender yields before each encoding, so it is not
    held behind a 3,333-partition encode per broker."""
    order: list[str] = []

    async def scenario() -> None:
        four = asyncio.Event()

        async def encode(fn: Any, *args: Any) -> Any:
            order.append("encode")
            if order.count("encode") == 4:
                four.set()
            return fn(*args)

        async def answer_in_two_turns() -> None:
            await asyncio.sleep(0)
            order.append("answer")

        manager = ControllerChannelManager(lambda _e: None, connect=AnsweringConnection,
                                           run_blocking=encode)
        await manager.update_brokers({2: broker(2), 3: broker(3)})
        await asyncio.sleep(0.01)  # the senders wait on their queues
        answered = asyncio.ensure_future(answer_in_two_turns())
        manager.send([OutboundRequest(b, _stop(p)) for b in (2, 3) for p in (0, 1)])
        async with asyncio.timeout(10):
            await answered
            await four.wait()
        await manager.close()

    asyncio.run(scenario())
    assert order[0] == "answer"


def test_written_waits_for_every_queued_request_to_be_handed_to_its_connection() -> None:
    """``written`` returns once each request queued so far was written to its broker's
    connection, answered or not; a broker that takes nothing bounds it by the timeout."""
    async def scenario() -> tuple[bool, list[tuple[int, int]], bool]:
        PipeConnection.written = []
        PipeConnection.connections = 0
        PipeConnection.release = asyncio.Event()  # never set: no answers
        PipeConnection.three_written = asyncio.Event()
        manager = ControllerChannelManager(lambda _e: None, connect=PipeConnection)
        await manager.update_brokers({2: broker(2)})
        assert await manager.written(0.01)  # nothing queued
        manager.send([OutboundRequest(2, _stop(p)) for p in range(PIPELINE_DEPTH + 2)])
        done = await manager.written(5)
        seen = list(PipeConnection.written)
        # the depth is reached and the sender waits for answers: the rest are not written
        PipeConnection.written = []
        stuck = await manager.written(0.05)
        await manager.close()
        return done, seen, stuck

    done, seen, stuck = asyncio.run(scenario())
    assert not done and not stuck
    assert seen == [(1, p) for p in range(PIPELINE_DEPTH)]


def test_written_is_true_once_all_are_written() -> None:
    async def scenario() -> tuple[bool, int]:
        PipeConnection.written = []
        PipeConnection.connections = 0
        PipeConnection.release = asyncio.Event()
        PipeConnection.three_written = asyncio.Event()
        manager = ControllerChannelManager(lambda _e: None, connect=PipeConnection)
        await manager.update_brokers({2: broker(2), 3: broker(3)})
        manager.send([OutboundRequest(b, _stop(p)) for b in (2, 3) for p in (0, 1)])
        done = await manager.written(5)
        count = len(PipeConnection.written)
        PipeConnection.release.set()
        await manager.close()
        return done, count

    done, count = asyncio.run(scenario())
    assert done and count == 4

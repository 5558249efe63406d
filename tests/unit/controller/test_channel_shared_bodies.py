"""Controller request bodies encoded by the senders (off the event loop), a batch's
UpdateMetadata once and patched per broker epoch."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, ClassVar

from weir.common import TopicPartition
from weir.controller import channel
from weir.controller.channel import ControllerChannelManager, SharedBodies
from weir.controller.context import ControllerContext
from weir.controller.requests import RequestBatch
from weir.coordination.codecs import BrokerInfo, LeaderIsr
from weir.protocol import codec
from weir.protocol.interbroker import UpdateMetadataResponse

EPOCHS = {1: 7, 2: 2**40 + 3, 3: 123456789012}


def _batch(partitions: int = 300) -> list[Any]:
    ctx = ControllerContext(controller_epoch=4)
    for b, epoch in EPOCHS.items():
        ctx.live_brokers[b] = BrokerInfo(id=b, host=f"h{b}", port=9000 + b, epoch=epoch)
    for t in range(3):
        name = f"t{t}"
        ctx.topic_ids[name] = uuid.UUID(int=t + 1)
        ctx.assignments[name] = {}
        for p in range(partitions // 3):
            replicas = tuple((p + i) % 3 + 1 for i in range(3))
            ctx.assignments[name][p] = replicas
            ctx.leadership[TopicPartition(name, p)] = LeaderIsr(
                leader=replicas[0], leader_epoch=p, isr=list(replicas[:2]),
                controller_epoch=4, zk_version=p + 1)
    batch = RequestBatch(1, ctx)
    for tp, state in ctx.leadership.items():
        batch.add_leader_and_isr([1, 2], tp, state, ctx.assignments[tp.topic][tp.partition])
    return [item.request for item in batch.build()]


def test_every_body_equals_its_own_encoding_and_update_metadata_is_encoded_once(
        monkeypatch) -> None:
    requests = _batch()
    metadata = [r for r in requests if type(r).__name__ == "UpdateMetadataRequest"]
    assert len(metadata) == 3 and len({r.broker_epoch for r in metadata}) == 3
    expected = [codec.encode_body(r) for r in requests]
    calls = []
    real = channel.encode_request
    monkeypatch.setattr(channel, "encode_request",
                        lambda e, memo=None: calls.append(e) or real(e, memo))
    shared = SharedBodies()
    bodies = [shared.body(r) for r in requests]
    assert bodies == expected
    others = [r for r in requests if all(r is not m for m in metadata)]
    assert len(others) == 2  # the LeaderAndIsr requests of brokers 1 and 2
    assert sorted(map(id, calls)) == sorted(map(id, [*others, metadata[0]]))


def test_senders_on_threads_share_one_encoding(monkeypatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    metadata = [r for r in _batch() if type(r).__name__ == "UpdateMetadataRequest"]
    calls = []
    real = channel.encode_request
    monkeypatch.setattr(channel, "encode_request",
                        lambda e, memo=None: calls.append(e) or real(e, memo))
    shared = SharedBodies()
    with ThreadPoolExecutor(3) as pool:
        bodies = list(pool.map(shared.body, metadata))
    assert bodies == [codec.encode_body(r) for r in metadata]
    assert len(calls) == 1


def test_different_content_is_not_shared() -> None:
    first, second = _batch(30), _batch(60)
    um1 = next(r for r in first if type(r).__name__ == "UpdateMetadataRequest")
    um2 = next(r for r in second if type(r).__name__ == "UpdateMetadataRequest")
    shared = SharedBodies()
    assert shared.body(um1) == codec.encode_body(um1)
    assert shared.body(um2) == codec.encode_body(um2)


class RecordingConnection:
    takes_encoded_body = True
    sent: ClassVar[list[tuple[int, bytes | None]]] = []
    all_sent: ClassVar[asyncio.Event | None] = None

    def __init__(self, host: str, port: int) -> None:
        self.port = port
        self.connected = False

    async def connect(self, timeout_s: float = 10.0) -> None:
        self.connected = True

    async def request(self, payload: Any, timeout_s: float | None = None, *,
                      body: bytes | None = None) -> Any:
        assert body is not None and body == codec.encode_body(payload)
        RecordingConnection.sent.append((self.port, body))
        if len(RecordingConnection.sent) == 3 and RecordingConnection.all_sent is not None:
            RecordingConnection.all_sent.set()
        return UpdateMetadataResponse(error_code=0)

    async def close(self) -> None:
        self.connected = False


def test_channels_send_the_shared_bodies() -> None:
    from weir.controller.requests import OutboundRequest

    requests = [r for r in _batch() if type(r).__name__ == "UpdateMetadataRequest"]

    async def scenario() -> None:
        RecordingConnection.all_sent = asyncio.Event()
        encoded_on: list[bool] = []

        async def run_blocking(fn: Any, *args: Any) -> Any:
            encoded_on.append(True)
            return await asyncio.to_thread(fn, *args)

        manager = ControllerChannelManager(lambda _e: None, connect=RecordingConnection,
                                           run_blocking=run_blocking)
        await manager.update_brokers({b: BrokerInfo(id=b, host="h", port=b, epoch=e)
                                      for b, e in EPOCHS.items()})
        manager.send([OutboundRequest(b, r)  # built in broker order
                      for b, r in zip(sorted(EPOCHS), requests, strict=True)])
        async with asyncio.timeout(10):
            await RecordingConnection.all_sent.wait()
        await manager.close()
        assert len(encoded_on) == 3

    asyncio.run(scenario())
    assert sorted(port for port, _ in RecordingConnection.sent) == [1, 2, 3]

"""Produce requests that need no wait (acks 0/1) are answered on the connection's own task;
responses stay in request order when one is behind a produce still waiting (acks=all)."""

from __future__ import annotations

import asyncio
import struct

from weir.server.network import SocketServer


def _produce(correlation_id: int, acks: int) -> bytes:
    payload = struct.pack(">hhih", 0, 9, correlation_id, acks)
    return struct.pack(">i", len(payload)) + payload


class _Dispatcher:
    """Stands for the real one: acks=1 answers in the first stage; acks=-1 does all of its
    work in the second (it waits for ``released``); acks=-2 begins in the first stage and
    waits for ``released`` in the second."""

    def __init__(self) -> None:
        self.released = asyncio.Event()
        self.inline: list[int] = []
        self.tasked: list[int] = []

    def begin(self, frame: bytes, peer: str, security=None):
        corr, acks = struct.unpack_from(">ih", frame, 4)
        if acks == -1:
            return self._all_later(corr)
        self.inline.append(corr)
        if acks == -2:  # begun here, waits for ``released`` in a task

            async def rest() -> bytes:
                await self.released.wait()
                return _answer(corr)

            return rest()
        return _answer(corr)

    async def _all_later(self, corr: int) -> bytes:
        self.tasked.append(corr)
        await self.released.wait()
        return _answer(corr)

    async def dispatch(self, frame: bytes, peer: str, security=None):
        corr, acks = struct.unpack_from(">ih", frame, 4)
        self.tasked.append(corr)
        if acks == -1:
            await self.released.wait()
        return _answer(corr)


def _answer(corr: int) -> bytes:
    return struct.pack(">ii", 4, corr)


async def _read(reader: asyncio.StreamReader) -> int:
    _size, corr = struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 5))
    return corr


def test_produce_answered_inline_and_in_order():
    async def main() -> None:
        server = SocketServer(None, "127.0.0.1", 0)
        fake = _Dispatcher()
        server.dispatcher = fake  # type: ignore[assignment]
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(_produce(1, 1))
            assert await _read(reader) == 1
            writer.write(_produce(2, -1) + _produce(3, 1))  # 3 is behind a waiting 2
            await writer.drain()
            for _ in range(100):
                if fake.tasked == [2, 3]:
                    break
                await asyncio.sleep(0.01)
            assert fake.tasked == [2, 3] and fake.inline == [1]
            fake.released.set()
            assert [await _read(reader), await _read(reader)] == [2, 3]
            writer.write(_produce(4, 1))  # nothing in flight again: inline
            assert await _read(reader) == 4 and fake.inline == [1, 4]
            writer.close()
        finally:
            await server.stop()

    asyncio.run(main())


def test_answers_to_pipelined_requests_go_out_in_one_write(monkeypatch):
    from weir.server import network

    writes: list[bytes] = []
    flush = network._Pipeline.flush

    def counting(self) -> None:
        if self._held:
            writes.append(b"".join(self._held))
        flush(self)

    monkeypatch.setattr(network._Pipeline, "flush", counting)

    async def main() -> None:
        server = SocketServer(None, "127.0.0.1", 0)
        server.dispatcher = _Dispatcher()  # type: ignore[assignment]
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(_produce(5, 1) + _produce(6, 1) + _produce(7, 1))  # one segment
            assert [await _read(reader) for _ in range(3)] == [5, 6, 7]
            writer.close()
        finally:
            await server.stop()

    asyncio.run(main())
    assert writes == [_answer(5) + _answer(6) + _answer(7)]


def test_request_begun_inline_finishes_in_order_as_a_task():
    async def main() -> None:
        server = SocketServer(None, "127.0.0.1", 0)
        fake = _Dispatcher()
        server.dispatcher = fake  # type: ignore[assignment]
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(_produce(1, -2) + _produce(2, 1))  # 2 is behind 1's wait
            await writer.drain()
            for _ in range(100):
                if fake.tasked == [2]:
                    break
                await asyncio.sleep(0.01)
            assert fake.inline == [1] and fake.tasked == [2]
            fake.released.set()
            assert [await _read(reader), await _read(reader)] == [1, 2]
            writer.close()
        finally:
            await server.stop()

    asyncio.run(main())

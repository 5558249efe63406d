"""ResponseFrames (the inter-broker client's frame reader) and BrokerConnection over a real
loopback socket: frames of every size, cut at every boundary, come out whole and in order."""

from __future__ import annotations

import asyncio
import os
import random
import struct

import pytest
from kio.index import load_request_schema, load_response_schema

from weir.protocol import codec
from weir.protocol.client import BrokerConnection, ResponseFrames


def _frames(sizes: list[int]) -> tuple[list[bytes], bytes]:
    bodies = [os.urandom(n) for n in sizes]
    return bodies, b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def _feed(protocol: ResponseFrames, data: bytes, chunks: list[int]) -> None:
    pos = 0
    for want in chunks:
        while want and pos < len(data):
            buf = protocol.get_buffer(-1)
            n = min(len(buf), want, len(data) - pos)
            assert n > 0
            buf[:n] = data[pos:pos + n]
            protocol.buffer_updated(n)
            pos, want = pos + n, want - n
    assert pos == len(data)


def _make(max_frame: int = 1 << 24) -> tuple[ResponseFrames, list[bytes], list[BaseException]]:
    got: list[bytes] = []
    lost: list[BaseException] = []
    loop = asyncio.new_event_loop()
    try:
        protocol = ResponseFrames(lambda f: got.append(bytes(f)), lost.append,
                                  max_frame, loop=loop)
    finally:
        loop.close()
    return protocol, got, lost


@pytest.mark.parametrize("seed", range(8))
def test_frames_of_every_size_cut_anywhere(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [rng.choice([4, 5, 100, 32 * 1024, 32 * 1024 + 1, 60_000, 65_532, 70_000,
                         300_000]) for _ in range(40)]
    bodies, data = _frames(sizes)
    protocol, got, lost = _make()
    chunks = []
    left = len(data)
    while left > 0:
        n = rng.choice([1, 3, 4, 7, 1000, 65536, 200_000])
        chunks.append(n)
        left -= n
    _feed(protocol, data, chunks)
    assert not lost
    assert got == bodies


def test_whole_stream_in_one_buffer_at_a_time() -> None:
    bodies, data = _frames([10, 40_000, 20, 20, 1_000_000, 8])
    protocol, got, lost = _make()
    _feed(protocol, data, [len(data)])
    assert got == bodies and not lost


def test_large_frame_is_handed_on_read_only() -> None:
    seen: list[object] = []
    loop = asyncio.new_event_loop()
    try:
        protocol = ResponseFrames(seen.append, lambda exc: None, 1 << 24, loop=loop)
    finally:
        loop.close()
    _, data = _frames([100_000])
    _feed(protocol, data, [50, len(data) - 50])
    assert isinstance(seen[0], memoryview) and seen[0].readonly


@pytest.mark.parametrize("size", [0, 3, -1, (1 << 20) + 1])
def test_bad_size_is_a_lost_connection(size: int) -> None:
    protocol, got, lost = _make(max_frame=1 << 20)
    _feed(protocol, struct.pack(">i", size) + b"x" * 8, [12])
    assert not got
    assert len(lost) == 1 and "bad response frame size" in str(lost[0])


def test_connection_round_trip_large_fetch_responses() -> None:
    """A fake server answers Fetch v12 requests (pipelined) with responses of 100 B to
    2 MiB of records; each comes back decoded, to the request that asked for it."""
    resp_cls = load_response_schema(1, 12)
    req = codec.build(load_request_schema(1, 12), {})
    payloads = [os.urandom(n) for n in (100, 40_000, 2 << 20, 7, 300_000)]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                index = correlation_id - 1
                body = codec.encode_body(codec.build(resp_cls, {
                    "session_id": index, "responses": [{"topic": "t", "partitions": [
                        {"partition_index": 0, "high_watermark": index,
                         "records": payloads[index]}]}]}))
                out = struct.pack(">i", correlation_id) + b"\x00" + body
                writer.write(struct.pack(">i", len(out)) + out)
        except asyncio.IncompleteReadError:
            writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = BrokerConnection("127.0.0.1", port)
        await conn.connect(5)
        try:
            answers = await asyncio.gather(*(conn.request(req, 10) for _ in payloads))
            for i, answer in enumerate(answers):
                assert int(answer.session_id) == i
                part = answer.responses[0].partitions[0]
                assert bytes(part.records) == payloads[i]
        finally:
            await conn.close()
            server.close()
            await server.wait_closed()
        assert not conn.connected
        with pytest.raises(ConnectionError):
            await conn.request(req, 1)

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_server_closing_fails_pending_requests() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(4)
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = BrokerConnection("127.0.0.1", port)
        await conn.connect(5)
        try:
            with pytest.raises(ConnectionError):
                await conn.request(codec.build(load_request_schema(1, 12), {}), 10)
            assert not conn.connected
        finally:
            await conn.close()
            server.close()
            await server.wait_closed()

    asyncio.run(asyncio.wait_for(scenario(), 30))

"""The socket server's resource limits, on real loopback sockets (Kafka's SocketServer and
Selector are the reference: max.connections waits (KIP-402), max.connections.per.ip closes,
connections.max.idle.ms expires idle connections, queued.max.requests bounds the requests
waiting for a handler but not those parked in a purgatory)."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from weir.asyncutil import parked
from weir.config import BrokerConfig
from weir.protocol import codec
from weir.server.network import ConnectionLimits, SocketServer

API_VERSIONS = codec.encode_request_header(18, 0, 0, "t", False)


def _frame(correlation_id: int) -> bytes:
    payload = API_VERSIONS[:4] + struct.pack(">i", correlation_id) + API_VERSIONS[8:]
    return struct.pack(">i", len(payload)) + payload


async def _open(server: SocketServer, source: str = "127.0.0.1"):
    return await asyncio.open_connection("127.0.0.1", server.port, local_addr=(source, 0))


async def _ask(reader, writer, correlation_id: int = 1, wait_s: float = 5.0) -> bool:
    """True when the request is answered, False when the connection was closed."""
    writer.write(_frame(correlation_id))
    try:
        await writer.drain()
        size, corr = struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), wait_s))
        await reader.readexactly(size - 4)
        return corr == correlation_id
    except (asyncio.IncompleteReadError, ConnectionError):
        return False


async def _closed(reader, wait_s: float = 5.0) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), wait_s) == b""
    except ConnectionError:
        return True


def _run(limits: ConnectionLimits, body) -> None:
    async def main() -> None:
        server = SocketServer(None, "127.0.0.1", 0, limits)  # ApiVersions needs no broker
        await server.start()
        try:
            await asyncio.wait_for(body(server), 30)
        finally:
            await server.stop()

    asyncio.run(main())


def test_limits_come_from_kafka_keys():
    config = BrokerConfig({"broker.id": "1", "zookeeper.connect": "z:1", "log.dirs": "/tmp/x",
                           "max.connections": "7", "max.connections.per.ip": "3",
                           "max.connections.per.ip.overrides": "127.0.0.2:1, hostA:9",
                           "connections.max.idle.ms": "1234", "queued.max.requests": "11"})
    limits = ConnectionLimits.from_config(config)
    assert (limits.max_connections, limits.max_connections_per_ip, limits.idle_ms,
            limits.queued_max_requests) == (7, 3, 1234, 11)
    assert limits.per_ip("127.0.0.2") == 1 and limits.per_ip("hostA") == 9
    assert limits.per_ip("10.0.0.1") == 3


def test_bad_per_ip_override_names_the_key():
    from weir.config import ConfigError

    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        BrokerConfig({"broker.id": "1", "zookeeper.connect": "z:1", "log.dirs": "/tmp/x",
                      "max.connections.per.ip.overrides": "hostA"})


def test_connections_over_the_per_ip_limit_are_closed():
    async def body(server: SocketServer) -> None:
        first = await _open(server, "127.0.0.2")
        second = await _open(server, "127.0.0.2")
        assert await _ask(*first) and await _ask(*second)
        third = await _open(server, "127.0.0.2")
        assert await _closed(third[0])
        other = await _open(server, "127.0.0.3")  # another address has its own count
        assert await _ask(*other)
        first[1].close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the slot frees once the server sees the close
            again = await _open(server, "127.0.0.2")
            if await _ask(*again):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("a closed connection did not free its per-ip slot")

    _run(ConnectionLimits(max_connections_per_ip=2), body)


def test_accepting_waits_at_max_connections():
    async def body(server: SocketServer) -> None:
        first, second = await _open(server), await _open(server)
        assert await _ask(*first) and await _ask(*second)
        third = await _open(server)  # completes in the listen backlog, not served yet
        third[1].write(_frame(3))
        await asyncio.sleep(0.3)
        assert server.connection_count == 2
        first[1].close()
        _size, corr = struct.unpack(">ii", await asyncio.wait_for(third[0].readexactly(8), 5))
        assert corr == 3

    _run(ConnectionLimits(max_connections=2), body)


def test_idle_connections_are_closed():
    async def body(server: SocketServer) -> None:
        reader, writer = await _open(server)
        assert await _ask(reader, writer)
        half_reader, half_writer = await _open(server)
        half_writer.write(struct.pack(">i", 100) + b"\x00\x12")  # a frame never completed
        started = time.monotonic()
        assert await _closed(reader, wait_s=10)
        assert await _closed(half_reader, wait_s=10)
        assert time.monotonic() - started >= 0.3

    _run(ConnectionLimits(idle_ms=400), body)


def test_queued_max_requests_bounds_requests_waiting_for_a_handler():
    """With one place, a second connection's request waits while the first is handled, and
    goes through as soon as the first parks (as a produce waiting for replication does)."""
    release_first = asyncio.Event()
    park_first = asyncio.Event()
    handled: list[int] = []

    async def body(server: SocketServer) -> None:
        original = server.dispatcher.dispatch

        async def dispatch(frame: bytes, peer: str, security=None):
            corr = struct.unpack_from(">i", frame, 4)[0]
            handled.append(corr)
            if corr == 1:
                await park_first.wait()
                parked()
                await release_first.wait()
            return await original(frame, peer)

        server.dispatcher.dispatch = dispatch
        a, b = await _open(server), await _open(server)
        a[1].write(_frame(1))
        await a[1].drain()
        b[1].write(_frame(2))
        await b[1].drain()
        await asyncio.sleep(0.3)
        assert handled == [1]  # the second waits for a place
        park_first.set()
        _size, corr = struct.unpack(">ii", await asyncio.wait_for(b[0].readexactly(8), 5))
        assert corr == 2 and handled == [1, 2]
        release_first.set()
        _size, corr = struct.unpack(">ii", await asyncio.wait_for(a[0].readexactly(8), 5))
        assert corr == 1

    _run(ConnectionLimits(queued_max_requests=1), body)


def test_a_large_frame_of_another_api_is_decoded_from_its_own_buffer():
    """A frame above ``frames.LARGE`` reaches the dispatcher as a memoryview; any API but
    Produce is decoded by kio from bytes of it (bytes after a body are ignored, as Kafka
    does), and the requests pipelined behind it are answered in order."""
    from weir.server.frames import LARGE

    async def body(server: SocketServer) -> None:
        reader, writer = await _open(server)
        big = _frame(1)[4:] + b"\0" * (LARGE + 1000)
        writer.write(struct.pack(">i", len(big)) + big + _frame(2) + _frame(3))
        await writer.drain()
        for correlation_id in (1, 2, 3):
            size, corr = struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 5))
            await reader.readexactly(size - 4)
            assert corr == correlation_id
        writer.close()

    _run(ConnectionLimits(), body)


def test_socket_buffer_sizes_come_from_kafka_keys():
    base = {"broker.id": "1", "zookeeper.connect": "z:1", "log.dirs": "/tmp/x"}
    kafka_defaults = ConnectionLimits.from_config(BrokerConfig(base))
    assert (kafka_defaults.send_buffer_bytes, kafka_defaults.receive_buffer_bytes) \
        == (102400, 102400)
    limits = ConnectionLimits.from_config(BrokerConfig({
        **base, "socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "65536"}))
    assert (limits.send_buffer_bytes, limits.receive_buffer_bytes) == (-1, 65536)


def _accepted_buffers(limits: ConnectionLimits) -> tuple[int, int]:
    """(SO_SNDBUF, SO_RCVBUF) of the server's side of a connection."""
    import socket

    seen: list[tuple[int, int]] = []

    async def body(server: SocketServer) -> None:
        reader, writer = await _open(server)
        assert await _ask(reader, writer)
        conn = next(c for c in server._connections.values() if c is not None)
        sock = conn.writer.transport.get_extra_info("socket")
        seen.append((sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                     sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)))
        writer.close()

    _run(limits, body)
    return seen[0]


def test_accepted_sockets_get_the_configured_buffers():
    # Linux doubles what is asked for (room for its own bookkeeping) and reports that.
    send, receive = _accepted_buffers(ConnectionLimits(send_buffer_bytes=40000,
                                                       receive_buffer_bytes=50000))
    assert (send, receive) == (80000, 100000)


def test_minus_one_leaves_the_buffers_to_the_os():
    send, receive = _accepted_buffers(ConnectionLimits(send_buffer_bytes=-1,
                                                       receive_buffer_bytes=-1))
    assert send != 80000 and receive != 100000

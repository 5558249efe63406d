"""BrokerConnections: one connection per broker, dropped on failure and reopened."""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import ClassVar

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode

from weir.protocol import codec
from weir.protocol.client import BrokerConnection, BrokerConnections

_ANSWER = codec.encode_body(ApiVersionsResponse(
    error_code=ErrorCode.none, api_keys=(), throttle_time=datetime.timedelta(0)))
_REQUEST = ApiVersionsRequest(client_software_name="t", client_software_version="1")


class _Conn:
    made: ClassVar[list[_Conn]] = []

    def __init__(self, host, port, client_id, security=None) -> None:
        self.address, self.client_id, self.security = (host, port), client_id, security
        self.connected = False
        self.closed = False
        self.fail_next = False
        _Conn.made.append(self)

    async def connect(self, timeout_s: float) -> None:
        self.connected = True

    async def request(self, payload, timeout_s: float):
        if self.fail_next:
            raise ConnectionError("reset by peer")
        return (self.address, payload)

    async def close(self) -> None:
        self.connected, self.closed = False, True


def test_reuses_drops_on_failure_and_reconnects():
    _Conn.made = []
    endpoints = {1: ("h1", 9092), 2: ("h2", 9093)}
    pool = BrokerConnections(endpoints.get, "c", security="sec", connect=_Conn)

    async def scenario():
        assert await pool.request(1, "a", 1) == (("h1", 9092), "a")
        assert await pool.request(1, "b", 1) == (("h1", 9092), "b")
        assert len(_Conn.made) == 1 and _Conn.made[0].security == "sec"
        _Conn.made[0].fail_next = True
        with pytest.raises(ConnectionError):
            await pool.request(1, "c", 1)
        assert _Conn.made[0].closed
        assert await pool.request(1, "d", 1) == (("h1", 9092), "d")  # a new connection
        assert len(_Conn.made) == 2
        with pytest.raises(ConnectionError, match="no endpoint"):
            await pool.request(3, "e", 1)
        await pool.request(2, "f", 1)
        await pool.close()
        assert all(c.closed for c in _Conn.made[1:])

    asyncio.run(scenario())


def test_a_request_unanswered_in_time_raises_timeout_and_an_answer_still_arrives():
    """A real socket: the server answers the first request only after the caller's timeout
    and the second at once; the first gets TimeoutError, the second its answer."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = _ANSWER
        for delay in (0.3, 0.0):
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            frame = await reader.readexactly(size)
            correlation_id = struct.unpack_from(">i", frame, 4)[0]
            await asyncio.sleep(delay)
            # ApiVersions responses have header v0 (no tagged fields) at every version
            writer.write(struct.pack(">ii", 4 + len(body), correlation_id) + body)

    async def scenario() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = BrokerConnection("127.0.0.1", port, client_id="t")
        await conn.connect()
        request = _REQUEST
        with pytest.raises(TimeoutError):
            await conn.request(request, timeout_s=0.05)
        assert not conn._pending
        # the server answers in order: the late answer (correlation id 1, no longer
        # awaited) comes first and is dropped, then this one's
        answer = await conn.request(request, timeout_s=5)
        assert answer.error_code == ErrorCode.none
        assert not conn._pending
        await conn.close()
        server.close()
        await server.wait_closed()

    asyncio.run(asyncio.wait_for(scenario(), 20))


def test_an_answer_resumes_the_requester_on_the_next_loop_turn():
    """Every follower fetch and controller request waits on this path; ``wait_for`` took
    two turns (its callback's, then the task's)."""
    class _Writer:
        def write(self, data: bytes) -> None:
            self.sent = data

        async def drain(self) -> None:
            pass

    async def scenario() -> int:
        conn = BrokerConnection("127.0.0.1", 1, client_id="t")
        conn._writer = _Writer()  # type: ignore[assignment]
        task = asyncio.create_task(conn.request(_REQUEST, timeout_s=5))
        for _ in range(3):
            await asyncio.sleep(0)  # sent, waiting for the answer
        conn._on_frame(struct.pack(">i", 1) + _ANSWER)  # correlation id 1, header v0
        turns = 0
        while not task.done() and turns < 10:
            turns += 1
            await asyncio.sleep(0)
        assert task.result().error_code == ErrorCode.none
        return turns

    assert asyncio.run(scenario()) == 1


def _client_socket_options(receive_buffer_bytes: int, run=asyncio.run) -> tuple[int, int]:
    """(SO_RCVBUF, TCP_NODELAY) of a BrokerConnection's socket to a plain loopback
    listener, on the loop ``run`` runs."""
    import socket

    async def scenario() -> tuple[int, int]:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = BrokerConnection("127.0.0.1", port, receive_buffer_bytes=receive_buffer_bytes)
        try:
            await conn.connect(timeout_s=5)
            sock = conn._writer.transport.get_extra_info("socket")
            return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                    sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        finally:
            await conn.close()
            server.close()
            await server.wait_closed()

    return run(scenario())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_receive_buffer_is_set_before_connecting(loop):
    import uvloop

    run = asyncio.run if loop == "asyncio" else uvloop.run
    receive, nodelay = _client_socket_options(30000, run)
    assert receive == 60000  # Linux reports twice what was asked
    # The socket made by hand is still a TCP one to the loop: Nagle stays off (asyncio
    # sets TCP_NODELAY only when the socket's proto is IPPROTO_TCP).
    assert nodelay


def test_minus_one_keeps_the_os_receive_buffer():
    receive, nodelay = _client_socket_options(-1)
    assert receive != 60000 and nodelay


def test_an_unreachable_address_with_a_receive_buffer_fails_as_a_connection_error():
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conn = BrokerConnection("127.0.0.1", port, receive_buffer_bytes=30000)
    with pytest.raises(OSError):
        asyncio.run(conn.connect(timeout_s=5))

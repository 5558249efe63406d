"""A small asyncio Kafka protocol client, used broker-to-broker (controller channel, fetchers).

Requests are pipelined on one connection: each gets a correlation id and a future, and one
reader task resolves futures as responses arrive (Kafka answers in order on a connection).

On a secured inter-broker listener the connection is handed a ``security`` object
(:class:`weir.security.client.InterBrokerSecurity`): its ``ssl_context`` wraps the socket in
TLS and its ``authenticate(conn)`` runs the SASL exchange before the connection is used.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.index import load_response_schema

from weir.protocol import codec
from weir.protocol.framing import FrameReceiver, WriterFlowControl

_SIZE = struct.Struct(">i")


@cache
def response_class_for(request_cls: type) -> type:
    api_key = int(request_cls.__api_key__)
    version = int(request_cls.__version__)
    if request_cls.__module__.startswith("kio."):
        return load_response_schema(api_key, version)
    from weir.protocol.interbroker import INTERBROKER_SCHEMAS

    return INTERBROKER_SCHEMAS[api_key][version][1]


class ResponseFrames(WriterFlowControl, FrameReceiver):
    """The connection's bytes cut into response frames (a 4-byte size, then that many
    bytes), as Kafka's ``NetworkReceive`` does, each handed to ``on_frame`` as it completes.

    A ``BufferedProtocol`` (:class:`weir.protocol.framing.FrameReceiver`): small responses
    come out of a shared 64 KiB buffer, copied once; a frame above 32 KiB (a follower's
    Fetch response, which carries the leader's appends) is received into a buffer of its
    exact size and handed on read-only: the bytes are copied once, by the kernel, where a
    ``StreamReader`` copied each into its buffer, out of it, and paused and resumed the
    socket as its buffer filled.  A size below 4 or above ``max_frame_bytes`` is a broken
    connection (``on_lost``).  The connection's ``StreamWriter`` gets its flow control from
    :class:`~weir.protocol.framing.WriterFlowControl`."""

    def __init__(self, on_frame: Callable[[bytes | memoryview], None],
                 on_lost: Callable[[BaseException], None], max_frame_bytes: int,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._init_frames()
        self._init_flow_control(loop)
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._max = max_frame_bytes

    def _frame_size(self, size: int) -> bool:
        if size < 4 or size > self._max:
            self._on_lost(ConnectionError(f"bad response frame size {size}"))
            return False
        return True

    def _frame(self, frame: bytes | memoryview) -> None:
        self._on_frame(frame)

    def eof_received(self) -> bool:
        self._on_lost(ConnectionError("closed by the server"))
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(exc or ConnectionError("connection closed"))
        self._flow_control_lost(exc)


def _time_out(fut: asyncio.Future) -> None:
    """A request's timeout: its awaiting task gets TimeoutError (as from ``wait_for``)."""
    if not fut.done():
        fut.set_exception(TimeoutError())


class BrokerConnection:
    """One pipelined connection to a Kafka-protocol server."""

    takes_encoded_body = True
    """:meth:`request` takes the payload's encoding (``body=``)."""

    def __init__(self, host: str, port: int, client_id: str = "weir",
                 max_frame_bytes: int = 512 * 1024 * 1024, security: Any = None,
                 receive_buffer_bytes: int = -1) -> None:
        self.host = host
        # SO_RCVBUF before connecting (Kafka's Selector.connect with a NetworkClient's
        # socketReceiveBuffer, e.g. replica.socket.receive.buffer.bytes); -1: the OS's own.
        self.receive_buffer_bytes = receive_buffer_bytes
        self.security = security
        self.port = port
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[asyncio.Future, type, bool, Any]] = {}
        self._ids = itertools.count(1)
        self._closed_exc: BaseException | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None and self._closed_exc is None

    async def connect(self, timeout_s: float = 10.0) -> None:
        context = getattr(self.security, "ssl_context", None)
        loop = asyncio.get_running_loop()
        protocol = ResponseFrames(self._on_frame, self._on_lost, self.max_frame_bytes)
        # asyncio.timeout, not wait_for: on 3.11 wait_for hands a connection that completes
        # as its caller is cancelled back to that caller, which then carries on connected.
        async with asyncio.timeout(timeout_s):
            transport, _ = await self._open(loop, protocol, context)
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        self._closed_exc = None
        if self.security is not None and getattr(self.security, "sasl", False):
            try:
                await self.security.authenticate(self, timeout_s=timeout_s)
            except BaseException:
                await self.close()
                raise

    async def _open(self, loop: asyncio.AbstractEventLoop, protocol: ResponseFrames,
                    context: Any) -> tuple[asyncio.BaseTransport, Any]:
        hostname = self.host if context else None
        if self.receive_buffer_bytes == -1:
            return await loop.create_connection(lambda: protocol, self.host, self.port,
                                                ssl=context, server_hostname=hostname)
        # The receive buffer must be set before the handshake: TCP's window scale is
        # negotiated then.
        last: OSError | None = None
        for family, type_, proto, _name, address in await loop.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM):
            sock = socket.socket(family, type_, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
                sock.setblocking(False)
                await loop.sock_connect(sock, address)
            except OSError as exc:
                sock.close()
                last = exc
                continue
            except BaseException:
                sock.close()
                raise
            return await loop.create_connection(lambda: protocol, sock=sock, ssl=context,
                                                server_hostname=hostname)
        raise last or OSError(f"cannot resolve {self.host}:{self.port}")

    async def request(self, payload: Any, timeout_s: float | None = 30.0, *,
                      body: bytes | None = None,
                      decoder: Callable[[bytes | memoryview, int], Any] | None = None) -> Any:
        """Send ``payload`` (a request schema object); return the decoded response.

        ``body``: ``payload``'s encoding when the caller has it already (the controller
        encodes an UpdateMetadata body once for all brokers).  ``decoder``: reads the
        response body (frame, position) first; when it gives None, kio decodes it."""
        if not self.connected:
            raise ConnectionError(f"not connected to {self.host}:{self.port}")
        cls = type(payload)
        api_key, version = int(cls.__api_key__), int(cls.__version__)
        correlation_id = next(self._ids) & 0x7FFFFFFF
        header = codec.encode_request_header(
            api_key, version, correlation_id, self.client_id, bool(cls.__flexible__)
        )
        if body is None:
            body = codec.encode_body(payload)
        resp_cls = response_class_for(cls)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (
            fut, resp_cls, codec.response_header_flexible(api_key, resp_cls), decoder
        )
        assert self._writer is not None
        self._writer.write(_SIZE.pack(len(header) + len(body)) + header + body)
        # The task awaits the future itself, with its own timer: the answer resumes it on
        # the loop's next turn (``wait_for`` took two, its callback's and the task's, on
        # every follower fetch and controller request).
        timer = None if timeout_s is None else \
            asyncio.get_running_loop().call_later(timeout_s, _time_out, fut)
        try:
            await self._writer.drain()
            return await fut
        finally:
            if timer is not None:
                timer.cancel()
            self._pending.pop(correlation_id, None)

    def _on_frame(self, frame: bytes | memoryview) -> None:
        """A response frame (correlation id, header, body): resolve its request's future."""
        if len(frame) < 4:
            self._on_lost(ConnectionError(f"response frame of {len(frame)} bytes"))
            return
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        entry = self._pending.get(correlation_id)
        if entry is None:
            return
        fut, resp_cls, flexible, decoder = entry
        try:
            pos = codec.skip_tagged_fields(frame, 4) if flexible else 4
            result = decoder(frame, pos) if decoder is not None else None
            if result is None:
                result = codec.decode_body(resp_cls, frame, pos)
        except codec.MalformedRequest as exc:
            if not fut.done():
                fut.set_exception(ConnectionError(str(exc)))
            return
        if not fut.done():
            fut.set_result(result)

    def _on_lost(self, exc: BaseException) -> None:
        if self._closed_exc is None:
            self._fail_all(ConnectionError(f"connection to {self.host}:{self.port} lost: {exc}"))
        if self._writer is not None:
            self._writer.transport.abort()

    def _fail_all(self, exc: BaseException) -> None:
        self._closed_exc = exc
        for fut, *_rest in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()

    async def close(self) -> None:
        self._fail_all(ConnectionError("connection closed"))
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass
            self._writer = None
        self._fail_all(ConnectionError("connection closed"))


class BrokerConnections:
    """One connection per broker id, opened on first use and dropped when a request on it
    fails, so that the next request reconnects (the role of Kafka's ``NetworkClient`` for
    the inter-broker senders: transaction markers, transaction verification).

    ``endpoint(broker_id)`` gives the (host, port) to reach, or None when the broker has no
    such endpoint; ``connect`` builds the connection (tests pass a fake)."""

    def __init__(self, endpoint: Any, client_id: str, *, security: Any = None,
                 connect: Any = None, connect_timeout_s: float = 10.0) -> None:
        self._endpoint = endpoint
        self._client_id = client_id
        self._security = security
        self._connect = connect or BrokerConnection
        self._connect_timeout_s = connect_timeout_s
        self._conns: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def request(self, broker_id: int, payload: Any, timeout_s: float) -> Any:
        """Send ``payload`` to ``broker_id``; a failure (TimeoutError, ConnectionError,
        OSError) drops that broker's connection and is raised."""
        try:
            conn = await self._connection(broker_id)
            return await conn.request(payload, timeout_s=timeout_s)
        except (TimeoutError, ConnectionError, OSError):
            conn = self._conns.pop(broker_id, None)
            if conn is not None:
                await conn.close()
            raise

    async def _connection(self, broker_id: int) -> BrokerConnection:
        async with self._locks.setdefault(broker_id, asyncio.Lock()):
            conn = self._conns.get(broker_id)
            if conn is not None and conn.connected:
                return conn
            if conn is not None:
                await conn.close()
            address = self._endpoint(broker_id)
            if address is None:
                raise ConnectionError(f"broker {broker_id} has no endpoint to reach it on")
            conn = self._connect(address[0], address[1], client_id=self._client_id,
                                 security=self._security)
            await conn.connect(timeout_s=self._connect_timeout_s)
            self._conns[broker_id] = conn
            return conn

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            await conn.close()

    @classmethod
    def on_listener(cls, metadata: Any, listener: str, client_id: str, *,
                    security: Any = None, connect: Any = None) -> BrokerConnections:
        """Connections to brokers at their endpoint on ``listener``, as ``metadata`` (a
        broker's metadata cache: ``broker_on(broker_id, listener)``) knows it when each
        connection is opened."""
        def endpoint(broker_id: int) -> tuple[str, int] | None:
            found = metadata.broker_on(broker_id, listener)
            return None if found is None else (found.host, found.port)

        return cls(endpoint, client_id, security=security, connect=connect)


def encode_request_frame(payload: Any, correlation_id: int, client_id: str) -> bytes:
    """A request's frame as a broker reads it: header and body, without the size prefix."""
    cls = type(payload)
    header = codec.encode_request_header(int(cls.__api_key__), int(cls.__version__),
                                         correlation_id, client_id, bool(cls.__flexible__))
    return header + codec.encode_body(payload)


def decode_response_frame(request_cls: type, frame: bytes) -> tuple[int, Any]:
    """(correlation id, decoded response) of a response frame without its size prefix;
    raises ``ConnectionError`` for a frame that does not decode (as a broken connection)."""
    resp_cls = response_class_for(request_cls)
    (correlation_id,) = _SIZE.unpack_from(frame, 0)
    flexible = codec.response_header_flexible(int(request_cls.__api_key__), resp_cls)
    try:
        pos = codec.skip_tagged_fields(frame, 4) if flexible else 4
        return correlation_id, codec.decode_body(resp_cls, frame, pos)
    except codec.MalformedRequest as exc:
        raise ConnectionError(str(exc)) from exc


FrameCall = Callable[[bytes], Any]
"""Delivers a request frame and returns (awaitably) the response frame without its size
prefix, or raises ``ConnectionError``."""


class FrameConnection:
    """A connection whose bytes travel by ``call`` (an in-process transport, the
    simulation's network) instead of a socket: requests are encoded and responses decoded
    exactly as :class:`BrokerConnection` does, one request at a time."""

    takes_encoded_body = False

    def __init__(self, open_call: Callable[[], Any], client_id: str = "weir") -> None:
        """``open_call()``: awaitable, connects and returns the :data:`FrameCall` of this
        connection (raises ``ConnectionError`` when the peer is not there)."""
        self._open_call = open_call
        self.client_id = client_id
        self._call: FrameCall | None = None
        self._ids = itertools.count(1)

    @property
    def connected(self) -> bool:
        return self._call is not None

    async def connect(self, timeout_s: float = 10.0) -> None:
        async with asyncio.timeout(timeout_s):
            self._call = await self._open_call()

    async def request(self, payload: Any, timeout_s: float | None = 30.0, **_: Any) -> Any:
        if self._call is None:
            raise ConnectionError("not connected")
        correlation_id = next(self._ids) & 0x7FFFFFFF
        frame = encode_request_frame(payload, correlation_id, self.client_id)
        try:
            async with asyncio.timeout(timeout_s):
                answer = await self._call(frame)
        except BaseException:
            self._call = None
            raise
        answered_id, response = decode_response_frame(type(payload), answer)
        if answered_id != correlation_id:
            self._call = None
            raise ConnectionError(f"answer to request {answered_id}, not {correlation_id}")
        return response

    async def close(self) -> None:
        self._call = None

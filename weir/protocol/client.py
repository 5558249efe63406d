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
import struct
from functools import cache
from typing import Any

from kio.index import load_response_schema

from weir.asyncutil import cancel_and_wait
from weir.protocol import codec

_SIZE = struct.Struct(">i")


@cache
def response_class_for(request_cls: type) -> type:
    api_key = int(request_cls.__api_key__)
    version = int(request_cls.__version__)
    if request_cls.__module__.startswith("kio."):
        return load_response_schema(api_key, version)
    from weir.protocol.interbroker import INTERBROKER_SCHEMAS

    return INTERBROKER_SCHEMAS[api_key][version][1]


class BrokerConnection:
    """One pipelined connection to a Kafka-protocol server."""

    takes_encoded_body = True
    """:meth:`request` takes the payload's encoding (``body=``)."""

    def __init__(self, host: str, port: int, client_id: str = "weir",
                 max_frame_bytes: int = 512 * 1024 * 1024, security: Any = None) -> None:
        self.host = host
        self.security = security
        self.port = port
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[asyncio.Future, type, bool]] = {}
        self._ids = itertools.count(1)
        self._read_task: asyncio.Task | None = None
        self._closed_exc: BaseException | None = None

    @property
    def connected(self) -> bool:
        return self._writer is not None and self._closed_exc is None

    async def connect(self, timeout_s: float = 10.0) -> None:
        context = getattr(self.security, "ssl_context", None)
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, ssl=context,
                                    server_hostname=self.host if context else None),
            timeout_s
        )
        self._closed_exc = None
        self._read_task = asyncio.create_task(self._read_loop())
        if self.security is not None and getattr(self.security, "sasl", False):
            try:
                await self.security.authenticate(self, timeout_s=timeout_s)
            except BaseException:
                await self.close()
                raise

    async def request(self, payload: Any, timeout_s: float | None = 30.0, *,
                      body: bytes | None = None) -> Any:
        """Send ``payload`` (a request schema object); return the decoded response.

        ``body``: ``payload``'s encoding when the caller has it already (the controller
        encodes an UpdateMetadata body once for all brokers)."""
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
            fut, resp_cls, codec.response_header_flexible(api_key, resp_cls)
        )
        assert self._writer is not None
        self._writer.write(_SIZE.pack(len(header) + len(body)) + header + body)
        try:
            await self._writer.drain()
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._pending.pop(correlation_id, None)

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                (size,) = _SIZE.unpack(await self._reader.readexactly(4))
                if size < 4 or size > self.max_frame_bytes:
                    raise ConnectionError(f"bad response frame size {size}")
                frame = await self._reader.readexactly(size)
                (correlation_id,) = _SIZE.unpack_from(frame, 0)
                entry = self._pending.get(correlation_id)
                if entry is None:
                    continue
                fut, resp_cls, flexible = entry
                pos = codec.skip_tagged_fields(frame, 4) if flexible else 4
                try:
                    result = codec.decode_body(resp_cls, frame, pos)
                except codec.MalformedRequest as exc:
                    if not fut.done():
                        fut.set_exception(ConnectionError(str(exc)))
                    continue
                if not fut.done():
                    fut.set_result(result)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            self._fail_all(ConnectionError(f"connection to {self.host}:{self.port} lost: {exc}"))
        except asyncio.CancelledError:
            self._fail_all(ConnectionError("connection closed"))
            raise

    def _fail_all(self, exc: BaseException) -> None:
        self._closed_exc = exc
        for fut, _, _ in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()

    async def close(self) -> None:
        if self._read_task is not None:
            await cancel_and_wait(self._read_task)
            self._read_task = None
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

"""The socket server: frames in, responses out in request order.

Requests on a connection are handled one at a time, as Kafka does, with one exception:
consecutive Produce requests are pipelined.  Each one's appends happen before it first waits
(tasks start in arrival order and run their first step in that order), so the log sees them in
order, while their waits for replication (``acks=all``) overlap; responses are still written in
request order.  Any other request waits until everything before it has completed.

Bad input never takes the broker down: an oversized frame, an unknown API key, an unsupported
version (other than ApiVersions, which answers UNSUPPORTED_VERSION in a v0 body as Kafka
does) or an undecodable body closes that connection with a log line.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from typing import TYPE_CHECKING

from weir.asyncutil import cancel_and_wait
from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.protocol.fetch_response import FileRegion
from weir.server.context import RawResponse, RequestContext
from weir.server.handlers import REGISTRY

if TYPE_CHECKING:
    from weir.server.broker import Broker

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_PRODUCE = 0
MAX_IN_FLIGHT = 16  # requests read ahead of their responses on one connection


class CloseConnection(Exception):
    """Raised by dispatch when the connection must be closed (the reason is logged)."""


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def dispatch(self, frame: bytes, peer: str) -> bytes | list[bytes | FileRegion] | None:
        try:
            api_key, version, correlation_id = codec.parse_request_header_prefix(frame)
        except codec.MalformedRequest as exc:
            raise CloseConnection(str(exc)) from exc
        handler = REGISTRY.get(api_key)
        if handler is None:
            raise CloseConnection(f"unknown API key {api_key}")
        if not handler.supports(version):
            if api_key == codec.API_VERSIONS_KEY:
                return self._unsupported_api_versions(correlation_id)
            raise CloseConnection(
                f"unsupported version {version} of API {handler.name} "
                f"(supported {handler.min_version}-{handler.max_version})"
            )
        request_cls, response_cls = handler.schemas(version)
        try:
            header = codec.parse_request_header(frame, bool(request_cls.__flexible__))
            request = codec.decode_body(request_cls, frame, header.size)
        except codec.MalformedRequest as exc:
            raise CloseConnection(f"malformed {handler.name} v{version} request: {exc}") from exc
        ctx = RequestContext(self.broker, header, request_cls, response_cls, peer)
        response = await handler.module.handle(ctx, request)
        if response is None:
            return None
        flexible = codec.response_header_flexible(api_key, response_cls)
        if not isinstance(response, RawResponse):
            return codec.encode_response_frame(correlation_id, codec.encode_body(response),
                                               flexible)
        if isinstance(response.body, bytes):
            return codec.encode_response_frame(correlation_id, response.body, flexible)
        size = sum(c.size if isinstance(c, FileRegion) else len(c) for c in response.body)
        header = codec.encode_response_frame(correlation_id, b"", flexible)
        return [_SIZE.pack(len(header) - 4 + size) + header[4:], *response.body]

    def _unsupported_api_versions(self, correlation_id: int) -> bytes:
        from weir.server.handlers import api_versions

        _request_cls, response_cls = REGISTRY[codec.API_VERSIONS_KEY].schemas(0)
        body = codec.encode_body(
            api_versions.build_response(response_cls, ErrorCode.unsupported_version)
        )
        return codec.encode_response_frame(correlation_id, body, False)


class SocketServer:
    def __init__(self, broker: Broker, host: str, port: int, max_request_bytes: int) -> None:
        self.broker = broker
        self.host = host
        self.port = port
        self.max_request_bytes = max_request_bytes
        self.dispatcher = Dispatcher(broker)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._on_connection, self.host or None, self.port, limit=1 << 20, reuse_address=True
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info("listening on %s:%d", self.host or "0.0.0.0", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        await cancel_and_wait(*self._connections)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _on_connection(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        try:
            await self._serve(reader, writer, peer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", peer, exc)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("unexpected error on connection from %s; closing it", peer)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     peer: str) -> None:
        conn = _Pipeline(writer, peer)
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if size < 0 or size > self.max_request_bytes:
                    raise CloseConnection(
                        f"request of {size} bytes exceeds socket.request.max.bytes="
                        f"{self.max_request_bytes}"
                    )
                frame = await reader.readexactly(size)
                api_key = struct.unpack_from(">h", frame, 0)[0] if size >= 2 else -1
                if api_key != _PRODUCE or not conn.only_produce_in_flight():
                    await conn.wait_until(lambda: not conn.in_flight)
                await conn.wait_until(lambda: len(conn.in_flight) < MAX_IN_FLIGHT)
                conn.start(api_key, self.dispatcher.dispatch(frame, peer))
        finally:
            await conn.close()


class _Pipeline:
    """Requests of one connection in flight, and the task writing their responses in order."""

    def __init__(self, writer: asyncio.StreamWriter, peer: str) -> None:
        self.writer = writer
        self.peer = peer
        self.in_flight: deque[tuple[int, asyncio.Task]] = deque()
        self._queued = asyncio.Event()
        self._progress = asyncio.Event()
        self._responder = asyncio.create_task(self._respond())

    def only_produce_in_flight(self) -> bool:
        return all(key == _PRODUCE for key, _ in self.in_flight)

    def start(self, api_key: int, coro) -> None:
        self.in_flight.append((api_key, asyncio.create_task(coro)))
        self._queued.set()

    async def wait_until(self, predicate) -> None:
        while not predicate():
            if self._responder.done():
                raise ConnectionError("connection closed")
            self._progress.clear()
            progress = asyncio.ensure_future(self._progress.wait())
            await asyncio.wait([progress, self._responder], return_when=asyncio.FIRST_COMPLETED)
            progress.cancel()

    async def _respond(self) -> None:
        try:
            await self._respond_in_order()
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("unexpected error on connection from %s; closing it", self.peer)
        # Closing the transport also ends the reading side blocked on the socket.
        self.writer.close()

    async def _respond_in_order(self) -> None:
        while True:
            if not self.in_flight:
                self._queued.clear()
                await self._queued.wait()
                continue
            response = await self.in_flight[0][1]
            self.in_flight.popleft()
            if isinstance(response, list):
                await self._send_chunks(response)
            elif response is not None:
                self.writer.write(response)
            if self.writer.transport.get_write_buffer_size() > (1 << 20):
                await self.writer.drain()
            self._progress.set()

    async def _send_chunks(self, chunks: list[bytes | FileRegion]) -> None:
        """Bytes are written; file regions go from the page cache to the socket (sendfile)."""
        loop = asyncio.get_running_loop()
        for chunk in chunks:
            if not isinstance(chunk, FileRegion):
                self.writer.write(chunk)
                continue
            try:
                with open(chunk.path, "rb") as f:  # noqa: ASYNC230 - storage I/O is synchronous by design
                    sent = await loop.sendfile(self.writer.transport, f, chunk.position,
                                               chunk.size)
            except FileNotFoundError as exc:  # a segment deleted since the read
                raise ConnectionError(f"segment {chunk.path} is gone") from exc
            except RuntimeError as exc:  # asyncio: "Transport is closing" (the peer left)
                raise ConnectionError(str(exc)) from exc
            if sent != chunk.size:
                # The log was truncated under the read: the frame cannot be completed.
                raise ConnectionError(f"sent {sent} of {chunk.size} bytes of {chunk.path}")

    async def close(self) -> None:
        await cancel_and_wait(self._responder, *(task for _, task in self.in_flight))

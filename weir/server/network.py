"""The socket server: frames in, one request at a time per connection, responses out in order.

Bad input never takes the broker down: an oversized frame, an unknown API key, an unsupported
version (other than ApiVersions, which answers UNSUPPORTED_VERSION in a v0 body as Kafka
does) or an undecodable body closes that connection with a log line.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING

from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.server.context import RequestContext
from weir.server.handlers import REGISTRY

if TYPE_CHECKING:
    from weir.server.broker import Broker

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")


class CloseConnection(Exception):
    """Raised by dispatch when the connection must be closed (the reason is logged)."""


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def dispatch(self, frame: bytes, peer: str) -> bytes | None:
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
        body = codec.encode_body(response)
        return codec.encode_response_frame(
            correlation_id, body, codec.response_header_flexible(api_key, response_cls)
        )

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
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
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
        while True:
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            if size < 0 or size > self.max_request_bytes:
                raise CloseConnection(
                    f"request of {size} bytes exceeds socket.request.max.bytes="
                    f"{self.max_request_bytes}"
                )
            frame = await reader.readexactly(size)
            response = await self.dispatcher.dispatch(frame, peer)
            if response is not None:
                writer.write(response)
                if writer.transport.get_write_buffer_size() > (1 << 20):
                    await writer.drain()

"""The socket server: frames in, responses out in request order.

Requests on a connection are handled one at a time, as Kafka does, with one exception:
consecutive requests of a pipelined API (a handler module's ``PIPELINED``: Produce) are
handled without waiting for the responses before them.  Each one's first stage (the
handler call: a Produce's append) runs in arrival order (on the connection's task, or as
the first step of tasks started in that order), so the log sees them in order, while their
second stages (the waits for replication, ``acks=all``) overlap; responses are still written
in request order.  A pipelined request with nothing ahead of it has its first stage run on
the connection's task: one the handler answers at once is written in order with no task of
its own.  Any other request waits until everything before it has completed, then is
handled as a task (see :class:`Dispatcher` and :mod:`weir.server.handlers` for the
contract).

Frames are cut from a connection's bytes by :class:`weir.server.frames.FrameProtocol` (the
size checked against the limits below before the body is read).

Bad input never takes the broker down: an oversized frame, an unknown API key, an unsupported
version (other than ApiVersions, which answers UNSUPPORTED_VERSION in a v0 body as Kafka
does) or an undecodable body closes that connection with a log line.

Resource limits, with Kafka's keys and meaning (``kafka.network.SocketServer``):

- ``socket.request.max.bytes``: a larger frame closes the connection before it is read.
- ``max.connections``: when this many connections are open the acceptor waits for one to
  close (KIP-402); the new connection waits in the listen backlog.
- ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, ``host:count,...``):
  a connection over its address's limit is closed at once.
- ``connections.max.idle.ms``: a connection with no request in flight that has not completed
  a request for this long is closed (Kafka's ``Selector`` idle expiry).
- ``queued.max.requests``: requests read but not yet handled, across all connections; at the
  limit, connections stop reading. As in Kafka, a request parked in a purgatory (a produce
  waiting for replication, a long-poll fetch, a JoinGroup waiting for its rebalance) is no
  longer queued: it releases its place (:func:`weir.asyncutil.parked`).
- ``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes`` (102400 each, -1: the OS's
  autotuned size): SO_SNDBUF of every accepted socket and SO_RCVBUF of the listening socket,
  which accepted sockets inherit (Kafka's ``Acceptor``).
- On one connection at most ``MAX_IN_FLIGHT`` requests are read ahead of their responses, and
  a client that does not read its responses stops being read once 1 MiB of them is buffered.

One server per listener, each with its security protocol (``weir.security.listeners``): TLS
is negotiated in the connection's own task (a slow handshake never holds up accepting), and
on a SASL listener each request's API key is checked against the connection's
authentication state (``weir.security.session``) before its body is decoded: until
authentication completes only ApiVersions, SaslHandshake and SaslAuthenticate are handled,
anything else closes the connection, and frames are bounded by
``sasl.server.max.receive.size``.  The principal of the connection (SASL user, client
certificate DN, or ANONYMOUS) is in every request's context.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import struct
import time
import types
from collections import Counter, deque
from collections.abc import Awaitable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from weir.asyncutil import cancel_and_wait, request_slot
from weir.config import parse_ip_overrides
from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.protocol.fetch_response import FileRegion
from weir.security.listeners import ListenerSecurity
from weir.security.session import ConnectionSecurity, Stage
from weir.security.tls import ssl_principal
from weir.server import event_loop
from weir.server.context import RawResponse, RequestContext
from weir.server.direct_send import send_direct
from weir.server.frames import FrameProtocol
from weir.server.handlers import REGISTRY
from weir.server.sasl_v0 import answer_bare_token

if TYPE_CHECKING:
    from weir.server.context import BrokerServices

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")
_COROUTINE = types.CoroutineType  # a request's second stage (Dispatcher.begin)
# The APIs whose consecutive requests on a connection are pipelined (handlers' PIPELINED).
_PIPELINED = frozenset(key for key, api in REGISTRY.items() if api.pipelined)
MAX_IN_FLIGHT = 16  # requests read ahead of their responses on one connection
# (api key, version) -> (handler, request class, response class, flexible request header):
# what every request looks up, for the versions the handlers support.
_APIS: dict[tuple[int, int], tuple[Any, type, type, bool]] = {}


class ListenerBindError(OSError):
    """A listener's address could not be bound (in use, not an address of this host)."""


class CloseConnection(Exception):
    """Raised by dispatch when the connection must be closed (the reason is logged)."""


Framed = bytes | list[bytes | FileRegion] | None
"""A framed response: bytes, or chunks of bytes and file regions (sendfile); None when the
request gets no response (a Produce with ``acks=0``)."""


class Dispatcher:
    """Decodes a request, runs its handler and frames the response: the handler contract's
    two stages (:mod:`weir.server.handlers`) seen from the socket server.

    - :meth:`begin`, the first stage: decode the frame and call the handler.  It gives the
      framed response when the handler answered at once (a Produce with ``acks`` 0 or 1,
      or ``acks=all`` replicated already), else a coroutine that finishes the request and
      returns its framed response (every ``async def`` handler, a Produce waiting for its
      followers).  The socket server calls it on the connection's task for a pipelined
      request with nothing ahead of it, and runs the coroutine it may give as a task.
    - :meth:`dispatch`: both stages, as a coroutine: the task of any other request, and
      what a caller without a connection (a bare SASL token, the simulation) uses.
    """

    def __init__(self, services: BrokerServices) -> None:
        self.services = services

    async def dispatch(self, frame: bytes | memoryview, peer: str,
                       security: ConnectionSecurity | None = None) -> Framed:
        answer = self.begin(frame, peer, security)
        if type(answer) is _COROUTINE:
            return await answer
        return answer

    def begin(self, frame: bytes | memoryview, peer: str,
              security: ConnectionSecurity | None = None
              ) -> Framed | Coroutine[Any, Any, Framed]:
        """The first stage (see the class docstring).  Raises :class:`CloseConnection` on
        bad input.

        A large frame comes as a read-only ``memoryview`` (``FrameProtocol``): an API's
        hand decoder reads it as it is (the Produce decoder copies each partition's
        records out once); kio's decoder gets ``bytes``."""
        try:
            api_key, version, correlation_id = codec.parse_request_header_prefix(frame)
        except codec.MalformedRequest as exc:
            raise CloseConnection(str(exc)) from exc
        if security is not None:
            refusal = security.refusal(api_key)
            if refusal is not None:  # Kafka's SaslServerAuthenticator: nothing else before auth
                raise CloseConnection(refusal)
        api = _APIS.get((api_key, version))
        if api is None:
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
            api = _APIS[(api_key, version)] = (handler, request_cls, response_cls,
                                               bool(request_cls.__flexible__))
        handler, request_cls, response_cls, flexible = api
        try:
            header = codec.parse_request_header(frame, flexible)
            request = None
            decode_request = handler.decode_request
            if decode_request is not None:  # a hot path read by hand, kio for the unusual
                request = decode_request(frame, header.size, version)
            if request is None:
                request = codec.decode_body(
                    request_cls, frame if type(frame) is bytes else bytes(frame), header.size)
        except codec.MalformedRequest as exc:
            raise CloseConnection(f"malformed {handler.name} v{version} request: {exc}") from exc
        ctx = RequestContext(self.services, header, request_cls, response_cls, peer)
        if security is not None:
            ctx.principal = security.principal
            ctx.listener = security.listener.name
            ctx.security = security
        answer = handler.handle(ctx, request)
        t = type(answer)
        if t is _COROUTINE or (t is not RawResponse and answer is not None
                               and inspect.isawaitable(answer)):
            return self._frame_later(handler.api_key, ctx, answer)
        return self._frame(handler.api_key, ctx, answer)

    async def _frame_later(self, api_key: int, ctx: RequestContext,
                           answer: Awaitable[Any]) -> Framed:
        return self._frame(api_key, ctx, await answer)

    @staticmethod
    def _frame(api_key: int, ctx: RequestContext, response: Any) -> Framed:
        if response is None:
            return None
        correlation_id = ctx.header.correlation_id
        flexible = codec.response_header_flexible(api_key, ctx.response_cls)
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


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The socket server's limits (Kafka's keys; see the module docstring)."""

    max_request_bytes: int = 104857600
    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    idle_ms: int = 600000
    queued_max_requests: int = 500
    # SO_SNDBUF of each accepted socket and SO_RCVBUF of the listening one, which accepted
    # sockets inherit (Kafka's Acceptor); -1: the OS's own (autotuned).  Read at start.
    send_buffer_bytes: int = -1
    receive_buffer_bytes: int = -1

    @classmethod
    def from_config(cls, config: Any) -> ConnectionLimits:
        return cls(
            max_request_bytes=config.socket_request_max_bytes,
            max_connections=config.max_connections,
            max_connections_per_ip=config.max_connections_per_ip,
            per_ip_overrides=parse_ip_overrides(config.max_connections_per_ip_overrides),
            idle_ms=config.connections_max_idle_ms,
            queued_max_requests=config.queued_max_requests,
            send_buffer_bytes=config.socket_send_buffer_bytes,
            receive_buffer_bytes=config.socket_receive_buffer_bytes,
        )

    def per_ip(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)


class RequestQueue:
    """``queued.max.requests``: places for requests read and not yet handled or parked."""

    def __init__(self, capacity: int) -> None:
        self._free = asyncio.Semaphore(capacity)

    async def acquire(self):
        await self._free.acquire()
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._free.release()

        return release


class SocketServer:
    def __init__(self, services: BrokerServices, host: str, port: int,
                 limits: ConnectionLimits | None = None,
                 security: ListenerSecurity | None = None) -> None:
        self.services = services
        self.security = security or ListenerSecurity.plaintext()
        self.host = host
        self.port = port
        self.limits = limits or ConnectionLimits()
        self.max_request_bytes = self.limits.max_request_bytes
        self.dispatcher = Dispatcher(services)
        self.queue = RequestQueue(self.limits.queued_max_requests)
        self._sock: socket.socket | None = None
        self._acceptor: asyncio.Task | None = None
        self._reaper: asyncio.Task | None = None
        self._connections: dict[asyncio.Task, _Pipeline | None] = {}
        self._per_ip: Counter[str] = Counter()
        self._slot_freed = asyncio.Event()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(self.host or None, self.port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
        family, type_, proto, _name, address = infos[0]
        sock = socket.socket(family, type_, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            if self.limits.receive_buffer_bytes != -1:  # before listen: the window scale
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                                self.limits.receive_buffer_bytes)
            sock.bind(address)
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            # Kafka's SocketServer: "Socket server failed to bind to host:port: <reason>."
            raise ListenerBindError(
                f"Socket server failed to bind to {self.host or '0.0.0.0'}:{self.port}: "
                f"{exc.strerror or exc}.") from exc
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._acceptor = asyncio.create_task(self._accept_loop(), name="acceptor")
        self._reaper = asyncio.create_task(self._reap_idle(), name="idle-reaper")
        log.info("listening on %s:%d (%s, %s)", self.host or "0.0.0.0", self.port,
                 self.security.name, self.security.protocol)

    async def stop(self) -> None:
        await cancel_and_wait(self._acceptor, self._reaper)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        await cancel_and_wait(*self._connections)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def update_limits(self, limits: ConnectionLimits) -> None:
        """New connection limits from a dynamic broker config (Kafka's SocketServer
        .reconfigure): they apply to the next accept; a raised ``max.connections`` wakes an
        acceptor waiting for a free slot."""
        self.limits = limits
        self._slot_freed.set()

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        while True:
            while len(self._connections) >= self.limits.max_connections:
                self._slot_freed.clear()
                await self._slot_freed.wait()  # KIP-402: accepting waits for a free slot
            client, address = await loop.sock_accept(self._sock)
            ip = address[0]
            if self._per_ip[ip] >= self.limits.per_ip(ip):
                log.warning("closing connection from %s: max.connections.per.ip=%d reached",
                            ip, self.limits.per_ip(ip))
                client.close()
                continue
            self._per_ip[ip] += 1
            if self.limits.send_buffer_bytes != -1:
                try:
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF,
                                      self.limits.send_buffer_bytes)
                except OSError:  # reset before we got to it: the connection fails later
                    pass
            task = asyncio.create_task(self._on_connection(client, address))
            self._connections[task] = None

    async def _reap_idle(self) -> None:
        """Kafka's ``Selector`` idle expiry: close connections idle longer than the limit."""
        idle_s = self.limits.idle_ms / 1000
        if idle_s < 0:
            return
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.05), 30))
            now = time.monotonic()
            for task, conn in list(self._connections.items()):
                if conn is not None and not conn.in_flight and now - conn.last_active > idle_s:
                    log.info("closing connection from %s: idle for more than "
                             "connections.max.idle.ms=%d", conn.peer, self.limits.idle_ms)
                    task.cancel()

    async def _open(self, client: socket.socket, peer: str, security: ConnectionSecurity
                    ) -> tuple[FrameProtocol, asyncio.StreamWriter] | None:
        """The connection's streams, after the TLS handshake on an SSL listener (None: the
        handshake failed, logged)."""
        loop = asyncio.get_running_loop()

        def check_size(size: int) -> None:
            limit = security.max_frame(self.max_request_bytes)
            if size < 0 or size > limit:
                key = ("socket.request.max.bytes" if limit == self.max_request_bytes
                       else "sasl.server.max.receive.size")
                raise CloseConnection(f"request of {size} bytes exceeds {key}={limit}")

        protocol = FrameProtocol(check_size)
        context = self.security.ssl_context
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, client, ssl=context,
                ssl_handshake_timeout=10.0 if context is not None else None)
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            log.warning("dropping connection from %s on listener %s: %s", peer,
                        self.security.name, exc)
            client.close()
            return None
        return protocol, asyncio.StreamWriter(transport, protocol, None, loop)

    async def _on_connection(self, client: socket.socket, address: Any) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = f"{address[0]}:{address[1]}"
        writer = None
        try:
            security = ConnectionSecurity(self.security)
            streams = await self._open(client, peer, security)
            if streams is None:
                return
            reader, writer = streams
            await self._serve(reader, writer, peer, task, security)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", peer, exc)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("unexpected error on connection from %s; closing it", peer)
        finally:
            self._connections.pop(task, None)
            self._per_ip[address[0]] -= 1
            if self._per_ip[address[0]] <= 0:
                del self._per_ip[address[0]]
            self._slot_freed.set()
            if writer is not None:
                writer.close()

    async def _serve(self, reader: FrameProtocol, writer: asyncio.StreamWriter,
                     peer: str, task: asyncio.Task, security: ConnectionSecurity) -> None:
        if self.security.uses_tls and not self.security.sasl:  # SSL: the certificate's DN
            security.principal = ssl_principal(writer.get_extra_info("ssl_object"),
                                               self.security.principal_mapper)
        conn = _Pipeline(writer, peer, security)
        self._connections[task] = conn
        try:
            while True:
                frame = reader.next_frame()
                if frame is None:
                    frame = await reader.read_frame()
                conn.last_active = time.monotonic()
                if security.bare_tokens and security.stage is Stage.AUTHENTICATE:
                    await self._bare_sasl_token(frame, peer, security, conn)
                    continue
                size = len(frame)
                api_key = _API_KEY.unpack_from(frame, 0)[0] if size >= 2 else -1
                pipelined = api_key in _PIPELINED
                begun = None
                if pipelined and not conn.in_flight:
                    # Nothing ahead of it: its first stage runs right here (arrival order);
                    # one answered at once is written in order with no task of its own.
                    answer = self.dispatcher.begin(frame, peer, security)
                    if type(answer) is not _COROUTINE:
                        if type(answer) is not bytes or not conn.hold(answer):
                            await conn.send_now(None if type(answer) is bytes else answer)
                        continue
                    begun = answer  # its second stage goes on as a task
                elif not pipelined or not conn.only_pipelined_in_flight():
                    # Everything before it completes first; then all of it runs as a task
                    # once it has a place in the request queue.
                    await conn.wait_until(lambda: not conn.in_flight)
                try:
                    await conn.wait_until(lambda: len(conn.in_flight) < MAX_IN_FLIGHT)
                    release = await self.queue.acquire()
                except BaseException:
                    if begun is not None:
                        begun.close()  # the connection is going: nobody waits for it
                    raise
                conn.start(pipelined, self._handle(frame, peer, release, security, begun))
        finally:
            conn.flush()
            await conn.close()

    async def _bare_sasl_token(self, frame: bytes | memoryview, peer: str,
                               security: ConnectionSecurity, conn: _Pipeline) -> None:
        """A SASL token after SaslHandshake v0, answered bare (:mod:`weir.server.sasl_v0`);
        a failure closes the connection after ``connection.failed.authentication.delay.ms``."""
        await conn.wait_until(lambda: not conn.in_flight)  # the handshake's answer first
        answer = await answer_bare_token(
            frame, lambda framed: self.dispatcher.dispatch(framed, peer, security))
        if isinstance(answer, str):
            await asyncio.sleep(security.listener.failed_authentication_delay_ms / 1000)
            raise CloseConnection(f"authentication failed: {security.failure or answer}")
        conn.writer.write(answer)
        await conn.writer.drain()

    async def _handle(self, frame: bytes | memoryview, peer: str, release,
                      security: ConnectionSecurity,
                      begun: Coroutine[Any, Any, Framed] | None = None) -> Framed:
        """The request's task: all of it (``begun`` None: a pipelined request behind
        others, its first stage still in arrival order, as tasks start in that order), or
        the second stage of one begun on the connection's task."""
        token = request_slot.set(release)
        try:
            if begun is None:
                return await self.dispatcher.dispatch(frame, peer, security)
            return await begun
        finally:
            release()
            request_slot.reset(token)


class _Pipeline:
    """Requests of one connection in flight, and the task writing their responses in order."""

    def __init__(self, writer: asyncio.StreamWriter, peer: str,
                 security: ConnectionSecurity | None = None) -> None:
        self.writer = writer
        self.peer = peer
        self.security = security
        self.last_active = time.monotonic()  # last request read or response written
        self.in_flight: deque[tuple[bool, asyncio.Task]] = deque()  # (pipelined, task)
        self._held: list[bytes] = []  # responses of inline requests not yet written
        self._held_bytes = 0
        self._queued = asyncio.Event()
        self._progress = asyncio.Event()
        self._responder = asyncio.create_task(self._respond())

    def only_pipelined_in_flight(self) -> bool:
        return all(pipelined for pipelined, _ in self.in_flight)

    async def send_now(self, response: bytes | list[bytes | FileRegion] | None) -> None:
        """Write the response of a request handled inline; only when nothing is in flight,
        so responses stay in request order.

        Responses in bytes are held until the connection's task next waits (for more bytes
        from the client), then written together: a client that pipelines requests (up to
        ``max.in.flight.requests.per.connection``) gets the answers to all it had sent in
        one write, i.e. one wake-up instead of one per request.  Nothing waits for it:
        what was read is answered before the task waits for the next bytes."""
        assert not self.in_flight
        if isinstance(response, list):
            self.flush()
            await self._send_chunks(response)
        elif response is not None:
            self.hold(response)
        if self.writer.transport.get_write_buffer_size() > (1 << 20):
            await self.writer.drain()
        self.last_active = time.monotonic()

    def hold(self, response: bytes) -> bool:
        """:meth:`send_now` of bytes, without a coroutine: False when more than 1 MiB
        waits to be written (then the caller awaits ``send_now(None)``, the drain)."""
        held = self._held
        held.append(response)
        self._held_bytes += len(response)
        if self._held_bytes > (1 << 20):
            self.flush()
        elif len(held) == 1:
            asyncio.get_running_loop().call_soon(self.flush)
        self.last_active = time.monotonic()
        return self.writer.transport.get_write_buffer_size() <= (1 << 20)

    def flush(self) -> None:
        """Write the responses :meth:`send_now` holds (request order: before any other)."""
        if not self._held:
            return
        data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
        self._held.clear()
        self._held_bytes = 0
        if not self.writer.is_closing():
            self.writer.write(data)

    def start(self, pipelined: bool, coro) -> None:
        self.flush()
        self.in_flight.append((pipelined, asyncio.create_task(coro)))
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
            self.last_active = time.monotonic()
            self._progress.set()
            if self.security is not None and self.security.failure is not None:
                # Kafka's delayed close after a failed authentication
                # (connection.failed.authentication.delay.ms): the response goes out, the
                # connection closes later, so a client cannot retry passwords quickly.
                await self.writer.drain()
                await asyncio.sleep(self.security.listener.failed_authentication_delay_ms / 1000)
                raise CloseConnection(f"authentication failed: {self.security.failure}")

    async def _send_chunks(self, chunks: list[bytes | FileRegion]) -> None:
        """Bytes are written; file regions go from the page cache to the socket (sendfile).
        On a TLS connection the kernel cannot encrypt, so a region is read and written in
        1 MiB slices (as Kafka's SslTransportLayer copies through its buffers) instead of
        asyncio's sendfile fallback, which reads in a thread block by block; so is the rest
        of a region the socket did not take at once on uvloop, which has no sendfile."""
        loop = asyncio.get_running_loop()
        tls = self.writer.get_extra_info("ssl_object") is not None
        if not tls:
            chunks = send_direct(self.writer.transport, chunks)
        for chunk in chunks:
            if not isinstance(chunk, FileRegion):
                self.writer.write(chunk)
                continue
            if tls or not event_loop.native_sendfile(loop):  # uvloop has no loop.sendfile
                await self._write_region(chunk)
                continue
            try:
                with open(chunk.path, "rb") as f:  # noqa: ASYNC230 - storage I/O is synchronous by design
                    _check_same_file(f, chunk)
                    sent = await loop.sendfile(self.writer.transport, f, chunk.position,
                                               chunk.size)
            except FileNotFoundError as exc:  # a segment deleted since the read
                raise ConnectionError(f"segment {chunk.path} is gone") from exc
            except RuntimeError as exc:  # asyncio: "Transport is closing" (the peer left)
                raise ConnectionError(str(exc)) from exc
            if sent != chunk.size:
                # The log was truncated under the read: the frame cannot be completed.
                raise ConnectionError(f"sent {sent} of {chunk.size} bytes of {chunk.path}")

    async def _write_region(self, chunk: FileRegion) -> None:
        """A file region on a TLS connection, or on a loop without ``sendfile`` (uvloop), 1 MiB
        at a time (at most that much buffered)."""
        try:
            with open(chunk.path, "rb") as f:  # noqa: ASYNC230 - storage I/O is synchronous by design
                _check_same_file(f, chunk)
                done = 0
                while done < chunk.size:
                    data = os.pread(f.fileno(), min(chunk.size - done, 1 << 20),
                                    chunk.position + done)
                    if not data:  # the log was truncated under the read
                        raise ConnectionError(
                            f"read {done} of {chunk.size} bytes of {chunk.path}")
                    self.writer.write(data)
                    done += len(data)
                    if self.writer.transport.get_write_buffer_size() > (1 << 20):
                        await self.writer.drain()
        except FileNotFoundError as exc:  # a segment deleted since the read
            raise ConnectionError(f"segment {chunk.path} is gone") from exc

    async def close(self) -> None:
        await cancel_and_wait(self._responder, *(task for _, task in self.in_flight))


def _check_same_file(f, chunk: FileRegion) -> None:
    """The region's segment was replaced by a cleaned one since the read (log compaction):
    its bytes are elsewhere now; the frame cannot be completed."""
    if chunk.inode and os.fstat(f.fileno()).st_ino != chunk.inode:
        raise ConnectionError(f"segment {chunk.path} was replaced by a cleaned segment")

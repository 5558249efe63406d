"""Request frames cut from a connection's bytes (Kafka's ``NetworkReceive``).

Used by :mod:`weir.server.network` in place of an ``asyncio.StreamReader`` read twice per
request (the 4-byte size, then the body).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

from weir.protocol.framing import LARGE, FrameReceiver, WriterFlowControl

__all__ = ["LARGE", "FrameProtocol"]


class FrameProtocol(WriterFlowControl, FrameReceiver):
    """The connection's bytes cut into request frames (a 4-byte size, then that many bytes),
    as Kafka's ``NetworkReceive`` does, instead of a ``StreamReader`` read twice per request.

    A ``BufferedProtocol`` (:class:`weir.protocol.framing.FrameReceiver`): small frames come
    out of a shared 64 KiB buffer as ``bytes``, copied once (several pipelined requests out
    of the bytes of one ``recv``); a frame above :data:`LARGE` (a Produce of big batches) is
    received into a buffer of its exact size and handed on as a read-only ``memoryview``.
    Before, every byte was copied three times on the way (``recv``'s new ``bytes``, the
    connection's buffer, the frame cut out of it).

    ``check_size`` is called with each frame's size as soon as its 4 bytes are in, before
    anything is allocated for the body or waited for; what it raises is raised by
    :meth:`next_frame` / :meth:`read_frame` in the frame's turn (the frames before it are
    still handed on), and reading stops.  Reading pauses while more than ``_HIGH`` bytes of
    whole frames wait to be taken, and resumes once at most ``_LOW`` are left
    (``StreamReader``'s flow control, at twice and once its limit): a frame larger than the
    threshold is read to its end.  The connection's ``StreamWriter`` gets its flow control
    from :class:`~weir.protocol.framing.WriterFlowControl` (no ``StreamReader``: nothing
    but frames is read)."""

    _HIGH = 2 << 20
    _LOW = 1 << 20

    def __init__(self, check_size: Callable[[int], None]) -> None:
        self._init_frames()
        self._init_flow_control()
        self._check_size = check_size
        # Whole frames not yet taken, and at most one refusal (an exception) after them.
        self._frames: collections.deque[bytes | memoryview | BaseException] = (
            collections.deque())
        self._queued = 0  # bytes of the whole frames waiting
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._error: BaseException | None = None
        self._reading_transport: asyncio.BaseTransport | None = None
        self._over_ssl = False
        self._reading_paused = False  # (writing has its own flag: WriterFlowControl)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._reading_transport = transport
        self._over_ssl = transport.get_extra_info("sslcontext") is not None

    # -- the transport's side -----------------------------------------------------------

    def _frame_size(self, size: int) -> bool:
        try:
            self._check_size(size)
            if size < 0:
                raise ConnectionError(f"negative request frame size {size}")
        except Exception as exc:  # noqa: BLE001 - handed to the reader in its turn
            self._frames.append(exc)
            self._pause(True)
            self._wake()
            return False
        return True

    def _frame(self, frame: bytes | memoryview) -> None:
        self._frames.append(frame)
        self._queued += len(frame)
        if self._queued > self._HIGH and not self._reading_paused:
            self._pause(True)
        self._wake()

    def eof_received(self) -> bool:
        """The client closed its side: the frames before still get their answers (the
        transport is kept open for them, as ``StreamReaderProtocol`` does, except over TLS,
        which cannot half-close)."""
        self._ended = True
        self._wake()
        return not self._over_ssl

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        self._error = exc
        self._wake()
        self._flow_control_lost(exc)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _pause(self, pause: bool) -> None:
        transport = self._reading_transport
        if transport is None or transport.is_closing():  # type: ignore[attr-defined]
            return
        try:
            if pause:
                transport.pause_reading()  # type: ignore[attr-defined]
            else:
                transport.resume_reading()  # type: ignore[attr-defined]
        except (AttributeError, RuntimeError):
            return
        self._reading_paused = pause

    # -- the reader's side ------------------------------------------------------------

    def next_frame(self) -> bytes | memoryview | None:
        """The next whole frame, or None while there is none (raises what ``check_size``
        raised, in its turn)."""
        frames = self._frames
        if not frames:
            return None
        frame = frames[0]
        if isinstance(frame, BaseException):
            raise frame
        frames.popleft()
        self._queued -= len(frame)
        if self._reading_paused and self._queued <= self._LOW and not self._stopped:
            self._pause(False)
        return frame

    async def read_frame(self) -> bytes | memoryview:
        """The next frame, waiting for its bytes; at the end of the stream with a frame
        incomplete, the connection's error or ``IncompleteReadError``."""
        while True:
            frame = self.next_frame()
            if frame is not None:
                return frame
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise asyncio.IncompleteReadError(self._partial(), None)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

"""Request frames cut from a connection's bytes (Kafka's ``NetworkReceive``).

Used by :mod:`weir.server.network` in place of an ``asyncio.StreamReader`` read twice per
request (the 4-byte size, then the body).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable

_SIZE = struct.Struct(">i")


class FrameProtocol(asyncio.StreamReaderProtocol):
    """The connection's bytes cut into request frames (a 4-byte size, then that many bytes),
    as Kafka's ``NetworkReceive`` does, instead of a ``StreamReader`` read twice per request.

    The bytes collect in one buffer; :meth:`next_frame` takes a complete frame from it with
    no await (several pipelined requests are taken one after the other from the bytes of
    one ``recv``), and :meth:`read_frame` waits for the rest of one.  The size is checked
    (``check_size`` raises) as soon as its 4 bytes are in, before the body is waited for.
    Reading pauses while more than ``_HIGH`` bytes wait with a whole frame among them, and
    resumes once at most ``_LOW`` are left (``StreamReader``'s flow control, at twice and
    once its limit).  The ``StreamReader`` given is kept for the
    ``StreamWriter`` (end of stream, errors, ``drain``); it is fed nothing else."""

    _HIGH = 2 << 20
    _LOW = 1 << 20

    def __init__(self, stream_reader: asyncio.StreamReader) -> None:
        super().__init__(stream_reader)
        self._buf = bytearray()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._error: BaseException | None = None
        self._reading_transport: asyncio.BaseTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._reading_transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        # Pause only with a whole frame waiting to be taken: a frame larger than the
        # threshold is read to its end.
        if len(buf) > self._HIGH and not self._paused \
                and len(buf) >= 4 + _SIZE.unpack_from(buf, 0)[0]:
            self._pause(True)
        self._wake()

    def eof_received(self) -> bool:
        self._ended = True
        self._wake()
        return bool(super().eof_received())

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        self._error = exc
        self._wake()
        super().connection_lost(exc)

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
        self._paused = pause

    def next_frame(self, check_size: Callable[[int], None]) -> bytes | None:
        """A complete frame from the buffer, or None while it is incomplete."""
        buf = self._buf
        if len(buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, 0)
        check_size(size)
        end = 4 + size
        if len(buf) < end:
            return None
        frame = bytes(memoryview(buf)[4:end])
        del buf[:end]
        if self._paused and len(buf) <= self._LOW:
            self._pause(False)
        return frame

    async def read_frame(self, check_size: Callable[[int], None]) -> bytes:
        """The next frame, waiting for its bytes; at the end of the stream with a frame
        incomplete, the connection's error or ``IncompleteReadError``."""
        while True:
            frame = self.next_frame(check_size)
            if frame is not None:
                return frame
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise asyncio.IncompleteReadError(bytes(self._buf), None)
            if self._paused:  # not reached in practice (paused with a whole frame in)
                self._pause(False)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

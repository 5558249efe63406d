"""Request frames cut from a connection's bytes (Kafka's ``NetworkReceive``).

Used by :mod:`weir.server.network` in place of an ``asyncio.StreamReader`` read twice per
request (the 4-byte size, then the body).
"""

from __future__ import annotations

import asyncio
import collections
import struct
from collections.abc import Callable

_SIZE = struct.Struct(">i")

LARGE = 32 * 1024
"""A frame above this size is received into a buffer of its own and handed on as a
read-only ``memoryview`` of it; smaller ones as ``bytes``."""


class FrameProtocol(asyncio.StreamReaderProtocol, asyncio.BufferedProtocol):
    """The connection's bytes cut into request frames (a 4-byte size, then that many bytes),
    as Kafka's ``NetworkReceive`` does, instead of a ``StreamReader`` read twice per request.

    A ``BufferedProtocol``: the transport receives straight into the buffer that
    :meth:`get_buffer` gives.  Small frames share one 64 KiB buffer and each is copied out of
    it once, as ``bytes`` (several pipelined requests come out of the bytes of one
    ``recv``); a frame above :data:`LARGE` (a Produce of big batches) gets a buffer of its
    exact size that the rest of it is received into, and is handed on as it is, read-only.
    Before, every byte was copied three times on the way (``recv``'s new ``bytes``, the
    connection's buffer, the frame cut out of it); now once, by the kernel, for a large
    frame, twice for a small one.

    ``check_size`` is called with each frame's size as soon as its 4 bytes are in, before
    anything is allocated for the body or waited for; what it raises is raised by
    :meth:`next_frame` / :meth:`read_frame` in the frame's turn (the frames before it are
    still handed on), and reading stops.  Reading pauses while more than ``_HIGH`` bytes of
    whole frames wait to be taken, and resumes once at most ``_LOW`` are left
    (``StreamReader``'s flow control, at twice and once its limit): a frame larger than the
    threshold is read to its end.  The ``StreamReader`` given is kept for the
    ``StreamWriter`` (end of stream, errors, ``drain``); it is fed nothing else."""

    _SMALL = 64 * 1024
    _HIGH = 2 << 20
    _LOW = 1 << 20

    def __init__(self, stream_reader: asyncio.StreamReader,
                 check_size: Callable[[int], None]) -> None:
        super().__init__(stream_reader)
        self._check_size = check_size
        self._buf = bytearray(self._SMALL)
        self._view = memoryview(self._buf)
        self._start = 0  # unread bytes of the shared buffer: [_start, _end)
        self._end = 0
        self._large: memoryview | None = None  # a large frame being received
        self._filled = 0
        # Whole frames not yet taken, and at most one refusal (an exception) after them.
        self._frames: collections.deque[bytes | memoryview | BaseException] = (
            collections.deque())
        self._queued = 0  # bytes of the whole frames waiting
        self._refused = False
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._error: BaseException | None = None
        self._reading_transport: asyncio.BaseTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._reading_transport = transport

    # -- the transport's side -----------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._large is not None:
            return self._large[self._filled:]
        if self._end == len(self._buf):  # full: the unread bytes (< one small frame) move up
            left = self._end - self._start
            self._buf[:left] = bytes(self._view[self._start:self._end])
            self._start, self._end = 0, left
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._refused:
            self._start = self._end = 0  # read before the pause took effect: dropped
            return
        if self._large is not None:
            self._filled += nbytes
            if self._filled == len(self._large):
                frame, self._large = self._large.toreadonly(), None
                self._push(frame)
            return
        self._end += nbytes
        view = self._view
        while self._end - self._start >= 4:
            start = self._start
            (size,) = _SIZE.unpack_from(view, start)
            try:
                self._check_size(size)
                if size < 0:
                    raise ConnectionError(f"negative request frame size {size}")
            except Exception as exc:  # noqa: BLE001 - handed to the reader in its turn
                self._refuse(exc)
                return
            have = self._end - start - 4
            if size > LARGE:
                frame = bytearray(size)
                got = min(have, size)
                frame[:got] = view[start + 4:start + 4 + got]
                self._start = start + 4 + got
                if got < size:  # every byte read is in the frame now
                    self._large, self._filled = memoryview(frame), got
                    self._start = self._end = 0
                    break
                self._push(memoryview(frame).toreadonly())
                continue
            if have < size:
                break
            self._start = start + 4 + size
            self._push(bytes(view[start + 4:start + 4 + size]))
        if self._start == self._end:
            self._start = self._end = 0

    def eof_received(self) -> bool:
        self._ended = True
        self._wake()
        return bool(super().eof_received())

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        self._error = exc
        self._wake()
        super().connection_lost(exc)

    def _push(self, frame: bytes | memoryview) -> None:
        self._frames.append(frame)
        self._queued += len(frame)
        if self._queued > self._HIGH and not self._paused:
            self._pause(True)
        self._wake()

    def _refuse(self, exc: BaseException) -> None:
        self._refused = True
        self._frames.append(exc)
        self._start = self._end = 0
        self._pause(True)
        self._wake()

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
        if self._paused and self._queued <= self._LOW and not self._refused:
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
                partial = (bytes(self._large[:self._filled]) if self._large is not None
                           else bytes(self._view[self._start:self._end]))
                raise asyncio.IncompleteReadError(partial, None)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

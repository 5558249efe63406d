"""Kafka frames (a 4-byte size, then that many bytes) cut from a connection's bytes as the
kernel receives them: Kafka's ``NetworkReceive``, over asyncio's ``BufferedProtocol``.

Shared by the socket server's request reader (``weir.server.frames.FrameProtocol``) and the
inter-broker client's response reader (``weir.protocol.client.ResponseFrames``), which are
plain ``BufferedProtocol``s with :class:`WriterFlowControl` for their ``StreamWriter``: not
``asyncio.Protocol``s, so that uvloop, too, receives into their buffers (it hands a protocol
that is also an ``asyncio.Protocol`` a new ``bytes`` per read, which was then copied in).
"""

from __future__ import annotations

import asyncio
import collections
import struct

_SIZE = struct.Struct(">i")

LARGE = 32 * 1024
"""A frame above this size is received into a buffer of its own and handed on as a
read-only ``memoryview`` of it; smaller ones as ``bytes``."""


class FrameReceiver(asyncio.BufferedProtocol):
    """The transport receives straight into the buffer :meth:`get_buffer` gives. Small
    frames share one 64 KiB buffer and each is copied out of it once, as ``bytes`` (the
    frames one ``recv`` brings come out one after another); a frame above :data:`LARGE`
    gets a buffer of its exact size that the rest of it is received into, and is handed on
    as it is, read-only: its bytes are copied once, by the kernel.

    A subclass calls :meth:`_init_frames` from its ``__init__`` and implements
    :meth:`_frame_size` (asked with each frame's size as soon as its 4 bytes are in, before
    anything is allocated for the body: False stops the cutting, the connection being bad)
    and :meth:`_frame` (a whole frame)."""

    _SMALL = 64 * 1024

    def _init_frames(self) -> None:
        self._buf = bytearray(self._SMALL)
        self._view = memoryview(self._buf)
        self._start = 0  # unread bytes of the shared buffer: [_start, _end)
        self._end = 0
        self._large: memoryview | None = None  # a large frame being received
        self._filled = 0
        self._stopped = False

    def _frame_size(self, size: int) -> bool:
        raise NotImplementedError

    def _frame(self, frame: bytes | memoryview) -> None:
        raise NotImplementedError

    def _partial(self) -> bytes:
        """The bytes of the frame not yet whole (for an error at the end of the stream)."""
        if self._large is not None:
            return bytes(self._large[:self._filled])
        return bytes(self._view[self._start:self._end])

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._large is not None:
            return self._large[self._filled:]
        if self._end == len(self._buf):  # full: the unread bytes (< one small frame) move up
            left = self._end - self._start
            self._buf[:left] = bytes(self._view[self._start:self._end])
            self._start, self._end = 0, left
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._stopped:
            self._start = self._end = 0  # read after the connection went bad: dropped
            return
        if self._large is not None:
            self._filled += nbytes
            if self._filled == len(self._large):
                frame, self._large = self._large.toreadonly(), None
                self._frame(frame)
            return
        self._end += nbytes
        view = self._view
        while self._end - self._start >= 4:
            start = self._start
            (size,) = _SIZE.unpack_from(view, start)
            if not self._frame_size(size):
                self._stopped = True
                self._start = self._end = 0
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
                    return
                self._frame(memoryview(frame).toreadonly())
                continue
            if have < size:
                break
            self._start = start + 4 + size
            self._frame(bytes(view[start + 4:start + 4 + size]))
        if self._start == self._end:
            self._start = self._end = 0


class WriterFlowControl:
    """What an ``asyncio.StreamWriter`` asks of its protocol (``drain``'s flow control and
    ``wait_closed``), as asyncio's ``FlowControlMixin`` gives it, for a protocol that is not
    an ``asyncio.Protocol``.  It comes first among a protocol's bases, before
    ``asyncio.BaseProtocol``'s empty ``pause_writing`` and ``resume_writing``.  Writing's
    pause is its own flag: a frame reader also pauses reading, and the two must not be
    taken for each other (they once shared one, and a connection whose reading was paused
    had ``drain`` wait for a ``resume_writing`` that never came)."""

    def _init_flow_control(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._writing_paused = False
        self._drain_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._connection_lost = False
        self._closed: asyncio.Future[None] = self._loop.create_future()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        for waiter in self._drain_waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _flow_control_lost(self, exc: BaseException | None) -> None:
        """From ``connection_lost``: drains waiting end (with ``exc``), ``wait_closed``
        returns."""
        self._connection_lost = True
        for waiter in self._drain_waiters:
            if not waiter.done():
                if exc is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    async def _drain_helper(self) -> None:
        if self._connection_lost:
            raise ConnectionResetError("Connection lost")
        if not self._writing_paused:
            return
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        try:
            await waiter
        finally:
            self._drain_waiters.remove(waiter)

    def _get_close_waiter(self, stream: object) -> asyncio.Future[None]:
        return self._closed

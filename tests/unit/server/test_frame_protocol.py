"""The socket server's frame reader: frames cut from whatever the reads deliver (fed as
asyncio's transports feed a ``BufferedProtocol``: ``get_buffer``, then ``buffer_updated``),
the size checked before the body is waited for, the end of the stream mid-frame, flow
control, large frames received into a buffer of their own."""

from __future__ import annotations

import asyncio
import struct

import pytest

from weir.server.frames import LARGE, FrameProtocol
from weir.server.network import CloseConnection


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.reading = True
        self.closing = False

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name, default=None):
        return default


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _no_limit(size: int) -> None:
    return None


def _protocol(check=_no_limit) -> tuple[FrameProtocol, _Transport]:
    protocol = FrameProtocol(check)
    transport = _Transport()
    protocol.connection_made(transport)
    return protocol, transport


def _feed(protocol: FrameProtocol, data: bytes) -> int:
    """``data`` as one read delivers it: into the buffers the protocol gives, as many as it
    takes (asyncio's ``recv_into`` loop); returns how many buffers that was."""
    buffers = 0
    while data:
        buf = protocol.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(data))
        buf[:n] = data[:n]
        protocol.buffer_updated(n)
        data = data[n:]
        buffers += 1
    return buffers


async def _pipelined_frames_in_one_read_and_a_frame_split_across_reads():
    protocol, _ = _protocol()
    data = _frame(b"one") + _frame(b"") + _frame(b"three") + _frame(b"four")[:5]
    _feed(protocol, data)
    assert protocol.next_frame() == b"one"
    assert protocol.next_frame() == b""
    assert await protocol.read_frame() == b"three"
    assert protocol.next_frame() is None
    waiting = asyncio.ensure_future(protocol.read_frame())
    await asyncio.sleep(0)
    assert not waiting.done()
    _feed(protocol, b"our")
    assert await asyncio.wait_for(waiting, 5) == b"four"
    for byte in _frame(b"byte by byte"):
        _feed(protocol, bytes([byte]))
    assert await protocol.read_frame() == b"byte by byte"


async def _an_oversized_frame_is_refused_on_its_size_alone():
    seen = []

    def limit(size: int) -> None:
        seen.append(size)
        if size > 10:
            raise CloseConnection(f"request of {size} bytes exceeds 10")

    protocol, transport = _protocol(limit)
    _feed(protocol, _frame(b"fine") + struct.pack(">i", 11))  # no body sent at all
    assert await protocol.read_frame() == b"fine"  # the frames before it are handed on
    with pytest.raises(CloseConnection):
        await asyncio.wait_for(protocol.read_frame(), 5)
    assert seen == [4, 11]
    assert not transport.reading  # nothing more is read
    with pytest.raises(CloseConnection):
        protocol.next_frame()  # and it stays refused
    protocol, _ = _protocol()
    _feed(protocol, struct.pack(">i", -1))
    with pytest.raises(ConnectionError):
        protocol.next_frame()


async def _end_of_stream_mid_frame_and_connection_errors():
    protocol, _ = _protocol()
    _feed(protocol, _frame(b"whole") + _frame(b"cut short")[:6])
    protocol.eof_received()
    assert await protocol.read_frame() == b"whole"
    with pytest.raises(asyncio.IncompleteReadError):
        await protocol.read_frame()
    protocol, _ = _protocol()
    waiting = asyncio.ensure_future(protocol.read_frame())
    await asyncio.sleep(0)
    protocol.connection_lost(ConnectionResetError("reset"))
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(waiting, 5)


async def _reading_pauses_with_whole_frames_waiting_and_not_for_one_large_frame():
    protocol, transport = _protocol()
    big = _frame(b"x" * (3 << 20))
    for at in range(0, len(big) - 1, 65536):  # all but the last byte: incomplete
        _feed(protocol, big[at:min(at + 65536, len(big) - 1)])
    assert transport.reading  # a frame larger than the threshold is read to its end
    _feed(protocol, big[-1:] + _frame(b"y" * 1000))
    assert not transport.reading  # whole frames waiting, over the threshold
    assert bytes(await protocol.read_frame()) == b"x" * (3 << 20)
    assert transport.reading  # taken: at most the low mark left
    assert await protocol.read_frame() == b"y" * 1000


async def _a_large_frame_is_received_into_its_own_buffer():
    protocol, _ = _protocol()
    body = bytes(range(256)) * 400  # 100 KiB: above LARGE
    assert len(body) > LARGE
    data = _frame(b"small") + _frame(body) + _frame(b"after")
    # One buffer for the small frame and the large one's first bytes, one for the rest of
    # the large frame (received where it stays), one for what follows.
    assert _feed(protocol, data) == 3
    assert await protocol.read_frame() == b"small"
    large = await protocol.read_frame()
    assert isinstance(large, memoryview) and large.readonly and large == body
    assert await protocol.read_frame() == b"after"
    # The same bytes a byte at a time give the same frames.
    protocol, _ = _protocol()
    for byte in data:
        _feed(protocol, bytes([byte]))
    assert [bytes(await protocol.read_frame()) for _ in range(3)] == [b"small", body, b"after"]


def test_a_large_frame_is_received_into_its_own_buffer():
    asyncio.run(_a_large_frame_is_received_into_its_own_buffer())


def test_pipelined_frames_in_one_read_and_a_frame_split_across_reads():
    asyncio.run(_pipelined_frames_in_one_read_and_a_frame_split_across_reads())


def test_an_oversized_frame_is_refused_on_its_size_alone():
    asyncio.run(_an_oversized_frame_is_refused_on_its_size_alone())


def test_end_of_stream_mid_frame_and_connection_errors():
    asyncio.run(_end_of_stream_mid_frame_and_connection_errors())


def test_reading_pauses_with_whole_frames_waiting_and_not_for_one_large_frame():
    asyncio.run(_reading_pauses_with_whole_frames_waiting_and_not_for_one_large_frame())


async def _paused_reading_is_not_paused_writing() -> None:
    protocol, transport = _protocol()
    _feed(protocol, _frame(b"x" * 1000) * 3000)  # ~3 MB of whole frames: reading pauses
    assert not transport.reading
    # The writer's flow control is apart: drain does not wait while only reading is paused,
    # and the transport may pause and resume writing meanwhile.
    await asyncio.wait_for(protocol._drain_helper(), 1)
    protocol.pause_writing()
    waiting = asyncio.ensure_future(protocol._drain_helper())
    await asyncio.sleep(0)
    assert not waiting.done()
    protocol.resume_writing()
    await asyncio.wait_for(waiting, 1)
    assert not transport.reading  # still paused for reading
    for _ in range(3000):
        await protocol.read_frame()
    assert transport.reading


def test_paused_reading_is_not_paused_writing():
    asyncio.run(_paused_reading_is_not_paused_writing())

"""The socket server's frame reader: frames cut from whatever the reads deliver, the size
checked before the body is waited for, the end of the stream mid-frame, flow control."""

from __future__ import annotations

import asyncio
import struct

import pytest

from weir.server.frames import FrameProtocol
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


def _protocol() -> tuple[FrameProtocol, _Transport]:
    protocol = FrameProtocol(asyncio.StreamReader())
    transport = _Transport()
    protocol.connection_made(transport)
    return protocol, transport


def _no_limit(size: int) -> None:
    return None


async def _pipelined_frames_in_one_read_and_a_frame_split_across_reads():
    protocol, _ = _protocol()
    data = _frame(b"one") + _frame(b"") + _frame(b"three") + _frame(b"four")[:5]
    protocol.data_received(data)
    assert protocol.next_frame(_no_limit) == b"one"
    assert protocol.next_frame(_no_limit) == b""
    assert await protocol.read_frame(_no_limit) == b"three"
    assert protocol.next_frame(_no_limit) is None
    waiting = asyncio.ensure_future(protocol.read_frame(_no_limit))
    await asyncio.sleep(0)
    assert not waiting.done()
    protocol.data_received(b"our")
    assert await asyncio.wait_for(waiting, 5) == b"four"
    for byte in _frame(b"byte by byte"):
        protocol.data_received(bytes([byte]))
    assert await protocol.read_frame(_no_limit) == b"byte by byte"


async def _an_oversized_frame_is_refused_on_its_size_alone():
    protocol, _ = _protocol()
    seen = []

    def limit(size: int) -> None:
        seen.append(size)
        if size > 10:
            raise CloseConnection(f"request of {size} bytes exceeds 10")

    protocol.data_received(struct.pack(">i", 11))  # no body sent at all
    with pytest.raises(CloseConnection):
        await asyncio.wait_for(protocol.read_frame(limit), 5)
    assert seen == [11]


async def _end_of_stream_mid_frame_and_connection_errors():
    protocol, _ = _protocol()
    protocol.data_received(_frame(b"whole") + _frame(b"cut short")[:6])
    protocol.eof_received()
    assert await protocol.read_frame(_no_limit) == b"whole"
    with pytest.raises(asyncio.IncompleteReadError):
        await protocol.read_frame(_no_limit)
    protocol, _ = _protocol()
    waiting = asyncio.ensure_future(protocol.read_frame(_no_limit))
    await asyncio.sleep(0)
    protocol.connection_lost(ConnectionResetError("reset"))
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(waiting, 5)


async def _reading_pauses_with_whole_frames_waiting_and_not_for_one_large_frame():
    protocol, transport = _protocol()
    big = _frame(b"x" * (3 << 20))
    for at in range(0, len(big) - 1, 65536):  # all but the last byte: incomplete
        protocol.data_received(big[at:min(at + 65536, len(big) - 1)])
    assert transport.reading  # a frame larger than the threshold is read to its end
    protocol.data_received(big[-1:] + _frame(b"y" * 1000))
    assert not transport.reading  # whole frames waiting, over the threshold
    assert len(await protocol.read_frame(_no_limit)) == 3 << 20
    assert transport.reading  # taken: at most the low mark left
    assert await protocol.read_frame(_no_limit) == b"y" * 1000


def test_pipelined_frames_in_one_read_and_a_frame_split_across_reads():
    asyncio.run(_pipelined_frames_in_one_read_and_a_frame_split_across_reads())


def test_an_oversized_frame_is_refused_on_its_size_alone():
    asyncio.run(_an_oversized_frame_is_refused_on_its_size_alone())


def test_end_of_stream_mid_frame_and_connection_errors():
    asyncio.run(_end_of_stream_mid_frame_and_connection_errors())


def test_reading_pauses_with_whole_frames_waiting_and_not_for_one_large_frame():
    asyncio.run(_reading_pauses_with_whole_frames_waiting_and_not_for_one_large_frame())

"""The broker's event loop (weir.server.event_loop): uvloop unless WEIR_EVENT_LOOP=asyncio,
and what uvloop does its own way, over real loopback sockets: it receives into a
protocol's buffers only if the protocol is not also an ``asyncio.Protocol`` (the frame
readers are not; they must cut the same frames on both loops, and carry a ``StreamWriter``'s
flow control themselves), and it has no ``loop.sendfile``."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
import uvloop

from weir.protocol.client import ResponseFrames
from weir.protocol.framing import LARGE
from weir.server import event_loop
from weir.server.frames import FrameProtocol


def test_uvloop_by_default_and_asyncio_on_request(monkeypatch):
    monkeypatch.delenv(event_loop.ENV, raising=False)
    name, factory = event_loop.loop_factory()
    assert name.startswith("uvloop ") and factory is uvloop.new_event_loop
    monkeypatch.setenv(event_loop.ENV, "asyncio")
    assert event_loop.loop_factory() == ("asyncio", None)


@pytest.mark.parametrize("choice", ["", "asyncio"])
def test_run_uses_the_chosen_loop_and_says_whether_it_has_sendfile(monkeypatch, choice):
    monkeypatch.setenv(event_loop.ENV, choice)

    async def which() -> tuple[type, bool]:
        loop = asyncio.get_running_loop()
        return type(loop), event_loop.native_sendfile(loop)

    loop_type, sendfile = event_loop.run(which())
    if choice == "asyncio":
        assert issubclass(loop_type, asyncio.BaseEventLoop) and sendfile
    else:
        assert issubclass(loop_type, uvloop.Loop) and not sendfile


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


# at least 4 bytes each: a response frame holds a correlation id
BODIES = [b"four", b"x" * (LARGE + 1), b"three", b"y" * (3 * LARGE), b"z" * 100, b"last"]


async def _frames_through(make_protocol, collect) -> list[bytes]:
    """Send BODIES' frames over a loopback connection in uneven writes; the protocol under
    test receives them on the running loop."""
    loop = asyncio.get_running_loop()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    accepted = asyncio.ensure_future(loop.sock_accept(listener))
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client, _ = await accepted
    protocol, got = make_protocol()
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, client)
    data = b"".join(_frame(b) for b in BODIES)
    for cut in range(0, len(data), 7001):  # pieces that split sizes and bodies
        writer.write(data[cut:cut + 7001])
        await writer.drain()
    try:
        return await asyncio.wait_for(collect(protocol, got), 10)
    finally:
        writer.close()
        transport.close()
        listener.close()


def _server_side():
    protocol = FrameProtocol(lambda size: None)
    return protocol, None


async def _read_all(protocol: FrameProtocol, _got) -> list[bytes]:
    return [bytes(await protocol.read_frame()) for _ in BODIES]


def _client_side():
    got: list[bytes] = []
    all_in = asyncio.Event()

    def on_frame(frame) -> None:
        got.append(bytes(frame))
        if len(got) == len(BODIES):
            all_in.set()

    protocol = ResponseFrames(on_frame, lambda exc: None, 1 << 20)
    return protocol, (got, all_in)


async def _collected(_protocol, state) -> list[bytes]:
    got, all_in = state
    await all_in.wait()
    return got


@pytest.mark.parametrize("choice", ["", "asyncio"])
@pytest.mark.parametrize("side", ["request frames", "response frames"])
def test_frames_are_cut_alike_on_both_loops(monkeypatch, choice, side):
    monkeypatch.setenv(event_loop.ENV, choice)
    make, collect = ((_server_side, _read_all) if side == "request frames"
                     else (_client_side, _collected))
    assert event_loop.run(_frames_through(make, collect)) == BODIES


async def _writer_flow_control_over(make_protocol) -> int:
    """A protocol under test carries a ``StreamWriter`` (no ``StreamReader``) that writes
    16 MiB to a peer reading slowly: ``drain`` waits for the peer, then returns;
    ``wait_closed`` returns after ``close``."""
    loop = asyncio.get_running_loop()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    accepted = asyncio.ensure_future(loop.sock_accept(listener))
    peer_reader, peer_writer = await asyncio.open_connection(
        "127.0.0.1", listener.getsockname()[1])
    client, _ = await accepted
    protocol, _state = make_protocol()
    assert not isinstance(protocol, asyncio.Protocol)  # uvloop receives into its buffers
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, client)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    total = 16 << 20
    writer.write(b"w" * total)
    # The socket took what its buffer holds; the transport keeps the rest and pauses writing.
    paused_meanwhile = protocol._writing_paused
    draining = asyncio.ensure_future(writer.drain())
    await asyncio.sleep(0)
    paused_meanwhile = paused_meanwhile and not draining.done()
    got = 0
    while got < total:
        got += len(await asyncio.wait_for(peer_reader.read(1 << 16), 10))
        await asyncio.sleep(0)
    await asyncio.wait_for(draining, 10)
    writer.close()
    await asyncio.wait_for(writer.wait_closed(), 10)
    peer_writer.close()
    listener.close()
    assert paused_meanwhile
    return got


@pytest.mark.parametrize("choice", ["", "asyncio"])
@pytest.mark.parametrize("side", ["request frames", "response frames"])
def test_the_writer_flow_control_works_on_both_loops(monkeypatch, choice, side):
    monkeypatch.setenv(event_loop.ENV, choice)
    make = _server_side if side == "request frames" else _client_side
    assert event_loop.run(_writer_flow_control_over(make)) == 16 << 20

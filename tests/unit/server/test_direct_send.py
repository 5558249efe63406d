"""send_direct: a Fetch response's chunks (bytes, file regions) written straight to the
socket, the rest (socket full) left for the transport, in order; bad regions are errors."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest
import uvloop

from weir.protocol.fetch_response import FileRegion
from weir.server.direct_send import send_direct


async def _pair() -> tuple[asyncio.StreamWriter, socket.socket, asyncio.Server]:
    """A server-side StreamWriter over loopback TCP and the raw client socket."""
    accepted: asyncio.Future[asyncio.StreamWriter] = asyncio.get_running_loop().create_future()

    async def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result(writer)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    client.setblocking(False)
    writer = await asyncio.wait_for(accepted, 10)
    return writer, client, server


async def _read(client: socket.socket, n: int) -> bytes:
    loop = asyncio.get_running_loop()
    out = bytearray()
    while len(out) < n:
        data = await asyncio.wait_for(loop.sock_recv(client, 1 << 20), 10)
        if not data:
            break
        out += data
    return bytes(out)


def _segment(tmp_path: Path, size: int) -> tuple[str, bytes]:
    data = os.urandom(size)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return str(path), data


@pytest.mark.parametrize("loop_name", ["asyncio", "uvloop"])
def test_chunks_arrive_whole_and_in_order(tmp_path: Path, loop_name: str) -> None:
    """On both loops (the header goes with MSG_MORE through a socket object over the
    transport's descriptor, which must stay open and usable afterwards)."""
    path, data = _segment(tmp_path, 300_000)
    inode = os.stat(path).st_ino

    async def scenario() -> None:
        writer, client, server = await _pair()
        try:
            chunks = [b"he", b"ad", FileRegion(path, 1000, 200_000, inode), b"mid",
                      FileRegion(path, 0, 10, inode), b"tail"]
            left = send_direct(writer.transport, chunks)
            assert left == []  # 200 KB fit the loopback socket's buffers
            got = await _read(client, 200_021)
            assert got == b"head" + data[1000:201_000] + b"mid" + data[:10] + b"tail"
            writer.write(b"after")  # the transport's socket is still open and usable
            assert await _read(client, 5) == b"after"
        finally:
            client.close()
            writer.close()
            server.close()

    factory = uvloop.new_event_loop if loop_name == "uvloop" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(scenario())


def test_a_full_socket_leaves_the_rest_for_the_transport(tmp_path: Path) -> None:
    path, data = _segment(tmp_path, 16 << 20)

    async def scenario() -> None:
        writer, client, server = await _pair()
        try:
            chunks = [b"h", FileRegion(path, 0, len(data)), b"t"]
            left = send_direct(writer.transport, chunks)
            assert left and left[-1] == b"t"  # 16 MiB do not fit: the rest is returned
            rest = left[0]
            assert isinstance(rest, FileRegion)
            assert rest.position + rest.size == len(data) and rest.position > 0
            sent = 1 + rest.position
            reading = asyncio.ensure_future(_read(client, len(data) + 2))
            with open(rest.path, "rb") as f:  # noqa: ASYNC230 - a test
                await asyncio.get_running_loop().sendfile(writer.transport, f, rest.position,
                                                          rest.size)
            writer.write(b"t")
            got = await reading
            assert sent <= len(got)
            assert got == b"h" + data + b"t"
        finally:
            client.close()
            writer.close()
            server.close()

    asyncio.run(scenario())


class _BusyTransport:
    """A transport with bytes waiting in its buffer (and a socket that must not be used)."""

    def get_write_buffer_size(self) -> int:
        return 7

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str) -> object:
        raise AssertionError("the socket must not be touched")


def test_nothing_goes_direct_while_the_transport_holds_bytes(tmp_path: Path) -> None:
    path, _data = _segment(tmp_path, 1000)
    chunks: list[bytes | FileRegion] = [b"x", FileRegion(path, 0, 1000)]
    assert send_direct(_BusyTransport(), chunks) is chunks  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["missing", "replaced", "truncated"])
def test_bad_regions_are_connection_errors(tmp_path: Path, case: str) -> None:
    path, _data = _segment(tmp_path, 1000)
    region = {
        "missing": FileRegion(str(tmp_path / "gone.log"), 0, 10),
        "replaced": FileRegion(path, 0, 10, inode=os.stat(path).st_ino + 1),
        "truncated": FileRegion(path, 500, 1000),
    }[case]

    async def scenario() -> None:
        writer, client, server = await _pair()
        try:
            with pytest.raises(ConnectionError):
                send_direct(writer.transport, [b"head", region])
        finally:
            client.close()
            writer.close()
            server.close()

    asyncio.run(scenario())

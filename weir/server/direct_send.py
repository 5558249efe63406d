"""A response's chunks (bytes and file regions) sent straight to the socket.

Used by :mod:`weir.server.network` for Fetch responses on a plaintext connection, before
asyncio's ``loop.sendfile`` (which, per region, takes the socket out of the selector and
back, opens the file through Python's ``open`` and seeks it twice) and ``transport.write``
(one small segment per chunk with TCP_NODELAY).

The frame header goes with ``MSG_MORE``: the kernel holds it for the records that
``sendfile`` adds next, so header and records leave in full segments (Kafka's
``PlaintextTransportLayer`` writes the header, then ``FileChannel.transferTo``).
``TCP_CORK`` around the whole response did the same job at about 2.6 times the sender's
time in its system calls: a 256 KiB response over loopback took 100 us from cork to
uncork against 38 us, its round trip 139 us against 84, and the reader woke 3.7 times per
response against 1.3 (``bench/direct_send.py``,
``901f837:bench/results/direct_send-20261124T062123Z.md``).
"""

from __future__ import annotations

import asyncio
import os
import socket

from weir.protocol.fetch_response import FileRegion


def send_direct(transport: asyncio.WriteTransport,
                chunks: list[bytes | FileRegion]) -> list[bytes | FileRegion]:
    """Send a response's chunks straight to the socket while it takes them; what is left
    (the socket's buffer full) goes the usual way, after.  Only when nothing waits in the
    transport's buffer (the order of the bytes is kept).  The bytes before the first file
    region (the frame's and the partition's headers) are sent as one, with ``MSG_MORE``,
    so they wait in the socket for the records instead of leaving as a small segment of
    their own (TCP_NODELAY)."""
    if transport.get_write_buffer_size() or transport.is_closing():
        return chunks
    sock = transport.get_extra_info("socket")
    if sock is None or sock.fileno() < 0:
        return chunks
    fd = sock.fileno()
    first = 0  # the frame header is the bytes before the first region, sent as one
    while first < len(chunks) and not isinstance(chunks[first], FileRegion):
        first += 1
    if 1 < first < len(chunks):
        chunks = [b"".join(chunks[:first]), *chunks[first:]]  # type: ignore[arg-type]
    try:
        for i, chunk in enumerate(chunks):
            if isinstance(chunk, FileRegion):
                sent = _sendfile_direct(fd, chunk)
                if sent < chunk.size:
                    rest = FileRegion(chunk.path, chunk.position + sent, chunk.size - sent,
                                      chunk.inode)
                    return [rest, *chunks[i + 1:]]
                continue
            try:
                sent = _send_more(fd, sock, chunk) if i == 0 and len(chunks) > 1 \
                    else os.write(fd, chunk)
            except BlockingIOError:
                sent = 0
            if sent < len(chunk):
                return [chunk[sent:], *chunks[i + 1:]]
        return []
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise ConnectionError(str(exc)) from exc


def _send_more(fd: int, transport_sock, data: bytes) -> int:
    """``send(data, MSG_MORE)`` on the transport's socket ``fd``.  Neither asyncio's nor
    uvloop's socket wrapper has ``send``: a socket object over the same descriptor, which is
    detached (not closed) afterwards."""
    sock = socket.socket(transport_sock.family, transport_sock.type, 0, fileno=fd)
    try:
        return sock.send(data, socket.MSG_MORE)
    finally:
        sock.detach()


def _sendfile_direct(fd: int, chunk: FileRegion) -> int:
    """Bytes of ``chunk`` sent to socket ``fd`` with sendfile before it would block."""
    try:
        src = os.open(chunk.path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError as exc:  # a segment deleted since the read
        raise ConnectionError(f"segment {chunk.path} is gone") from exc
    try:
        if chunk.inode and os.fstat(src).st_ino != chunk.inode:
            raise ConnectionError(f"segment {chunk.path} was replaced by a cleaned segment")
        done = 0
        while done < chunk.size:
            try:
                sent = os.sendfile(fd, src, chunk.position + done, chunk.size - done)
            except BlockingIOError:
                break
            if sent == 0:  # the log was truncated under the read
                raise ConnectionError(f"sent {done} of {chunk.size} bytes of {chunk.path}")
            done += sent
        return done
    finally:
        os.close(src)

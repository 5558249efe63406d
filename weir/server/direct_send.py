"""A response's chunks (bytes and file regions) sent straight to the socket.

Used by :mod:`weir.server.network` for Fetch responses on a plaintext connection, before
asyncio's ``loop.sendfile`` (which, per region, takes the socket out of the selector and
back, opens the file through Python's ``open`` and seeks it twice) and ``transport.write``
(one small segment per chunk with TCP_NODELAY).
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
    transport's buffer (the order of the bytes is kept).  The chunks go out corked
    (TCP_CORK): the frame header, the records (sendfile from the page cache) and the tail
    of the response leave in full segments, not one small segment each (TCP_NODELAY) that
    the peer's receive wakes up for, as a follower's did three times per Fetch response."""
    if transport.get_write_buffer_size() or transport.is_closing():
        return chunks
    sock = transport.get_extra_info("socket")
    if sock is None or sock.fileno() < 0:
        return chunks
    fd = sock.fileno()
    cork = getattr(socket, "TCP_CORK", None) if len(chunks) > 1 else None
    try:
        if cork is not None:
            sock.setsockopt(socket.IPPROTO_TCP, cork, 1)
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
                    sent = os.write(fd, chunk)
                except BlockingIOError:
                    sent = 0
                if sent < len(chunk):
                    return [chunk[sent:], *chunks[i + 1:]]
            return []
        finally:
            if cork is not None:
                sock.setsockopt(socket.IPPROTO_TCP, cork, 0)
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise ConnectionError(str(exc)) from exc


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

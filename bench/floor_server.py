"""The floor: the least a Kafka-speaking server must do to take produce and serve fetch.

An asyncio TCP server that speaks just enough of the Kafka protocol for confluent-kafka
(librdkafka) to produce to it and consume from it, so that the benchmark drives it with the
very same client, configuration and bytes as the Weir broker:

* ApiVersions, Metadata and FindCoordinator (control plane, rare) are decoded and encoded
  with kio.  Every topic asked about exists, with one partition led by this server.
* Produce (v3-v7): the request is walked by hand to find the record bytes (no kio, no
  validation, no CRC check); each batch's 8-byte base offset is replaced by the next
  offset (so the file is a valid log segment) and the bytes are appended to one file per
  partition with one ``writev`` per batch, without copying them (into the page cache).
  The response is hand-encoded.
* Fetch (v4): the offset is looked up in an in-memory list of batch start positions and the
  file range is sent with ``loop.sendfile`` (``os.sendfile``), after a hand-encoded header.

* InitProducerId answers producer id 1000, epoch 0, for librdkafka's idempotent producer
  (sequence numbers are not checked).

Nothing is fsynced (Kafka does not fsync on produce either).  Usage::

    python bench/floor_server.py --data-dir DIR [--port 0] [--followers N]
    python bench/floor_server.py --data-dir DIR --follow HOST:PORT

It prints ``PORT <n>`` on stdout once listening, and stops on SIGTERM/SIGINT.

Socket buffers are Kafka's defaults, as a Weir broker's: SO_SNDBUF 102400 on accepted
sockets and SO_RCVBUF 102400 on the listening ones (``socket.send.buffer.bytes``,
``socket.receive.buffer.bytes``), SO_RCVBUF 65536 on a follower's connection
(``replica.socket.receive.buffer.bytes``); ``--send-buffer-bytes``,
``--receive-buffer-bytes`` and ``--replica-receive-buffer-bytes`` change them, -1 leaves
the OS's autotuned sizes.

**The replicated floor** (``--followers N``, for ``bench/replication_floor.py``): the least
Kafka's pull replication must do for acks=all. The server also listens on a replication
port (printed as ``REPLICATION_PORT <n>``) where N follower processes (``--follow``)
connect. A follower sends its log end position (8 bytes, Kafka's fetch offset, which is
also its acknowledgement of everything before it); the leader answers, at once or as soon
as the next produce appends, with the bytes after that position (a 4-byte length, then
``sendfile`` from the partition file, as Kafka's ``FileRecords``); the follower appends them
with one ``write`` and fetches again. A produce is answered once every follower fetched
past its last byte (the high watermark over a full ISR). One partition only.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import os
import signal
import socket
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from kio.index import load_request_schema, load_response_schema

from weir.protocol import codec
from weir.protocol.errors import ErrorCode

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, API_VERSIONS = 0, 1, 3, 10, 18
INIT_PRODUCER_ID = 22
SUPPORTED = {PRODUCE: (3, 7), FETCH: (4, 4), METADATA: (0, 4), FIND_COORDINATOR: (0, 2),
             API_VERSIONS: (0, 3), INIT_PRODUCER_ID: (0, 1)}
SHIP_MAX = 1 << 20  # bytes one replication fetch answer carries at most
NODE_ID = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_FETCH_PART = struct.Struct(">iqi")
_BATCH_LEN = struct.Struct(">i")  # at byte 8 of a batch
_LAST_DELTA = struct.Struct(">i")  # at byte 23 of a batch


@dataclass
class PartitionFile:
    """One partition's append-only file and the start (offset, position) of every batch."""

    file: BinaryIO
    path: Path
    next_offset: int = 0
    size: int = 0
    offsets: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)

    def append(self, records: memoryview) -> int:
        """Append every batch of ``records`` with fresh offsets; the first batch's offset."""
        first = self.next_offset
        pos = 0
        fd = self.file.fileno()
        while pos + 27 <= len(records):
            size = 12 + _BATCH_LEN.unpack_from(records, pos + 8)[0]
            (delta,) = _LAST_DELTA.unpack_from(records, pos + 23)
            self.offsets.append(self.next_offset)
            self.positions.append(self.size)
            os.writev(fd, [_I64.pack(self.next_offset), records[pos + 8:pos + size]])
            self.size += size
            self.next_offset += delta + 1
            pos += size
        return first

    def locate(self, offset: int, max_bytes: int) -> tuple[int, int]:
        """(position, byte count) to send for a fetch at ``offset`` (whole batches)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0 or offset >= self.next_offset:
            return 0, 0
        start = self.positions[i]
        limit = start + max_bytes
        if self.size <= limit:
            return start, self.size - start
        j = bisect.bisect_right(self.positions, limit) - 1  # batches before j fit
        if j > i:
            return start, self.positions[j] - start
        nxt = i + 1  # the first batch alone is larger than max_bytes: send it whole
        return start, (self.positions[nxt] if nxt < len(self.positions) else self.size) - start


class ReplicaLink(asyncio.Protocol):
    """A follower's connection at the leader: each 8-byte message is a fetch at that
    position of the partition file, and acknowledges every byte before it."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor
        self.transport: asyncio.Transport | None = None
        self.position = 0  # the follower's log end, as its last fetch said
        self.waiting = False  # a fetch not answered yet
        self.rest: asyncio.Future | None = None  # an answer's records the socket took later
        self._buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        # asyncio's socket wrapper has no send(): a duplicate of the descriptor, for MSG_MORE
        self.sock = socket.socket(fileno=os.dup(transport.get_extra_info("socket").fileno()))
        set_buffer(self.sock, socket.SO_SNDBUF, BUFFERS["send"])
        self.floor.links.append(self)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while len(self._buf) >= 8:
            (self.position,) = _I64.unpack_from(self._buf)
            self._buf = self._buf[8:]
            self.waiting = True
            self.floor.fetched(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.floor.links.remove(self)
        self.sock.close()


class Floor:
    def __init__(self, data_dir: Path, followers: int = 0) -> None:
        self.data_dir = data_dir
        self.port = 0
        self.partitions: dict[tuple[str, int], PartitionFile] = {}
        self.followers = followers
        self.links: list[ReplicaLink] = []
        # produce answers waiting for the followers: (last byte + 1, writer, response)
        self.pending: collections.deque[tuple[int, asyncio.StreamWriter, bytes]] = (
            collections.deque())

    def partition(self, topic: str, index: int) -> PartitionFile:
        key = (topic, index)
        part = self.partitions.get(key)
        if part is None:
            if self.followers and self.partitions:
                raise ConnectionError("the replicated floor keeps one partition")
            path = self.data_dir / f"{topic}-{index}.log"
            part = PartitionFile(open(path, "wb", buffering=0), path)  # noqa: SIM115 - closed at exit
            self.partitions[key] = part
        return part

    # -- replication: answer fetches, release produce answers ---------------------------
    def fetched(self, link: ReplicaLink) -> None:
        if len(self.links) >= self.followers:
            hw = min(one.position for one in self.links)
            while self.pending and self.pending[0][0] <= hw:
                _end, writer, response = self.pending.popleft()
                writer.write(response)
        self.ship(link)

    def ship(self, link: ReplicaLink) -> None:
        """Answer ``link``'s fetch if there are bytes after its position."""
        part = next(iter(self.partitions.values()), None)
        if not link.waiting or part is None or part.size <= link.position or (
                link.transport is None):
            return
        link.waiting = False
        count = min(part.size - link.position, SHIP_MAX)
        sock = link.sock
        head = _I32.pack(count)
        sent = done = 0
        if not link.transport.get_write_buffer_size():
            try:  # the header waits in the socket for the records (MSG_MORE), one segment
                sent = sock.send(head, socket.MSG_MORE)
                if sent == len(head):
                    done = os.sendfile(sock.fileno(), self._reader(part).fileno(), link.position,
                                       count)
            except BlockingIOError:
                pass
        if sent < len(head):
            link.transport.write(head[sent:])
        if sent < len(head):  # the header went the transport's way: so must the records
            link.rest = asyncio.ensure_future(asyncio.get_running_loop().sendfile(
                link.transport, self._reader(part), link.position + done, count - done))
        elif done < count:  # the socket's buffer is full: go on when it is writable again
            self._send_rest(link, part, link.position + done, count - done)

    def _send_rest(self, link: ReplicaLink, part: PartitionFile, position: int,
                   count: int) -> None:
        """``sendfile`` the rest of an answer whenever the socket takes more, as Kafka's
        ``FileRecords.writeTo`` on each OP_WRITE (the duplicate descriptor is watched, since
        the transport's own is the transport's)."""
        loop = asyncio.get_running_loop()
        fd = link.sock.fileno()
        reader = self._reader(part).fileno()
        left = [position, count]

        def writable() -> None:
            try:
                while left[1]:
                    n = os.sendfile(fd, reader, left[0], left[1])
                    left[0] += n
                    left[1] -= n
            except BlockingIOError:
                return
            except OSError:  # the follower went away
                pass
            loop.remove_writer(fd)

        loop.add_writer(fd, writable)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        set_buffer(writer.get_extra_info("socket"), socket.SO_SNDBUF, BUFFERS["send"])
        try:
            while True:
                (size,) = _I32.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
                api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
                if api_key == PRODUCE:
                    response = self.produce(frame, version, correlation_id)
                    if self.followers and response:
                        part = next(iter(self.partitions.values()))
                        self.pending.append((part.size, writer, response))
                        for link in self.links:
                            self.ship(link)
                    else:
                        writer.write(response)
                elif api_key == FETCH:
                    await self.fetch(frame, correlation_id, writer)
                else:
                    writer.write(self.control(frame, api_key, version, correlation_id))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    # -- produce: walk the request by hand, append, answer ------------------------------
    def produce(self, frame: bytes, version: int, correlation_id: int) -> bytes:
        view = memoryview(frame)
        pos = 10 + max(_I16.unpack_from(frame, 8)[0], 0)  # past the client id
        (n,) = _I16.unpack_from(frame, pos)  # transactional id
        pos += 2 + max(n, 0)
        acks = _I16.unpack_from(frame, pos)[0]
        pos += 6  # acks, timeout
        out = []
        (topics,) = _I32.unpack_from(frame, pos)
        pos += 4
        out.append(_I32.pack(topics))
        for _ in range(topics):
            (n,) = _I16.unpack_from(frame, pos)
            name = bytes(view[pos + 2:pos + 2 + n])
            pos += 2 + n
            (parts,) = _I32.unpack_from(frame, pos)
            pos += 4
            out.append(_I16.pack(n) + name + _I32.pack(parts))
            for _ in range(parts):
                index, length = struct.unpack_from(">ii", frame, pos)
                pos += 8
                base = self.partition(name.decode(), index).append(view[pos:pos + length])
                pos += length
                out.append(struct.pack(">ihqq", index, 0, base, -1))
                if version >= 5:
                    out.append(_I64.pack(0))  # log start offset
        out.append(_I32.pack(0))  # throttle time
        if acks == 0:
            return b""
        body = b"".join(out)
        return _I32.pack(len(body) + 4) + _I32.pack(correlation_id) + body

    # -- fetch v4: look up, header, sendfile ---------------------------------------------
    async def fetch(self, frame: bytes, correlation_id: int,
                    writer: asyncio.StreamWriter) -> None:
        pos = 10 + max(_I16.unpack_from(frame, 8)[0], 0)
        max_wait_ms = _I32.unpack_from(frame, pos + 4)[0]
        pos += 17  # replica id, max wait, min bytes, max bytes, isolation level
        (topics,) = _I32.unpack_from(frame, pos)
        pos += 4
        wanted: list[tuple[bytes, list[tuple[int, int, int]]]] = []
        for _ in range(topics):
            (n,) = _I16.unpack_from(frame, pos)
            name = frame[pos + 2:pos + 2 + n]
            pos += 2 + n
            (parts,) = _I32.unpack_from(frame, pos)
            pos += 4
            entries = []
            for _ in range(parts):
                entries.append(_FETCH_PART.unpack_from(frame, pos))
                pos += _FETCH_PART.size
            wanted.append((name, entries))
        plan = self._fetch_plan(wanted)
        if not any(count for _h, _f, _p, count in plan):
            await asyncio.sleep(min(max_wait_ms, 100) / 1000)  # a long poll, shortened
        total = 4 + 4 + 4 + sum(len(h) + count for h, _f, _p, count in plan)
        writer.write(_I32.pack(total) + _I32.pack(correlation_id) + _I32.pack(0))
        writer.write(_I32.pack(len(wanted)))
        loop = asyncio.get_running_loop()
        for head, file, position, count in plan:
            writer.write(head)
            if count:
                await writer.drain()
                await loop.sendfile(writer.transport, file, position, count)

    def _fetch_plan(self, wanted: list[tuple[bytes, list[tuple[int, int, int]]]]
                    ) -> list[tuple[bytes, Any, int, int]]:
        """For each topic and partition: (header bytes, file, position, count)."""
        plan = []
        for name, entries in wanted:
            prefix = _I16.pack(len(name)) + name + _I32.pack(len(entries))
            for i, (index, offset, max_bytes) in enumerate(entries):
                part = self.partitions.get((name.decode(), index))
                position = count = 0
                hw = 0
                reader = None
                if part is not None:
                    hw = part.next_offset
                    position, count = part.locate(offset, max_bytes)
                    reader = self._reader(part)
                head = (prefix if i == 0 else b"") + struct.pack(
                    ">ihqqii", index, 0, hw, hw, -1, count)
                plan.append((head, reader, position, count))
        return plan

    def _reader(self, part: PartitionFile) -> BinaryIO:
        reader = getattr(part, "reader", None)
        if reader is None:
            reader = open(part.path, "rb")  # noqa: SIM115 - kept for later fetches
            part.reader = reader  # type: ignore[attr-defined]
        return reader

    # -- control plane with kio ----------------------------------------------------------
    def control(self, frame: bytes, api_key: int, version: int, correlation_id: int) -> bytes:
        if api_key not in SUPPORTED or not SUPPORTED[api_key][0] <= version <= SUPPORTED[
                api_key][1]:
            if api_key == API_VERSIONS:
                return self._encode(API_VERSIONS, 0, correlation_id, {
                    "error_code": ErrorCode.unsupported_version, "api_keys": []})
            raise ConnectionError(f"unsupported API {api_key} v{version}")
        req_cls = load_request_schema(api_key, version)
        header = codec.parse_request_header(frame, bool(req_cls.__flexible__))
        request = codec.decode_body(req_cls, frame, header.size)
        if api_key == API_VERSIONS:
            keys = [{"api_key": k, "min_version": lo, "max_version": hi}
                    for k, (lo, hi) in sorted(SUPPORTED.items())]
            data: dict[str, Any] = {"error_code": ErrorCode.none, "api_keys": keys}
        elif api_key == METADATA:
            names = [t.name for t in (request.topics or [])]
            data = {
                "brokers": [{"node_id": NODE_ID, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "floor", "controller_id": NODE_ID,
                "topics": [{"error_code": ErrorCode.none, "name": name, "partitions": [
                    {"error_code": ErrorCode.none, "partition_index": 0,
                     "leader_id": NODE_ID, "replica_nodes": [NODE_ID],
                     "isr_nodes": [NODE_ID]}]} for name in names],
            }
        elif api_key == INIT_PRODUCER_ID:
            data = {"error_code": ErrorCode.none, "producer_id": 1000, "producer_epoch": 0}
        else:  # FindCoordinator: there are no groups here
            data = {"error_code": ErrorCode.coordinator_not_available, "node_id": -1,
                    "host": "", "port": -1}
        return self._encode(api_key, version, correlation_id, data)

    def _encode(self, api_key: int, version: int, correlation_id: int,
                data: dict[str, Any]) -> bytes:
        resp_cls = load_response_schema(api_key, version)
        body = codec.encode_body(codec.build(resp_cls, data))
        return codec.encode_response_frame(
            correlation_id, body, codec.response_header_flexible(api_key, resp_cls))


def follow(address: str, data_dir: Path) -> None:
    """A follower of the replicated floor: fetch at the log end, append, fetch again."""
    host, port = address.rsplit(":", 1)
    sock = socket.socket()
    set_buffer(sock, socket.SO_RCVBUF, BUFFERS["replica_receive"])  # before connecting
    sock.connect((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fd = os.open(data_dir / "replica.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
    buf = memoryview(bytearray(4 + SHIP_MAX))
    print("FOLLOWING", flush=True)
    position = 0
    while True:
        sock.sendall(_I64.pack(position))
        got = 0
        while got < 4:
            got += _recv_into(sock, buf[got:4])
        (count,) = _I32.unpack_from(buf)
        got = 0
        while got < count:
            got += _recv_into(sock, buf[4 + got:4 + count])
        os.write(fd, buf[4:4 + count])
        position += count


BUFFERS = {"send": 102400, "receive": 102400, "replica_receive": 65536}  # Kafka's defaults


def set_buffer(sock, option: int, size: int) -> None:
    """SO_SNDBUF / SO_RCVBUF ``size``; -1 leaves the OS's (autotuned) size."""
    if size != -1:
        sock.setsockopt(socket.SOL_SOCKET, option, size)


def listening_socket(port: int) -> socket.socket:
    """A loopback listening socket whose SO_RCVBUF accepted sockets inherit.  Its protocol
    is named: asyncio sets TCP_NODELAY only on sockets whose ``proto`` is IPPROTO_TCP."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    set_buffer(sock, socket.SO_RCVBUF, BUFFERS["receive"])
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _recv_into(sock: socket.socket, view: memoryview) -> int:
    n = sock.recv_into(view)
    if n == 0:
        os._exit(0)  # the leader went away: the benchmark is over
    return n


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--followers", type=int, default=0,
                        help="answer a produce once this many followers have its bytes")
    parser.add_argument("--follow", metavar="HOST:PORT",
                        help="be a follower of the leader's replication port")
    parser.add_argument("--send-buffer-bytes", type=int, default=BUFFERS["send"])
    parser.add_argument("--receive-buffer-bytes", type=int, default=BUFFERS["receive"])
    parser.add_argument("--replica-receive-buffer-bytes", type=int,
                        default=BUFFERS["replica_receive"])
    args = parser.parse_args(argv)
    BUFFERS.update(send=args.send_buffer_bytes, receive=args.receive_buffer_bytes,
                   replica_receive=args.replica_receive_buffer_bytes)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    if args.follow:
        follow(args.follow, args.data_dir)
        return
    floor = Floor(args.data_dir, args.followers)
    server = await asyncio.start_server(floor.serve, sock=listening_socket(args.port),
                                        limit=1 << 20)
    floor.port = server.sockets[0].getsockname()[1]
    print(f"PORT {floor.port}", flush=True)
    if args.followers:
        loop = asyncio.get_running_loop()
        replication = await loop.create_server(lambda: ReplicaLink(floor),
                                               sock=listening_socket(0))
        print(f"REPLICATION_PORT {replication.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    for part in floor.partitions.values():
        part.file.close()
    os._exit(0)  # connections of a client that went away need no orderly close


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

"""Batched znode reads on a kazoo client, with ZooKeeper's ``multiRead`` (ZooKeeper >= 3.6).

kazoo has no ``multiRead`` request: :class:`MultiRead` implements one on kazoo's request
protocol (``type``, ``serialize``, ``deserialize``) and :class:`BatchedReader` queues it
through ``KazooClient._call``, kazoo's internal request queue.  This is the one module that
depends on kazoo's private API; a kazoo upgrade that changes it breaks only this module
(``tests/unit/coordination/test_multi_read.py`` runs it against a real server).

Kafka's ``KafkaZkClient`` gets the same effect by pipelining its ``getData`` requests
(``retryRequestsUntilConnected`` over many ``GetDataRequest``); one ``multiRead`` per 1,000
paths costs one round trip and one server request instead of 1,000.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import EXCEPTIONS, NoNodeError, UnimplementedError
from kazoo.protocol.serialization import (
    GetData,
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
)
from kazoo.protocol.states import ZnodeStat

log = logging.getLogger(__name__)

MULTI_READ_MIN = 8
"""Batches at least this large go out as ZooKeeper ``multiRead`` requests."""
MULTI_READ_CHUNK = 1000
"""Reads per ``multiRead`` (keeps each response far below ``jute.maxbuffer``)."""


class MultiRead:
    """ZooKeeper's ``multiRead`` (opcode 22) of ``getData`` operations.

    The response holds, per path in order, ``(data, stat)`` or the exception of that read
    alone (e.g. ``NoNodeError``).
    """

    type = 22

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def serialize(self) -> bytes:
        parts = [MultiHeader(GetData.type, False, -1).serialize() + GetData(p, None).serialize()
                 for p in self.paths]
        parts.append(multiheader_struct.pack(-1, True, -1))
        return b"".join(parts)

    @classmethod
    def deserialize(cls, data: bytes, offset: int) -> list[Any]:
        results: list[Any] = []
        while True:
            kind, done, _err = multiheader_struct.unpack_from(data, offset)
            offset += multiheader_struct.size
            if done:
                return results
            if kind == GetData.type:
                value, offset = read_buffer(data, offset)
                stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
                offset += stat_struct.size
                results.append((value, stat))
            else:  # an error result: the error code follows
                (code,) = int_struct.unpack_from(data, offset)
                offset += int_struct.size
                results.append(EXCEPTIONS[code]())


class BatchedReader:
    """``getData`` of many znodes at once; the nodes that do not exist are left out.

    Batches of at least :data:`MULTI_READ_MIN` paths use ``multiRead`` (one request per
    ``chunk`` paths, all sent before the first answer is awaited); smaller ones, or all of
    them once the server answered UNIMPLEMENTED (ZooKeeper < 3.6), one pipelined ``get``
    per path.
    """

    def __init__(self, client: KazooClient, chunk: int = MULTI_READ_CHUNK) -> None:
        self._client = client
        self.chunk = chunk
        self.multi_read = True  # until the server answers UNIMPLEMENTED

    def get_many(self, paths: Iterable[str]) -> dict[str, tuple[bytes, ZnodeStat]]:
        wanted = list(paths)
        if self.multi_read and len(wanted) >= MULTI_READ_MIN:
            try:
                return self.get_many_multi(wanted)
            except UnimplementedError:
                log.info("ZooKeeper has no multiRead (< 3.6): reading nodes one by one")
                self.multi_read = False
        return self.get_many_pipelined(wanted)

    def get_many_pipelined(self, wanted: list[str]) -> dict[str, tuple[bytes, ZnodeStat]]:
        pending = {p: self._client.get_async(p) for p in wanted}
        found = {}
        for path, result in pending.items():
            try:
                found[path] = result.get()
            except NoNodeError:
                continue
        return found

    def get_many_multi(self, wanted: list[str]) -> dict[str, tuple[bytes, ZnodeStat]]:
        client = self._client
        pending = []
        for start in range(0, len(wanted), self.chunk):
            chunk = wanted[start:start + self.chunk]
            result = client.handler.async_result()
            # kazoo's internal request queue (kazoo has no public multiRead).
            client._call(MultiRead([_chrooted(client.chroot, p) for p in chunk]), result)
            pending.append((chunk, result))
        found = {}
        for chunk, result in pending:
            for path, item in zip(chunk, result.get(), strict=True):
                if isinstance(item, NoNodeError):
                    continue
                if isinstance(item, Exception):
                    raise item
                found[path] = item
        return found


def _chrooted(chroot: str | None, path: str) -> str:
    return f"{chroot}{path}" if chroot else path


__all__ = ["MULTI_READ_CHUNK", "MULTI_READ_MIN", "BatchedReader", "MultiRead"]

"""What a coordinator needs from the broker, as narrow interfaces: a clock, a read-only view
of the cluster metadata, and append/read access to its internal topic's partitions (Kafka's
CoordinatorRuntime ``PartitionWriter`` and ``CoordinatorLoader``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.records.batch import iter_headers
from weir.storage.producer_state import AppendOrigin

LOAD_CHUNK_BYTES = 1 << 20


class Clock(Protocol):
    """Wall-clock milliseconds (record timestamps, deadlines) and a monotonic clock in
    seconds (how long since a periodic job last ran)."""

    def now_ms(self) -> int: ...

    def monotonic(self) -> float: ...


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()


class MetadataView(Protocol):
    """The part of the broker's metadata cache (UpdateMetadata) a coordinator reads."""

    topics: Mapping[str, Mapping[int, Any]]
    brokers: Mapping[int, Any]

    def partition(self, tp: TopicPartition) -> Any: ...

    def has_topic(self, topic: str) -> bool: ...

    def broker_on(self, broker_id: int, listener: str) -> Any: ...


class PartitionLogReader(Protocol):
    """A partition's log as loading reads it (weir.storage.log.Log)."""

    log_start_offset: int
    log_end_offset: int

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = False) -> Any: ...


class CoordinatorLog(Protocol):
    """Append and read the internal topic's partitions this broker leads."""

    async def append(self, tp: TopicPartition, batch: bytes,
                     timeout_ms: int) -> tuple[ErrorCode, int]:
        """Append ``batch`` with acks=all: (error, base offset)."""
        ...

    def log(self, tp: TopicPartition) -> PartitionLogReader:
        """The local log of ``tp`` (raises KafkaError when it is not hosted here)."""
        ...


class ReplicaManagerLog:
    """:class:`CoordinatorLog` over the replica manager: appends as ``AppendOrigin.COORDINATOR``
    (a transactional batch of a producer carries no sequence), acks=all."""

    def __init__(self, replica_manager: Any) -> None:
        self._replica_manager = replica_manager

    async def append(self, tp: TopicPartition, batch: bytes,
                     timeout_ms: int) -> tuple[ErrorCode, int]:
        result = (await self._replica_manager.append(
            -1, timeout_ms, {tp: batch}, origin=AppendOrigin.COORDINATOR))[tp]
        return result.error, result.base_offset

    def log(self, tp: TopicPartition) -> PartitionLogReader:
        return self._replica_manager.partition(tp).log


async def read_batches(plog: PartitionLogReader,
                       chunk_bytes: int = LOAD_CHUNK_BYTES) -> AsyncIterator[bytes]:
    """Every complete record batch of ``plog`` from its log start to its current end, read
    in chunks and yielding to the event loop between chunks (a large partition loads
    without stalling the broker)."""
    pos, end = plog.log_start_offset, plog.log_end_offset
    while pos < end:
        read = plog.read(pos, chunk_bytes, max_offset=end, min_one_batch=True)
        data = read.read_bytes()
        if not data:
            return
        for h in iter_headers(data):
            if h.position + h.size > len(data):
                break
            yield data[h.position:h.position + h.size]
        pos = read.last_offset + 1
        await asyncio.sleep(0)

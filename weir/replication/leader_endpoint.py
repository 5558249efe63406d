"""How a follower reaches its partitions' leader: Kafka's ``LeaderEndPoint`` and
``RemoteLeaderEndPoint`` (``kafka.server``).

:class:`ReplicaFetcher <weir.replication.fetcher.ReplicaFetcher>` decides (what to fetch,
when to truncate, how to back off); a :class:`LeaderEndPoint` only carries its questions to
the leader broker and brings back the answers, decoded into the plain values below:

* :meth:`~LeaderEndPoint.fetch` - a follower Fetch (replica id = this broker) for the
  partitions named, answered with the leader's data, high watermark, log start offset and a
  diverging epoch (KIP-320) per partition;
* :meth:`~LeaderEndPoint.fetch_epoch_end_offsets` - OffsetForLeaderEpoch (KIP-101/279);
* :meth:`~LeaderEndPoint.fetch_earliest_offset` / :meth:`~LeaderEndPoint.fetch_latest_offset`
  - ListOffsets as a replica (timestamps -2 / -1), after an out-of-range answer.

A lost connection or a timeout is raised as :class:`ConnectionError`, :class:`OSError` or
:class:`TimeoutError`; a partition-level error is a value in the answer (or a
:class:`~weir.protocol.errors.KafkaError` for the ListOffsets calls).

:class:`RemoteLeaderEndPoint` speaks the wire protocol over one
:class:`~weir.protocol.client.BrokerConnection` (the inter-broker listener's TLS/SASL
settings included) and keeps the incremental fetch session (KIP-227,
:mod:`weir.replication.fetch_session_handler`) as Kafka's does: after the first full request
only partitions whose fetch fields changed are named, and the leader answers only partitions
with news.  Other implementations (an in-memory leader in the unit tests, the simulated
network in :mod:`weir.sim`) answer the same questions without sockets.
"""

from __future__ import annotations

import datetime
import logging
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from kio.index import load_request_schema

from weir.common import TopicPartition
from weir.protocol import codec
from weir.protocol.client import BrokerConnection
from weir.protocol.errors import ErrorCode, KafkaError
from weir.replication import follower_fetch_response
from weir.replication.fetch_session_handler import FetchSessionHandler

__all__ = [
    "BrokerEndPoint",
    "EpochEndOffset",
    "FetchAnswer",
    "FetchParams",
    "FetchedPartition",
    "LeaderEndPoint",
    "PartitionFetch",
    "RemoteLeaderEndPoint",
]

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 4
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class BrokerEndPoint:
    """A leader broker's id and inter-broker address (Kafka's ``BrokerEndPoint``)."""

    broker_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition of a follower Fetch (Kafka's ``FetchRequest.PartitionData``)."""

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """The leader's answer for one partition of a Fetch."""

    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview = b""
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset), KIP-320


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    """A whole Fetch answer.  ``error``: a request-level (fetch session) error, with no
    partitions to apply; ``back_off``: the fetcher should wait before asking again (the
    error was not one the next, full request repairs)."""

    partitions: dict[TopicPartition, FetchedPartition]
    error: ErrorCode = ErrorCode.none
    back_off: bool = False


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """The leader's OffsetForLeaderEpoch answer for one partition."""

    error: ErrorCode
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchParams:
    """The request-level fields of a follower Fetch (replica.fetch.* configs)."""

    replica_id: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024


class LeaderEndPoint(Protocol):
    """The leader broker as the replica fetcher sees it (Kafka's ``LeaderEndPoint``)."""

    @property
    def broker(self) -> BrokerEndPoint: ...

    async def fetch(self, params: FetchParams,
                    partitions: dict[TopicPartition, PartitionFetch]) -> FetchAnswer: ...

    async def fetch_epoch_end_offsets(
            self, replica_id: int, partitions: dict[TopicPartition, tuple[int, int]],
    ) -> dict[TopicPartition, EpochEndOffset]:
        """``partitions``: tp -> (current leader epoch, the follower's latest epoch)."""
        ...

    async def fetch_earliest_offset(self, replica_id: int, tp: TopicPartition,
                                    current_leader_epoch: int) -> int: ...

    async def fetch_latest_offset(self, replica_id: int, tp: TopicPartition,
                                  current_leader_epoch: int) -> int: ...

    async def reset(self) -> None:
        """No answer came (connection lost, timeout): drop the connection and the fetch
        session, so the next request starts afresh."""
        ...

    async def close(self) -> None: ...


class RemoteLeaderEndPoint:
    """The leader over the network (Kafka's ``RemoteLeaderEndPoint``): one connection, one
    incremental fetch session."""

    def __init__(self, broker: BrokerEndPoint, client_id: str, *, security: Any = None,
                 socket_timeout_ms: int = 30000, receive_buffer_bytes: int = -1) -> None:
        self._broker = broker
        self.receive_buffer_bytes = receive_buffer_bytes  # replica.socket.receive.buffer.bytes
        self.client_id = client_id
        self.security = security  # weir.security.client.InterBrokerSecurity (TLS/SASL)
        self.socket_timeout_ms = socket_timeout_ms
        self.session = FetchSessionHandler()
        self._conn: BrokerConnection | None = None

    @property
    def broker(self) -> BrokerEndPoint:
        return self._broker

    async def _connection(self) -> BrokerConnection:
        if self._conn is None or not self._conn.connected:
            conn = BrokerConnection(self._broker.host, self._broker.port,
                                    client_id=self.client_id, security=self.security,
                                    receive_buffer_bytes=self.receive_buffer_bytes)
            await conn.connect(timeout_s=self.socket_timeout_ms / 1000)
            self._conn = conn
        return self._conn

    async def reset(self) -> None:
        self.session.handle_error()
        await self.close()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _request(self, request: Any, timeout_ms: int) -> Any:
        conn = await self._connection()
        return await conn.request(request, timeout_ms / 1000)

    # -- Fetch ---------------------------------------------------------------------------

    async def fetch(self, params: FetchParams,
                    partitions: dict[TopicPartition, PartitionFetch]) -> FetchAnswer:
        data = self.session.build({tp: _fetch_fields(tp, p) for tp, p in partitions.items()})
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, fields in data.to_send.items():
            by_topic.setdefault(tp.topic, []).append(fields)
        forgotten: dict[str, list[int]] = {}
        for tp in data.to_forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        timeout_ms = self.socket_timeout_ms + params.max_wait_ms
        conn = await self._connection()
        if getattr(conn, "takes_encoded_body", False):
            # The follower's fetch, once per leader append under acks=all: encoded here in
            # one pass (kio's builder and writer cost more than the append it carries).
            body = encode_fetch_request(params, data.session_id, data.epoch, by_topic,
                                        forgotten)
            response = await conn.request(_fetch_request_type(), timeout_ms / 1000, body=body,
                                          decoder=follower_fetch_response.decode)
        else:
            request = codec.build(
                _fetch_schema(), replica_id=params.replica_id,
                max_wait=datetime.timedelta(milliseconds=params.max_wait_ms),
                min_bytes=params.min_bytes, max_bytes=params.max_bytes, isolation_level=0,
                session_id=data.session_id, session_epoch=data.epoch, rack_id="",
                topics=[{"topic": t, "partitions": parts} for t, parts in by_topic.items()],
                forgotten_topics_data=[{"topic": t, "partitions": parts}
                                       for t, parts in forgotten.items()])
            response = await conn.request(request, timeout_ms / 1000)
        error = ErrorCode(int(response.error_code))
        if not self.session.handle_response(error, int(response.session_id)):
            log.info("fetch session with broker %d: %s; the next fetch is full",
                     self._broker.broker_id, error.name)
            # A full request refused is not a session problem: do not spin on it.
            return FetchAnswer({}, error=error, back_off=data.full)
        out: dict[TopicPartition, FetchedPartition] = {}
        for topic in response.responses:
            for part in topic.partitions:
                diverging = part.diverging_epoch
                out[TopicPartition(topic.topic, int(part.partition_index))] = FetchedPartition(
                    error=ErrorCode(int(part.error_code)),
                    high_watermark=int(part.high_watermark),
                    log_start_offset=int(part.log_start_offset),
                    # The fast decoder's records are a view of the response frame.
                    records=part.records if part.records is not None else b"",
                    diverging_epoch=(int(diverging.epoch), int(diverging.end_offset))
                    if diverging is not None and int(diverging.epoch) >= 0 else None)
        return FetchAnswer(out)

    # -- OffsetForLeaderEpoch ------------------------------------------------------------

    async def fetch_epoch_end_offsets(
            self, replica_id: int, partitions: dict[TopicPartition, tuple[int, int]],
    ) -> dict[TopicPartition, EpochEndOffset]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, (current_epoch, epoch) in partitions.items():
            by_topic.setdefault(tp.topic, []).append({
                "partition": tp.partition, "current_leader_epoch": current_epoch,
                "leader_epoch": epoch})
        request = codec.build(
            load_request_schema(23, OFFSET_FOR_LEADER_EPOCH_VERSION), replica_id=replica_id,
            topics=[{"topic": t, "partitions": parts} for t, parts in by_topic.items()])
        response = await self._request(request, self.socket_timeout_ms)
        return {TopicPartition(topic.topic, int(part.partition)):
                EpochEndOffset(ErrorCode(int(part.error_code)), int(part.leader_epoch),
                               int(part.end_offset))
                for topic in response.topics for part in topic.partitions}

    # -- ListOffsets ---------------------------------------------------------------------

    async def fetch_earliest_offset(self, replica_id: int, tp: TopicPartition,
                                    current_leader_epoch: int) -> int:
        return await self._list_offset(replica_id, tp, current_leader_epoch,
                                       EARLIEST_TIMESTAMP)

    async def fetch_latest_offset(self, replica_id: int, tp: TopicPartition,
                                  current_leader_epoch: int) -> int:
        return await self._list_offset(replica_id, tp, current_leader_epoch, LATEST_TIMESTAMP)

    async def _list_offset(self, replica_id: int, tp: TopicPartition,
                           current_leader_epoch: int, timestamp: int) -> int:
        request = codec.build(
            load_request_schema(2, LIST_OFFSETS_VERSION), replica_id=replica_id,
            isolation_level=0, topics=[{"name": tp.topic, "partitions": [
                {"partition_index": tp.partition, "current_leader_epoch": current_leader_epoch,
                 "timestamp": timestamp}]}])
        response = await self._request(request, self.socket_timeout_ms)
        part = response.topics[0].partitions[0]
        code = ErrorCode(int(part.error_code))
        if code != ErrorCode.none:
            raise KafkaError(code, f"ListOffsets from leader: {code.name}")
        return int(part.offset)


@cache
def _fetch_schema() -> type:
    return load_request_schema(1, FETCH_VERSION)


@cache
def _fetch_request_type() -> Any:
    """An instance of the Fetch request class, for :meth:`BrokerConnection.request` to
    take the API key, version and response class from (the body is given encoded)."""
    return codec.build(_fetch_schema(), {})


_I32 = struct.Struct(">i")
_FETCH_HEAD = struct.Struct(">iiiibii")  # replica, max wait, min, max bytes, isolation, session
_FETCH_PARTITION = struct.Struct(">iiqiqi")


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    return codec.encode_uvarint(len(raw) + 1) + raw


def encode_fetch_request(params: FetchParams, session_id: int, session_epoch: int,
                         by_topic: dict[str, list[dict[str, Any]]],
                         forgotten: dict[str, list[int]]) -> bytes:
    """The body of a Fetch request v12 (Kafka's FetchRequest.json; flexible) as kio would
    encode it from the same values: read_committed no (isolation 0), an empty rack id, no
    ClusterId tag.  ``tests/unit/replication`` checks it against kio's encoding."""
    assert FETCH_VERSION == 12
    out = [_FETCH_HEAD.pack(params.replica_id, params.max_wait_ms, params.min_bytes,
                            params.max_bytes, 0, session_id, session_epoch),
           codec.encode_uvarint(len(by_topic) + 1)]
    for topic, parts in by_topic.items():
        out.append(_compact_string(topic))
        out.append(codec.encode_uvarint(len(parts) + 1))
        for f in parts:
            out.append(_FETCH_PARTITION.pack(
                f["partition"], f["current_leader_epoch"], f["fetch_offset"],
                f["last_fetched_epoch"], f["log_start_offset"], f["partition_max_bytes"]))
            out.append(b"\x00")
        out.append(b"\x00")
    out.append(codec.encode_uvarint(len(forgotten) + 1))
    for topic, indexes in forgotten.items():
        out.append(_compact_string(topic))
        out.append(codec.encode_uvarint(len(indexes) + 1))
        out.extend(_I32.pack(i) for i in indexes)
        out.append(b"\x00")
    out.append(b"\x01\x00")  # rack id "", no tagged fields
    return b"".join(out)


def _fetch_fields(tp: TopicPartition, p: PartitionFetch) -> dict[str, Any]:
    return {"partition": tp.partition, "current_leader_epoch": p.current_leader_epoch,
            "fetch_offset": p.fetch_offset, "last_fetched_epoch": p.last_fetched_epoch,
            "log_start_offset": p.log_start_offset,
            "partition_max_bytes": p.partition_max_bytes}

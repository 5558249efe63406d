"""How a follower reaches its partitions' leader: Kafka's ``LeaderEndPoint`` and
``RemoteLeaderEndPoint`` (``kafka.server``).

:class:`ReplicaFetcher <weir.replication.fetcher.ReplicaFetcher>` decides (what to fetch,
when to truncate, how to back off); a :class:`LeaderEndPoint` only carries its questions to
the leader broker and brings back the answers, decoded into the plain values below:

* :meth:`~LeaderEndPoint.fetch` - a follower Fetch (replica id = this broker) for the
  partitions named, answered with the leader's data, high watermark, log start offset and a
  diverging epoch (KIP-320) per partition.  Topics go by id (Fetch v13, KIP-516) when every
  partition asked for has one, as Kafka's ``ReplicaFetcherThread`` asks once the
  inter-broker protocol is 3.1 or later: a leader whose log holds another topic id answers
  INCONSISTENT_TOPIC_ID instead of serving an older topic of the same name; by name
  (Fetch v12) otherwise;
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
import uuid
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Protocol

from kio.index import load_request_schema

from weir.common import TopicPartition
from weir.coordination.codecs import topic_id_from_str
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

FETCH_VERSION = 13  # topics by id (KIP-516); FETCH_VERSION_BY_NAME when a partition has none
FETCH_VERSION_BY_NAME = 12
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
    topic_id: str | None = None  # the follower log's (KIP-516, Uuid.toString form)


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
        # The topic of each id this endpoint has fetched by (an answer names only ids, and
        # an incremental one may name partitions sent in earlier requests), by the id's
        # integer (a uuid.UUID hashes in Python code).
        self._names: dict[int, str] = {}
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
        by_id = all(p.topic_id is not None for p in partitions.values())
        data = self.session.build({tp: _fetch_fields(tp, p) for tp, p in partitions.items()},
                                  topic_ids=by_id)
        version = FETCH_VERSION if by_id else FETCH_VERSION_BY_NAME
        # Topics are keyed by name (v12) or by id (v13).
        by_topic: dict[str | uuid.UUID, list[dict[str, Any]]] = {}
        for tp, fields in data.to_send.items():
            key = _topic_key(tp.topic, fields["topic_id"], by_id)
            if isinstance(key, uuid.UUID):
                self._names[key.int] = tp.topic
            by_topic.setdefault(key, []).append(fields)
        forgotten: dict[str | uuid.UUID, list[int]] = {}
        for tp, topic_id in data.to_forget:
            forgotten.setdefault(_topic_key(tp.topic, topic_id, by_id), []).append(tp.partition)
        timeout_ms = self.socket_timeout_ms + params.max_wait_ms
        conn = await self._connection()
        if getattr(conn, "takes_encoded_body", False):
            # The follower's fetch, once per leader append under acks=all: encoded here in
            # one pass (kio's builder and writer cost more than the append it carries).
            body = encode_fetch_request(params, data.session_id, data.epoch, by_topic,
                                        forgotten, version)
            response = await conn.request(
                _fetch_request_type(version), timeout_ms / 1000, body=body,
                decoder=follower_fetch_response.decode_v13 if by_id
                else follower_fetch_response.decode)
        else:
            key_field = "topic_id" if by_id else "topic"
            request = codec.build(
                _fetch_schema(version), replica_id=params.replica_id,
                max_wait=datetime.timedelta(milliseconds=params.max_wait_ms),
                min_bytes=params.min_bytes, max_bytes=params.max_bytes, isolation_level=0,
                session_id=data.session_id, session_epoch=data.epoch, rack_id="",
                topics=[{key_field: t, "partitions": [_wire_fields(f) for f in parts]}
                        for t, parts in by_topic.items()],
                forgotten_topics_data=[{key_field: t, "partitions": parts}
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
            name = self._names.get(topic.topic_id.int) if by_id else topic.topic
            if name is None:
                log.warning("fetch from broker %d answered topic id %s, not asked for",
                            self._broker.broker_id, topic.topic_id)
                continue
            for part in topic.partitions:
                diverging = part.diverging_epoch
                out[TopicPartition(name, int(part.partition_index))] = FetchedPartition(
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
def _fetch_schema(version: int) -> type:
    return load_request_schema(1, version)


@cache
def _fetch_request_type(version: int) -> Any:
    """An instance of the Fetch request class, for :meth:`BrokerConnection.request` to
    take the API key, version and response class from (the body is given encoded)."""
    return codec.build(_fetch_schema(version), {})


@lru_cache(maxsize=65536)
def _topic_uuid(topic_id: str) -> uuid.UUID:
    return topic_id_from_str(topic_id)


def _topic_key(topic: str, topic_id: str | None, by_id: bool) -> str | uuid.UUID:
    """How a request names ``topic``: by name (v12), or by id (v13)."""
    if not by_id:
        return topic
    assert topic_id is not None
    return _topic_uuid(topic_id)


_I32 = struct.Struct(">i")
_FETCH_HEAD = struct.Struct(">iiiibii")  # replica, max wait, min, max bytes, isolation, session
_FETCH_PARTITION = struct.Struct(">iiqiqi")


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    return codec.encode_uvarint(len(raw) + 1) + raw


def _topic_field(topic: str | uuid.UUID) -> bytes:
    """A topic as Fetch v12 (compact string) or v13 (uuid, 16 bytes) names it."""
    return topic.bytes if isinstance(topic, uuid.UUID) else _compact_string(topic)


def encode_fetch_request(params: FetchParams, session_id: int, session_epoch: int,
                         by_topic: dict[Any, list[dict[str, Any]]],
                         forgotten: dict[Any, list[int]], version: int = FETCH_VERSION) -> bytes:
    """The body of a Fetch request v12 (topics by name) or v13 (topics by id, uuids as the
    keys of ``by_topic`` and ``forgotten``) (Kafka's FetchRequest.json; flexible) as kio
    would encode it from the same values: read_committed no (isolation 0), an empty rack
    id, no ClusterId tag.  ``tests/unit/replication`` checks it against kio's encoding."""
    assert version in (FETCH_VERSION_BY_NAME, FETCH_VERSION)
    out = [_FETCH_HEAD.pack(params.replica_id, params.max_wait_ms, params.min_bytes,
                            params.max_bytes, 0, session_id, session_epoch),
           codec.encode_uvarint(len(by_topic) + 1)]
    for topic, parts in by_topic.items():
        out.append(_topic_field(topic))
        out.append(codec.encode_uvarint(len(parts) + 1))
        for f in parts:
            out.append(_FETCH_PARTITION.pack(
                f["partition"], f["current_leader_epoch"], f["fetch_offset"],
                f["last_fetched_epoch"], f["log_start_offset"], f["partition_max_bytes"]))
            out.append(b"\x00")
        out.append(b"\x00")
    out.append(codec.encode_uvarint(len(forgotten) + 1))
    for topic, indexes in forgotten.items():
        out.append(_topic_field(topic))
        out.append(codec.encode_uvarint(len(indexes) + 1))
        out.extend(_I32.pack(i) for i in indexes)
        out.append(b"\x00")
    out.append(b"\x01\x00")  # rack id "", no tagged fields
    return b"".join(out)


def _fetch_fields(tp: TopicPartition, p: PartitionFetch) -> dict[str, Any]:
    """A partition's fields in the fetch session (the topic id too: a new id is a new
    partition to the session, KIP-516)."""
    return {"partition": tp.partition, "current_leader_epoch": p.current_leader_epoch,
            "fetch_offset": p.fetch_offset, "last_fetched_epoch": p.last_fetched_epoch,
            "log_start_offset": p.log_start_offset,
            "partition_max_bytes": p.partition_max_bytes, "topic_id": p.topic_id}


def _wire_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The request's fields of a partition (kio's builder takes no others)."""
    return {k: v for k, v in fields.items() if k != "topic_id"}

"""Kafka's ZooKeeper JSON shapes: pure encoders and decoders, no I/O.

Encoders produce compact JSON bytes with the key names and versions that ZooKeeper-mode
Kafka 3.x writes; decoders accept what Kafka writes (including older versions where it
costs nothing).  Timestamps are passed in (``now_ms``), never read from a clock.
"""

import base64
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition

BROKER_INFO_VERSION = 5
TOPIC_ASSIGNMENT_VERSION = 3
_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    return json.loads(data.decode())


# -- topic ids -------------------------------------------------------------------------


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def topic_id_from_str(text: str) -> uuid.UUID:
    """Inverse of :func:`topic_id_to_str`; raises ValueError on a malformed id."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka topic id: {text!r}")
    return uuid.UUID(bytes=raw)


# -- brokers ---------------------------------------------------------------------------


def parse_endpoint(endpoint: str) -> tuple[str, str, int]:
    """``"PLAINTEXT://host:9092"`` → ``("PLAINTEXT", "host", 9092)`` (IPv6 in brackets)."""
    listener, sep, rest = endpoint.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon:
        raise ValueError(f"not a listener endpoint: {endpoint!r}")
    return listener, host.strip("[]"), int(port)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A broker's registration under ``/brokers/ids/<id>``.

    ``epoch`` is the broker epoch: the czxid of the registration znode (-1 until known).
    ``endpoints`` are ``LISTENER://host:port`` strings; empty means one PLAINTEXT
    endpoint at ``host:port``.
    """

    id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1
    endpoints: list[str] = field(default_factory=list)

    def listener_endpoints(self) -> list[str]:
        return list(self.endpoints) or [f"PLAINTEXT://{self.host}:{self.port}"]


def encode_broker(info: BrokerInfo, now_ms: int, jmx_port: int = -1) -> bytes:
    """Broker registration JSON, version 5."""
    endpoints = info.listener_endpoints()
    protocol_map = {}
    for endpoint in endpoints:
        listener = parse_endpoint(endpoint)[0]
        protocol_map[listener] = listener if listener in _SECURITY_PROTOCOLS else "PLAINTEXT"
    return _dumps(
        {
            "listener_security_protocol_map": protocol_map,
            "endpoints": endpoints,
            "rack": info.rack,
            "jmx_port": jmx_port,
            "host": info.host,
            "timestamp": str(now_ms),
            "port": info.port,
            "version": BROKER_INFO_VERSION,
            "features": {},
        }
    )


def decode_broker(broker_id: int, data: bytes, epoch: int = -1) -> BrokerInfo:
    """Decode a registration; ``host``/``port`` fall back to the first endpoint."""
    doc = _loads(data)
    endpoints = list(doc.get("endpoints") or [])
    host, port = doc.get("host"), doc.get("port", -1)
    if (host is None or port == -1) and endpoints:
        _, host, port = parse_endpoint(endpoints[0])
    return BrokerInfo(
        id=broker_id,
        host=host or "",
        port=int(port),
        rack=doc.get("rack"),
        epoch=epoch,
        endpoints=endpoints,
    )


# -- topics ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: replicas per partition, the topic id, reassignment.

    ``topic_id`` is None only for topics written by old Kafka versions (JSON version 1).
    ``zk_version`` is the znode's version when read (-1 when not read from ZooKeeper).
    """

    name: str
    topic_id: uuid.UUID | None
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)
    zk_version: int = -1


def _int_keyed(mapping: Mapping[str, list[int]] | None) -> dict[int, list[int]]:
    return {int(k): [int(b) for b in v] for k, v in (mapping or {}).items()}


def _str_keyed(mapping: Mapping[int, list[int]]) -> dict[str, list[int]]:
    return {str(k): list(v) for k, v in sorted(mapping.items())}


def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    """Topic assignment JSON, version 3 (with topic id and reassignment state)."""
    doc: dict[str, Any] = {"partitions": _str_keyed(assignment.partitions)}
    if assignment.topic_id is not None:
        doc["topic_id"] = topic_id_to_str(assignment.topic_id)
    doc["adding_replicas"] = _str_keyed(assignment.adding)
    doc["removing_replicas"] = _str_keyed(assignment.removing)
    doc["version"] = TOPIC_ASSIGNMENT_VERSION
    return _dumps(doc)


def decode_topic_assignment(name: str, data: bytes, zk_version: int = -1) -> TopicAssignment:
    doc = _loads(data)
    raw_id = doc.get("topic_id")
    return TopicAssignment(
        name=name,
        topic_id=topic_id_from_str(raw_id) if raw_id else None,
        partitions=_int_keyed(doc.get("partitions")),
        adding=_int_keyed(doc.get("adding_replicas")),
        removing=_int_keyed(doc.get("removing_replicas")),
        zk_version=zk_version,
    )


# -- partition state -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderIsr:
    """``.../partitions/<p>/state``. ``zk_version`` is the partition epoch."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = -1
    leader_recovery_state: int = 0
    # The zxid of the znode's last write (-1 when not read from ZooKeeper). A leader whose
    # registration (broker epoch = czxid) is newer restarted after this state was written.
    mzxid: int = field(default=-1, compare=False)


def encode_leader_isr(state: LeaderIsr) -> bytes:
    """Partition state JSON: version 1, or 2 while recovering from an unclean election."""
    doc: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state:
        doc["version"] = 2
        doc["leader_recovery_state"] = state.leader_recovery_state
    return _dumps(doc)


def decode_leader_isr(data: bytes, zk_version: int = -1, mzxid: int = -1) -> LeaderIsr:
    doc = _loads(data)
    return LeaderIsr(
        leader=int(doc["leader"]),
        leader_epoch=int(doc["leader_epoch"]),
        isr=[int(b) for b in doc["isr"]],
        controller_epoch=int(doc["controller_epoch"]),
        zk_version=zk_version,
        leader_recovery_state=int(doc.get("leader_recovery_state", 0)),
        mzxid=mzxid,
    )


# -- controller ------------------------------------------------------------------------


def encode_controller(broker_id: int, now_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(now_ms)})


def decode_controller(data: bytes) -> int:
    """The controller's broker id (also accepts the pre-0.8 bare-integer form)."""
    doc = _loads(data)
    return int(doc) if isinstance(doc, int) else int(doc["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# -- configs ---------------------------------------------------------------------------


def encode_config(configs: Mapping[str, str]) -> bytes:
    """Entity config JSON (``/config/topics/<t>``, ``/config/brokers/<id>``)."""
    return _dumps({"version": 1, "config": {k: str(v) for k, v in configs.items()}})


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {k: str(v) for k, v in (_loads(data).get("config") or {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    """Config change notification, version 2: ``entity_path`` like ``topics/<t>``."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    doc = _loads(data)
    if doc.get("version") == 1:  # {"version":1,"entity_type":"topics","entity_name":"t"}
        return f"{doc['entity_type']}/{doc['entity_name']}"
    return str(doc["entity_path"])


# -- admin -----------------------------------------------------------------------------


def encode_reassignment(reassignment: Mapping[TopicPartition, list[int]]) -> bytes:
    """``/admin/reassign_partitions``, version 1."""
    parts = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(reassignment.items())
    ]
    return _dumps({"version": 1, "partitions": parts})


def decode_reassignment(data: bytes) -> dict[TopicPartition, list[int]]:
    doc = _loads(data)
    return {
        TopicPartition(p["topic"], int(p["partition"])): [int(b) for b in p["replicas"]]
        for p in doc.get("partitions") or []
    }


def encode_preferred_election(partitions: Iterable[TopicPartition]) -> bytes:
    """``/admin/preferred_replica_election``, version 1."""
    parts = [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]
    return _dumps({"version": 1, "partitions": parts})


def decode_preferred_election(data: bytes) -> set[TopicPartition]:
    doc = _loads(data)
    return {TopicPartition(p["topic"], int(p["partition"])) for p in doc.get("partitions") or []}


# -- cluster id, producer id blocks ----------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data)["id"])


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """``/latest_producer_id_block``: the last block of producer ids handed out."""

    broker: int
    block_start: int
    block_end: int


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dumps(
        {
            "version": 1,
            "broker": block.broker,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    doc = _loads(data)
    return ProducerIdBlock(
        broker=int(doc["broker"]),
        block_start=int(doc["block_start"]),
        block_end=int(doc["block_end"]),
    )

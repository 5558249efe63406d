"""Kafka's ZooKeeper JSON shapes: pure encoders and decoders, no I/O.

Encoders produce compact JSON bytes with the key names and versions that ZooKeeper-mode
Kafka 3.x writes; decoders accept what Kafka writes (including older versions where it
costs nothing).  Timestamps are passed in (``now_ms``), never read from a clock.

Every decoder raises :class:`~weir.coordination.errors.ZnodeDataError`, naming the znode,
for data it cannot use: invalid UTF-8, not JSON, a missing field, a field of the wrong type
(a string where a list of broker ids belongs is not iterated character by character).
Numbers Kafka writes as strings (timestamps, producer id blocks) are accepted as strings.
"""

import base64
import binascii
import dataclasses
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition
from weir.coordination import paths
from weir.coordination.errors import ZnodeDataError

BROKER_INFO_VERSION = 5
TOPIC_ASSIGNMENT_VERSION = 3
_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


@contextmanager
def _decoding(path: str) -> Iterator[None]:
    """Turn any failure to decode ``path``'s data into a ZnodeDataError naming it."""
    try:
        yield
    except ZnodeDataError:
        raise
    except UnicodeDecodeError as exc:
        raise ZnodeDataError(path, f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ZnodeDataError(path, f"not JSON ({exc.msg} at char {exc.pos})") from exc
    except KeyError as exc:
        raise ZnodeDataError(path, f"missing field {exc}") from exc
    except (ValueError, TypeError, AttributeError, binascii.Error) as exc:
        raise ZnodeDataError(path, str(exc) or type(exc).__name__) from exc


def _object(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise TypeError(f"expected a JSON object, found {type(doc).__name__}")
    return doc


def _int(value: Any, name: str) -> int:
    """A JSON integer, or a string of one (Kafka writes some numbers as strings)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise TypeError(f"field {name!r} is not an integer: {value!r}")


def _int_list(value: Any, name: str) -> list[int]:
    if not isinstance(value, list):
        raise TypeError(f"field {name!r} is not a list: {value!r}")
    return [_int(v, name) for v in value]


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"field {name!r} is not a string: {value!r}")
    return value


def _optional_str(value: Any, name: str) -> str | None:
    return None if value is None else _str(value, name)


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
    endpoint at ``host:port``.  ``security_protocols`` is Kafka's
    ``listener_security_protocol_map`` as (listener, protocol) pairs; empty: each listener
    named after its protocol.
    """

    id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = -1
    endpoints: list[str] = field(default_factory=list)
    security_protocols: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def listener_endpoints(self) -> list[str]:
        return list(self.endpoints) or [f"PLAINTEXT://{self.host}:{self.port}"]

    def protocol_of(self, listener: str) -> str:
        found = dict(self.security_protocols).get(listener)
        if found is not None:
            return found
        return listener if listener in _SECURITY_PROTOCOLS else "PLAINTEXT"

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of this broker on ``listener`` (None: it has no such listener)."""
        for text in self.listener_endpoints():
            name, host, port = parse_endpoint(text)
            if name == listener:
                return host, port
        return None

    def on_listener(self, listener: str) -> "BrokerInfo":
        """This registration with ``host``/``port`` set to its endpoint on ``listener``."""
        found = self.endpoint(listener)
        if found is None or found == (self.host, self.port):
            return self
        return dataclasses.replace(self, host=found[0], port=found[1])


def encode_broker(info: BrokerInfo, now_ms: int, jmx_port: int = -1) -> bytes:
    """Broker registration JSON, version 5."""
    endpoints = info.listener_endpoints()
    protocol_map = {}
    host: str | None = info.host
    port = info.port
    for endpoint in endpoints:
        listener = parse_endpoint(endpoint)[0]
        protocol_map[listener] = info.protocol_of(listener)
    if info.security_protocols:
        # Kafka's deprecated host/port fields: the PLAINTEXT endpoint, else null and -1.
        plaintext = [parse_endpoint(e) for e in endpoints
                     if protocol_map[parse_endpoint(e)[0]] == "PLAINTEXT"]
        host, port = (plaintext[0][1], plaintext[0][2]) if plaintext else (None, -1)
    return _dumps(
        {
            "listener_security_protocol_map": protocol_map,
            "endpoints": endpoints,
            "rack": info.rack,
            "jmx_port": jmx_port,
            "host": host,
            "timestamp": str(now_ms),
            "port": port,
            "version": BROKER_INFO_VERSION,
            "features": {},
        }
    )


def decode_broker(
    broker_id: int, data: bytes, epoch: int = -1, *, path: str | None = None
) -> BrokerInfo:
    """Decode a registration; ``host``/``port`` fall back to the first endpoint."""
    with _decoding(path or paths.broker(broker_id)):
        doc = _object(_loads(data))
        raw_endpoints = doc.get("endpoints") or []
        if not isinstance(raw_endpoints, list):
            raise TypeError(f"field 'endpoints' is not a list: {raw_endpoints!r}")
        endpoints = [_str(e, "endpoints") for e in raw_endpoints]
        for endpoint in endpoints:
            parse_endpoint(endpoint)
        host = _optional_str(doc.get("host"), "host")
        port = _int(doc.get("port", -1), "port")
        if (host is None or port == -1) and endpoints:
            _, host, port = parse_endpoint(endpoints[0])
        if host is None or port == -1:
            raise KeyError("host/port or endpoints")
        raw_map = doc.get("listener_security_protocol_map") or {}
        if not isinstance(raw_map, dict):
            raise TypeError(f"field 'listener_security_protocol_map' is not an object: "
                            f"{raw_map!r}")
        return BrokerInfo(
            id=broker_id,
            host=host,
            port=port,
            rack=_optional_str(doc.get("rack"), "rack"),
            epoch=epoch,
            endpoints=endpoints,
            security_protocols=tuple(
                (_str(k, "listener_security_protocol_map"),
                 _str(v, "listener_security_protocol_map")) for k, v in raw_map.items()),
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


def _int_keyed(mapping: Any, name: str) -> dict[int, list[int]]:
    """``{"0": [1, 2]}`` → ``{0: [1, 2]}``; null or absent is empty."""
    if mapping is None:
        return {}
    if not isinstance(mapping, dict):
        raise TypeError(f"field {name!r} is not a JSON object: {mapping!r}")
    return {_int(k, name): _int_list(v, name) for k, v in mapping.items()}


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


def decode_topic_assignment(
    name: str, data: bytes, zk_version: int = -1, *, path: str | None = None
) -> TopicAssignment:
    with _decoding(path or paths.topic(name)):
        doc = _object(_loads(data))
        raw_id = _optional_str(doc.get("topic_id"), "topic_id")
        return TopicAssignment(
            name=name,
            topic_id=topic_id_from_str(raw_id) if raw_id else None,
            partitions=_int_keyed(doc["partitions"], "partitions"),
            adding=_int_keyed(doc.get("adding_replicas"), "adding_replicas"),
            removing=_int_keyed(doc.get("removing_replicas"), "removing_replicas"),
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


def decode_leader_isr(
    data: bytes, zk_version: int = -1, mzxid: int = -1, *, path: str = "partition state znode"
) -> LeaderIsr:
    with _decoding(path):
        doc = _object(_loads(data))
        return LeaderIsr(
            leader=_int(doc["leader"], "leader"),
            leader_epoch=_int(doc["leader_epoch"], "leader_epoch"),
            isr=_int_list(doc["isr"], "isr"),
            controller_epoch=_int(doc["controller_epoch"], "controller_epoch"),
            zk_version=zk_version,
            leader_recovery_state=_int(
                doc.get("leader_recovery_state", 0), "leader_recovery_state"
            ),
            mzxid=mzxid,
        )


# -- controller ------------------------------------------------------------------------


def encode_controller(broker_id: int, now_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(now_ms)})


def decode_controller(data: bytes, *, path: str = paths.CONTROLLER) -> int:
    """The controller's broker id (also accepts the pre-0.8 bare-integer form)."""
    with _decoding(path):
        doc = _loads(data)
        if isinstance(doc, int) and not isinstance(doc, bool):
            return doc
        return _int(_object(doc)["brokerid"], "brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes, *, path: str = paths.CONTROLLER_EPOCH) -> int:
    with _decoding(path):
        return _int(data.decode("utf-8").strip(), "controller epoch")


# -- configs ---------------------------------------------------------------------------


def encode_config(configs: Mapping[str, str]) -> bytes:
    """Entity config JSON (``/config/topics/<t>``, ``/config/brokers/<id>``)."""
    return _dumps({"version": 1, "config": {k: str(v) for k, v in configs.items()}})


def decode_config(data: bytes | None, *, path: str = "config znode") -> dict[str, str]:
    if not data:
        return {}
    with _decoding(path):
        config = _object(_loads(data)).get("config") or {}
        if not isinstance(config, dict):
            raise TypeError(f"field 'config' is not a JSON object: {config!r}")
        out = {}
        for key, value in config.items():
            if isinstance(value, (dict, list)) or value is None:
                raise TypeError(f"config {key!r} is not a string: {value!r}")
            out[key] = value if isinstance(value, str) else json.dumps(value)
        return out


def encode_config_change(entity_path: str) -> bytes:
    """Config change notification, version 2: ``entity_path`` like ``topics/<t>``."""
    return _dumps({"version": 2, "entity_path": entity_path})


LOG_DIR_FAILURE_EVENT = 1
"""Kafka's ``LogDirEventNotificationHandler.LogDirFailureEvent``."""


def encode_log_dir_event(broker_id: int) -> bytes:
    """``/log_dir_event_notification/log_dir_event_<seq>``: ``{"version":1,"broker":<id>,
    "event":1}`` (Kafka's ``LogDirEventNotificationSequenceZNode``)."""
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes, *, path: str = "log dir event znode") -> int:
    """The broker id of a log dir event notification."""
    with _decoding(path):
        return _int(_object(_loads(data))["broker"], "broker")


def decode_config_change(data: bytes, *, path: str = "config change znode") -> str:
    with _decoding(path):
        doc = _object(_loads(data))
        if doc.get("version") == 1:  # {"version":1,"entity_type":"topics","entity_name":"t"}
            entity_type = _str(doc["entity_type"], "entity_type")
            return f"{entity_type}/{_str(doc['entity_name'], 'entity_name')}"
        return _str(doc["entity_path"], "entity_path")


# -- admin -----------------------------------------------------------------------------


def encode_reassignment(reassignment: Mapping[TopicPartition, list[int]]) -> bytes:
    """``/admin/reassign_partitions``, version 1."""
    parts = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in sorted(reassignment.items())
    ]
    return _dumps({"version": 1, "partitions": parts})


def _partition_list(doc: Any) -> list[dict[str, Any]]:
    parts = _object(doc).get("partitions") or []
    if not isinstance(parts, list):
        raise TypeError(f"field 'partitions' is not a list: {parts!r}")
    return [_object(p) for p in parts]


def _topic_partition(part: dict[str, Any]) -> TopicPartition:
    return TopicPartition(_str(part["topic"], "topic"), _int(part["partition"], "partition"))


def decode_reassignment(
    data: bytes, *, path: str = paths.REASSIGN_PARTITIONS
) -> dict[TopicPartition, list[int]]:
    with _decoding(path):
        return {
            _topic_partition(p): _int_list(p["replicas"], "replicas")
            for p in _partition_list(_loads(data))
        }


def encode_preferred_election(partitions: Iterable[TopicPartition]) -> bytes:
    """``/admin/preferred_replica_election``, version 1."""
    parts = [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))]
    return _dumps({"version": 1, "partitions": parts})


def decode_preferred_election(
    data: bytes, *, path: str = paths.PREFERRED_REPLICA_ELECTION
) -> set[TopicPartition]:
    with _decoding(path):
        return {_topic_partition(p) for p in _partition_list(_loads(data))}


# -- cluster id, producer id blocks ----------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes, *, path: str = paths.CLUSTER_ID) -> str:
    with _decoding(path):
        return _str(_object(_loads(data))["id"], "id")


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


def decode_producer_id_block(
    data: bytes, *, path: str = paths.LATEST_PRODUCER_ID_BLOCK
) -> ProducerIdBlock:
    with _decoding(path):
        doc = _object(_loads(data))
        return ProducerIdBlock(
            broker=_int(doc["broker"], "broker"),
            block_start=_int(doc["block_start"], "block_start"),
            block_end=_int(doc["block_end"], "block_end"),
        )

"""Broker and topic configuration with Kafka's key names, types, defaults and validation.

A broker reads a Java-properties ``server.properties`` into :class:`BrokerConfig`.  Every
known key has a :class:`ConfigDef`; keys that are also topic-level defaults name their
topic key (``log.retention.ms`` → ``retention.ms``).  Topic overrides are checked with
:func:`validate_topic_configs`, merged with the broker's defaults by :func:`topic_config`,
and described for DescribeConfigs by :func:`describe_topic_config` /
:func:`describe_broker_config`.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, NamedTuple

from weir.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_BOUNDS = {"int": (-(2**31), INT_MAX), "short": (-(2**15), 2**15 - 1), "long": (-(2**63), LONG_MAX)}


class ConfigError(ValueError):
    """An invalid or missing broker configuration value; the message names the key."""


class ConfigType(IntEnum):
    """DescribeConfigs ``ConfigType`` codes (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs ``ConfigSource`` codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


_TYPE_CODES = {
    "bool": ConfigType.BOOLEAN, "string": ConfigType.STRING, "int": ConfigType.INT,
    "short": ConfigType.SHORT, "long": ConfigType.LONG, "double": ConfigType.DOUBLE,
    "list": ConfigType.LIST, "class": ConfigType.CLASS, "password": ConfigType.PASSWORD,
}

# ---------------------------------------------------------------------------------------------
# Validators: callables that return None when fine, or a description of what is allowed.


@dataclass(frozen=True)
class Range:
    """Numeric range, either end open."""

    lo: float | None = None
    hi: float | None = None

    def __call__(self, value: Any) -> str | None:
        if value is None:
            return None
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            if self.hi is None:
                return f"a value of at least {self.lo}"
            if self.lo is None:
                return f"a value of at most {self.hi}"
            return f"a value between {self.lo} and {self.hi}"
        return None


@dataclass(frozen=True)
class OneOf:
    """A single value from a fixed set (lists: every element from the set)."""

    allowed: tuple[str, ...]
    case_insensitive: bool = False

    def __call__(self, value: Any) -> str | None:
        items = value if isinstance(value, list) else [value]
        for item in items:
            probe = item.lower() if self.case_insensitive and isinstance(item, str) else item
            pool = [a.lower() for a in self.allowed] if self.case_insensitive else self.allowed
            if probe not in pool:
                return "one of " + ", ".join(self.allowed)
        return None


def _principal_list(value: Any) -> str | None:
    """``super.users``: ``Type:name`` principals separated by ';' (Kafka's parseKafkaPrincipal)."""
    for item in str(value or "").split(";"):
        kind, sep, name = item.strip().partition(":")
        if item.strip() and (not sep or not kind or not name):
            return "principals of the form Type:name separated by ';' (User:admin;User:broker)"
    return None


def _non_empty(value: Any) -> str | None:
    return "a non-empty value" if value is None or value == "" or value == [] else None


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]*\]|[^:\[\]]*):(\d+)$")


def _listener_list(value: Any) -> str | None:
    for item in value or []:
        match = _LISTENER_RE.match(item)
        if match is None or not 0 <= int(match.group(3)) <= 65535:
            return "a list of NAME://host:port entries (port 0..65535)"
    return None


def _throttled_replicas(value: Any) -> str | None:
    if value == ["*"] or not value:
        return None
    if all(re.fullmatch(r"\d+:\d+", item) for item in value):
        return None
    return "'*' or a list of partition:broker pairs"


# ---------------------------------------------------------------------------------------------
# Definitions


def parse_ip_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ValueError(f"{item!r} is not host:count")
        out[host.strip()] = int(count)
    return out


def _ip_overrides(value: Any) -> str | None:
    try:
        parse_ip_overrides(str(value))
    except ValueError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class ConfigDef:
    """One broker configuration key."""

    name: str
    type: str
    default: Any = None
    validator: Callable[[Any], str | None] | None = None
    doc: str = ""
    topic_key: str | None = None
    required: bool = False
    fallback: tuple[str, int] | None = None  # (key, multiplier) used when this key is unset

    @property
    def type_code(self) -> ConfigType:
        return _TYPE_CODES[self.type]


def _d(name: str, type_: str, default: Any = None, validator: Any = None, doc: str = "",
       topic: str | None = None, **kw: Any) -> ConfigDef:
    return ConfigDef(name, type_, default, validator, doc, topic, **kw)


_AT_LEAST_0, _AT_LEAST_1 = Range(0), Range(1)
_COMPRESSION = OneOf(("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
_TIMESTAMP_TYPE = OneOf(("CreateTime", "LogAppendTime"))
_CLEANUP = OneOf(("compact", "delete"))

BROKER_CONFIGS: tuple[ConfigDef, ...] = (
    _d("broker.id", "int", None, Range(0), "This broker's id; unique in the cluster.",
       required=True),
    _d("broker.rack", "string", None, None, "Rack of the broker, for rack-aware placement."),
    _d("listeners", "list", "PLAINTEXT://:9092", _listener_list,
       "Listener URIs NAME://host:port; an empty host binds all interfaces."),
    _d("advertised.listeners", "list", None, _listener_list,
       "Listeners published to ZooKeeper for clients; defaults to listeners.",
       fallback=("listeners", 1)),
    _d("listener.security.protocol.map", "string",
       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", None,
       "Listener name to security protocol map."),
    _d("inter.broker.listener.name", "string", None, None, "Listener used between brokers."),
    _d("security.inter.broker.protocol", "string", "PLAINTEXT",
       OneOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")), "Inter-broker protocol."),
    # TLS and SASL (weir/security). Each may be given per listener with Kafka's prefix
    # listener.name.<listener>.<key>; PEM key and trust stores only (KIP-651).
    _d("ssl.keystore.type", "string", "PEM", OneOf(("PEM",), True),
       "Key store format; PEM (Weir reads no JKS or PKCS12 stores)."),
    _d("ssl.keystore.location", "string", None, None,
       "PEM file with the private key and the certificate chain."),
    _d("ssl.keystore.certificate.chain", "password", None, None,
       "The certificate chain as PEM text (with ssl.keystore.key)."),
    _d("ssl.keystore.key", "password", None, None, "The private key as PEM text."),
    _d("ssl.key.password", "password", None, None, "Password of an encrypted private key."),
    _d("ssl.truststore.type", "string", "PEM", OneOf(("PEM",), True),
       "Trust store format; PEM."),
    _d("ssl.truststore.location", "string", None, None, "PEM file of trusted certificates."),
    _d("ssl.truststore.certificates", "password", None, None,
       "Trusted certificates as PEM text."),
    _d("ssl.client.auth", "string", "none", OneOf(("none", "requested", "required")),
       "Client certificates: none, requested or required."),
    _d("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", OneOf(("TLSv1.2", "TLSv1.3")),
       "TLS versions accepted (nothing older than TLSv1.2)."),
    _d("ssl.protocol", "string", "TLSv1.3", OneOf(("TLSv1.2", "TLSv1.3", "TLS")),
       "TLS protocol of the contexts (informational; see ssl.enabled.protocols)."),
    _d("ssl.endpoint.identification.algorithm", "string", "https", None,
       "Host name verification of the inter-broker client: https, or empty for none."),
    _d("ssl.principal.mapping.rules", "string", "DEFAULT", None,
       "Rules mapping a client certificate's DN to a principal name (KIP-371)."),
    _d("sasl.enabled.mechanisms", "list", "SCRAM-SHA-256,SCRAM-SHA-512",
       OneOf(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
       "SASL mechanisms offered (Kafka's default GSSAPI is not supported)."),
    _d("sasl.mechanism.inter.broker.protocol", "string", "SCRAM-SHA-512",
       OneOf(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
       "SASL mechanism brokers use with each other."),
    _d("sasl.jaas.config", "password", None, None,
       "Login module options; per listener and mechanism as "
       "listener.name.<l>.<mechanism>.sasl.jaas.config."),
    _d("sasl.server.max.receive.size", "int", 524288, _AT_LEAST_1,
       "Largest request before authentication completes."),
    _d("connection.failed.authentication.delay.ms", "int", 100, _AT_LEAST_0,
       "Delay before closing a connection whose authentication failed."),
    _d("connections.max.reauth.ms", "long", 0, _AT_LEAST_0,
       "SASL session lifetime; clients re-authenticate before it ends (KIP-368; 0: never)."),
    # Authorization (Kafka's AclAuthorizer; weir/security/authorizer.py).
    _d("authorizer.class.name", "string", "",
       OneOf(("", "kafka.security.authorizer.AclAuthorizer")),
       "Authorizer: kafka.security.authorizer.AclAuthorizer (ACLs in ZooKeeper) or empty."),
    _d("super.users", "string", None, _principal_list,
       "Principals allowed everything, separated by ';' (User:admin;User:broker)."),
    _d("allow.everyone.if.no.acl.found", "bool", False, None,
       "Allow a resource that has no ACL at all to everyone."),
    _d("log.dir", "string", "/tmp/kafka-logs", None, "Log directory (used when log.dirs unset)."),
    _d("log.dirs", "list", None, _non_empty, "Comma-separated log directories.",
       fallback=("log.dir", 1)),
    _d("zookeeper.connect", "string", None, _non_empty,
       "ZooKeeper connect string host:port[,host:port][/chroot].", required=True),
    _d("zookeeper.session.timeout.ms", "int", 18000, _AT_LEAST_1, "ZooKeeper session timeout."),
    _d("zookeeper.connection.timeout.ms", "int", None, _AT_LEAST_1,
       "Max wait to connect to ZooKeeper; defaults to the session timeout.",
       fallback=("zookeeper.session.timeout.ms", 1)),
    _d("zookeeper.max.in.flight.requests", "int", 10, _AT_LEAST_1, "ZooKeeper pipelining."),
    _d("zookeeper.set.acl", "bool", False, None, "Use secure ACLs (not supported)."),
    _d("num.partitions", "int", 1, _AT_LEAST_1, "Default partitions of auto-created topics."),
    _d("default.replication.factor", "int", 1, _AT_LEAST_1,
       "Default replication factor of auto-created topics."),
    _d("auto.create.topics.enable", "bool", True, None, "Create topics on metadata requests."),
    _d("delete.topic.enable", "bool", True, None, "Allow topic deletion."),
    _d("min.insync.replicas", "int", 1, _AT_LEAST_1,
       "Minimum ISR size for acks=all produce.", "min.insync.replicas"),
    _d("unclean.leader.election.enable", "bool", False, None,
       "Allow out-of-sync replicas to become leader (may lose data).",
       "unclean.leader.election.enable"),
    _d("replica.lag.time.max.ms", "long", 30000, _AT_LEAST_1,
       "A follower not caught up for this long is removed from the ISR."),
    _d("replica.fetch.max.bytes", "int", 1048576, _AT_LEAST_0, "Bytes per partition per fetch."),
    _d("replica.fetch.response.max.bytes", "int", 10485760, _AT_LEAST_0,
       "Bytes per follower fetch response."),
    _d("replica.fetch.wait.max.ms", "int", 500, _AT_LEAST_0, "Follower fetch max wait."),
    _d("replica.fetch.min.bytes", "int", 1, _AT_LEAST_0, "Follower fetch min bytes."),
    _d("replica.fetch.backoff.ms", "int", 1000, _AT_LEAST_0, "Backoff after a fetch error."),
    _d("replica.socket.timeout.ms", "int", 30000, None, "Follower socket timeout."),
    _d("replica.socket.receive.buffer.bytes", "int", 65536, None, "Follower receive buffer."),
    _d("num.replica.fetchers", "int", 1, _AT_LEAST_1, "Fetcher threads per source broker."),
    _d("replica.high.watermark.checkpoint.interval.ms", "long", 5000, _AT_LEAST_1,
       "How often high watermarks are checkpointed."),
    _d("replica.selector.class", "class", None, None, "Replica selector (informational)."),
    _d("max.incremental.fetch.session.cache.slots", "int", 1000, _AT_LEAST_0,
       "Incremental fetch sessions (KIP-227) the broker keeps; 0 disables them."),
    _d("log.segment.bytes", "int", 1073741824, Range(14), "Maximum segment size.",
       "segment.bytes"),
    _d("log.roll.hours", "int", 168, _AT_LEAST_1, "Segment roll time in hours."),
    _d("log.roll.ms", "long", None, _AT_LEAST_1, "Segment roll time in ms.", "segment.ms",
       fallback=("log.roll.hours", 3600000)),
    _d("log.roll.jitter.hours", "int", 0, _AT_LEAST_0, "Segment roll jitter in hours."),
    _d("log.roll.jitter.ms", "long", None, _AT_LEAST_0, "Segment roll jitter in ms.",
       "segment.jitter.ms", fallback=("log.roll.jitter.hours", 3600000)),
    _d("log.retention.hours", "int", 168, None, "Retention time in hours."),
    _d("log.retention.minutes", "int", None, None, "Retention time in minutes.",
       fallback=("log.retention.hours", 60)),
    _d("log.retention.ms", "long", None, Range(-1), "Retention time in ms (-1: unlimited).",
       "retention.ms", fallback=("log.retention.minutes", 60000)),
    _d("log.retention.bytes", "long", -1, None, "Retention size per partition (-1: unlimited).",
       "retention.bytes"),
    _d("log.retention.check.interval.ms", "long", 300000, _AT_LEAST_1,
       "How often retention is checked."),
    _d("log.index.interval.bytes", "int", 4096, _AT_LEAST_0,
       "Bytes between offset index entries.", "index.interval.bytes"),
    _d("log.index.size.max.bytes", "int", 10485760, Range(4), "Maximum index file size.",
       "segment.index.bytes"),
    _d("log.flush.interval.messages", "long", LONG_MAX, _AT_LEAST_1,
       "Messages before a forced flush.", "flush.messages"),
    _d("log.flush.scheduler.interval.ms", "long", LONG_MAX, None, "Flusher check interval."),
    _d("log.flush.interval.ms", "long", None, _AT_LEAST_0, "Max time before a forced flush.",
       "flush.ms", fallback=("log.flush.scheduler.interval.ms", 1)),
    _d("log.flush.offset.checkpoint.interval.ms", "int", 60000, _AT_LEAST_0,
       "How often the recovery point is checkpointed."),
    _d("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, _AT_LEAST_0,
       "How often the log start offset is checkpointed."),
    _d("log.segment.delete.delay.ms", "long", 60000, _AT_LEAST_0,
       "Delay before deleting a segment file.", "file.delete.delay.ms"),
    _d("log.cleanup.policy", "list", "delete", _CLEANUP, "delete and/or compact.",
       "cleanup.policy"),
    _d("log.cleaner.enable", "bool", True, None, "Run the log cleaner (compaction)."),
    _d("log.cleaner.delete.retention.ms", "long", 86400000, _AT_LEAST_0,
       "How long delete tombstones are kept.", "delete.retention.ms"),
    _d("log.cleaner.min.compaction.lag.ms", "long", 0, _AT_LEAST_0,
       "Min age before compaction.", "min.compaction.lag.ms"),
    _d("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, _AT_LEAST_1,
       "Max age before compaction.", "max.compaction.lag.ms"),
    _d("log.cleaner.min.cleanable.ratio", "double", 0.5, Range(0, 1),
       "Dirty ratio that triggers cleaning.", "min.cleanable.dirty.ratio"),
    _d("log.cleaner.threads", "int", 1, _AT_LEAST_0,
       "Log cleaner threads (compaction runs off the event loop)."),
    _d("log.cleaner.dedupe.buffer.size", "long", 134217728, _AT_LEAST_0,
       "Bytes of key → offset map for all cleaner threads (24 bytes an entry, as Kafka)."),
    _d("log.cleaner.io.buffer.size", "int", 524288, _AT_LEAST_0,
       "Read buffer of a cleaner thread."),
    _d("log.cleaner.io.buffer.load.factor", "double", 0.9, Range(0, 1),
       "How full the dedupe map may get."),
    _d("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, None,
       "Cleaner I/O (read plus write) in bytes per second at most."),
    _d("log.cleaner.backoff.ms", "long", 15000, _AT_LEAST_0,
       "Sleep of a cleaner thread with nothing to clean."),
    _d("log.preallocate", "bool", False, None, "Preallocate segment files.", "preallocate"),
    _d("log.message.format.version", "string", "3.0-IV1", None,
       "Message format version (informational).", "message.format.version"),
    _d("log.message.timestamp.type", "string", "CreateTime", _TIMESTAMP_TYPE,
       "CreateTime or LogAppendTime.", "message.timestamp.type"),
    _d("log.message.timestamp.difference.max.ms", "long", LONG_MAX, _AT_LEAST_0,
       "Max allowed timestamp skew for CreateTime.", "message.timestamp.difference.max.ms"),
    _d("log.message.downconversion.enable", "bool", True, None,
       "Down-convert for old consumers.", "message.downconversion.enable"),
    _d("message.max.bytes", "int", 1048588, _AT_LEAST_0, "Largest record batch size.",
       "max.message.bytes"),
    _d("compression.type", "string", "producer", _COMPRESSION,
       "Final compression of a topic; producer keeps the producer's.", "compression.type"),
    _d("socket.request.max.bytes", "int", 104857600, _AT_LEAST_1, "Largest request."),
    _d("socket.send.buffer.bytes", "int", 102400, None, "SO_SNDBUF (-1: OS default)."),
    _d("socket.receive.buffer.bytes", "int", 102400, None, "SO_RCVBUF (-1: OS default)."),
    _d("connections.max.idle.ms", "long", 600000, None,
       "Close connections idle this long (-1: never)."),
    _d("max.connections", "int", INT_MAX, _AT_LEAST_0,
       "Open connections at most; accepting waits at the limit (KIP-402)."),
    _d("max.connections.per.ip", "int", INT_MAX, _AT_LEAST_0,
       "Connections from one address at most; more are closed."),
    _d("max.connections.per.ip.overrides", "string", "", _ip_overrides,
       "Per-address limits: host:count,host:count."),
    _d("fetch.max.bytes", "int", 57671680, _AT_LEAST_0, "Bytes per consumer fetch response."),
    _d("controlled.shutdown.enable", "bool", True, None, "Move leadership away on shutdown."),
    _d("controlled.shutdown.max.retries", "int", 3, _AT_LEAST_0, "Controlled shutdown tries."),
    _d("controlled.shutdown.retry.backoff.ms", "long", 5000, _AT_LEAST_0,
       "Backoff between controlled shutdown tries."),
    _d("auto.leader.rebalance.enable", "bool", True, None, "Move leaders back to preferred."),
    _d("leader.imbalance.per.broker.percentage", "int", 10, _AT_LEAST_0,
       "Imbalance percentage that triggers a rebalance."),
    _d("leader.imbalance.check.interval.seconds", "long", 300, _AT_LEAST_1,
       "How often imbalance is checked."),
    _d("controller.socket.timeout.ms", "int", 30000, None, "Controller-to-broker timeout."),
    _d("request.timeout.ms", "int", 30000, _AT_LEAST_0, "Request timeout."),
    _d("offsets.topic.replication.factor", "short", 3, _AT_LEAST_1,
       "Replication factor of __consumer_offsets."),
    _d("offsets.topic.num.partitions", "int", 50, _AT_LEAST_1,
       "Partitions of __consumer_offsets."),
    _d("offsets.topic.segment.bytes", "int", 104857600, _AT_LEAST_1,
       "Segment size of __consumer_offsets."),
    _d("offsets.retention.minutes", "int", 10080, _AT_LEAST_1, "Committed offset retention."),
    _d("offset.metadata.max.bytes", "int", 4096, _AT_LEAST_0,
       "Largest metadata string a committed offset may carry."),
    _d("offsets.retention.check.interval.ms", "long", 600000, _AT_LEAST_1,
       "How often stale offsets are checked."),
    _d("offsets.commit.timeout.ms", "int", 5000, _AT_LEAST_1, "Offset commit timeout."),
    _d("group.initial.rebalance.delay.ms", "int", 3000, None, "Delay of a group's first rebalance."),
    _d("group.min.session.timeout.ms", "int", 6000, None, "Min consumer session timeout."),
    _d("group.max.session.timeout.ms", "int", 1800000, None, "Max consumer session timeout."),
    _d("group.max.size", "int", INT_MAX, _AT_LEAST_1, "Max consumers in a group."),
    _d("transaction.state.log.replication.factor", "short", 3, _AT_LEAST_1,
       "Replication factor of __transaction_state."),
    _d("transaction.state.log.num.partitions", "int", 50, _AT_LEAST_1,
       "Partitions of __transaction_state."),
    _d("transaction.state.log.min.isr", "int", 2, _AT_LEAST_1, "min.insync.replicas of it."),
    _d("transaction.state.log.segment.bytes", "int", 104857600, _AT_LEAST_1,
       "Segment size of __transaction_state."),
    _d("transaction.max.timeout.ms", "int", 900000, _AT_LEAST_1,
       "Largest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT)."),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
       _AT_LEAST_1, "How often the transaction coordinator aborts timed-out transactions."),
    _d("transactional.id.expiration.ms", "int", 604800000, _AT_LEAST_1,
       "Idle time after which a transactional id's state is removed."),
    _d("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
       _AT_LEAST_1, "How often expired transactional ids are removed."),
    _d("producer.id.expiration.ms", "int", 86400000, _AT_LEAST_1,
       "Idle time after which a producer id with no open transaction is forgotten by a "
       "partition (its duplicate window and epoch)."),
    _d("producer.id.expiration.check.interval.ms", "int", 600000, _AT_LEAST_1,
       "How often partitions look for expired producer ids."),
    _d("transaction.partition.verification.enable", "bool", True, None,
       "Partition leaders verify with the transaction coordinator that a partition is in "
       "the transaction before its first transactional append (KIP-890)."),
    _d("leader.replication.throttled.rate", "long", LONG_MAX, _AT_LEAST_0,
       "Leader-side replication throttle, bytes/s."),
    _d("follower.replication.throttled.rate", "long", LONG_MAX, _AT_LEAST_0,
       "Follower-side replication throttle, bytes/s."),
    _d("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX, _AT_LEAST_1,
       "Copy rate of replica moves between this broker's log dirs (KIP-113), bytes/s."),
    _d("num.network.threads", "int", 3, _AT_LEAST_1, "Network threads (informational)."),
    _d("num.io.threads", "int", 8, _AT_LEAST_1, "I/O threads (informational)."),
    _d("background.threads", "int", 10, _AT_LEAST_1, "Background threads (informational)."),
    _d("queued.max.requests", "int", 500, _AT_LEAST_1,
       "Requests read and not yet handled or parked; at the limit, reading waits."),
    _d("num.recovery.threads.per.data.dir", "int", 1, _AT_LEAST_1,
       "Recovery threads (informational)."),
    _d("inter.broker.protocol.version", "string", "3.0-IV1", None,
       "Inter-broker protocol version (informational)."),
    _d("reserved.broker.max.id", "int", 1000, _AT_LEAST_0, "Max manually assigned broker id."),
    _d("broker.id.generation.enable", "bool", True, None, "Id generation (informational)."),
    _d("producer.purgatory.purge.interval.requests", "int", 1000, None, "Purgatory purge."),
    _d("fetch.purgatory.purge.interval.requests", "int", 1000, None, "Purgatory purge."),
    _d("metric.reporters", "list", "", None, "Metric reporter classes (informational)."),
    # Weir's own key (Kafka exposes metrics over JMX): the Prometheus /metrics endpoint.
    _d("metrics.http.port", "int", -1, Range(-1, 65535),
       "Port of the HTTP /metrics endpoint (-1: disabled, 0: any free port, logged)."),
)
BROKER_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in BROKER_CONFIGS}
_ATTRS: dict[str, str] = {d.name.replace(".", "_"): d.name for d in BROKER_CONFIGS}


@dataclass(frozen=True)
class TopicConfigDef:
    """One topic-level key; its default comes from ``broker_key`` (or ``default``)."""

    name: str
    type: str
    broker_key: str | None
    validator: Callable[[Any], str | None] | None
    doc: str
    default: Any = None

    @property
    def type_code(self) -> ConfigType:
        return _TYPE_CODES[self.type]


def _topic_defs() -> dict[str, TopicConfigDef]:
    defs = {d.topic_key: TopicConfigDef(d.topic_key, d.type, d.name, d.validator, d.doc)
            for d in BROKER_CONFIGS if d.topic_key}
    for name in ("leader.replication.throttled.replicas",
                 "follower.replication.throttled.replicas"):
        defs[name] = TopicConfigDef(name, "list", None, _throttled_replicas,
                                    "Replicas throttled: '*' or partition:broker pairs.", [])
    return dict(sorted(defs.items()))


TOPIC_CONFIGS: dict[str, TopicConfigDef] = _topic_defs()

# ---------------------------------------------------------------------------------------------
# Value parsing


def parse_value(key: str, type_: str, raw: Any) -> Any:
    """Parse ``raw`` as ``type_``; a non-string is read through its Kafka string form.

    Raises ConfigError naming the key, the value and the expected type.
    """
    if raw is None:
        return None
    text = raw.strip() if isinstance(raw, str) else (format_value(raw) or "")
    try:
        if type_ == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if type_ in _BOUNDS:
            value = int(text)
            lo, hi = _BOUNDS[type_]
            if not lo <= value <= hi:
                raise ValueError
            return value
        if type_ == "double":
            return float(text)
        if type_ == "list":
            return [item.strip() for item in text.split(",") if item.strip()]
        return text
    except ValueError:
        raise ConfigError(
            f"Invalid value {raw!r} for configuration {key}: expected {_type_words(type_)}"
        ) from None


def _type_words(type_: str) -> str:
    words = {"bool": "true or false", "int": "a 32-bit integer", "short": "a 16-bit integer",
             "long": "a 64-bit integer", "double": "a number", "list": "a comma-separated list"}
    return words.get(type_, "a string")


def format_value(value: Any) -> str | None:
    """Kafka's string form of a typed value (DescribeConfigs, properties files)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _check(key: str, value: Any, validator: Callable[[Any], str | None] | None) -> None:
    if validator is None or value is None:
        return
    allowed = validator(value)
    if allowed is not None:
        raise ConfigError(
            f"Invalid value {format_value(value)!r} for configuration {key}: must be {allowed}")


# ---------------------------------------------------------------------------------------------
# Broker configuration


def _listener_prefixed(key: str) -> bool:
    """``listener.name.<listener>.<key>``: a per-listener security setting (read by
    weir.security.listeners)."""
    return key.startswith("listener.name.") and key.count(".") >= 3


class Listener(NamedTuple):
    """One parsed listener: name (security protocol), host ('' = all interfaces), port."""

    name: str
    host: str
    port: int


def parse_listener(uri: str) -> Listener:
    match = _LISTENER_RE.match(uri.strip())
    if match is None:
        raise ConfigError(f"Invalid listener {uri!r}: expected NAME://host:port")
    host = match.group(2)
    if host.startswith("["):
        host = host[1:-1]
    return Listener(match.group(1).upper(), host, int(match.group(3)))


def _default_advertised_host() -> str:
    """The host advertised for a wildcard listener: this machine's name, else loopback."""
    name = socket.gethostname()
    try:
        socket.gethostbyname(name)
        return name
    except OSError:
        return "127.0.0.1"


class BrokerConfig:
    """A validated, typed broker configuration.

    Values are reached as ``cfg.get("log.segment.bytes")`` or ``cfg.log_segment_bytes``.
    Derived keys (``log.retention.ms`` ← minutes ← hours, ``log.dirs`` ← ``log.dir``, ...)
    resolve to their effective value.

    ``dynamic_default`` and ``dynamic_broker`` are the dynamic broker configs stored in
    ``/config/brokers/<default>`` and ``/config/brokers/<id>`` (see
    ``weir/server/dynamic_config.py``).  They override the static ``props`` in Kafka's order
    (DynamicBrokerConfig): per broker > cluster default > server.properties > built-in
    default; a key set at a higher tier hides its unit synonyms set lower down
    (``log.retention.hours`` set dynamically wins over a static ``log.retention.ms``).
    ``originals`` stays the static file's content.
    """

    def __init__(self, props: Mapping[str, Any],
                 dynamic_default: Mapping[str, str] | None = None,
                 dynamic_broker: Mapping[str, str] | None = None) -> None:
        self.originals: dict[str, Any] = dict(props)
        self.dynamic_default: dict[str, str] = dict(dynamic_default or {})
        self.dynamic_broker: dict[str, str] = dict(dynamic_broker or {})
        self.unknown: list[str] = sorted(
            k for k in props if k not in BROKER_CONFIG_DEFS and not _listener_prefixed(k))
        if dynamic_default is None and dynamic_broker is None:
            for key in self.unknown:
                log.warning("Unknown broker configuration key %r ignored", key)
        merged = dict(props)
        for tier in (self.dynamic_default, self.dynamic_broker):
            for key, value in tier.items():
                for synonym in _UNIT_SYNONYMS.get(key, (key,)):
                    merged.pop(synonym, None)
                merged[key] = value
        explicit = {k: parse_value(k, BROKER_CONFIG_DEFS[k].type, v)
                    for k, v in merged.items() if k in BROKER_CONFIG_DEFS}
        self._explicit: dict[str, Any] = explicit
        self._values: dict[str, Any] = {}
        for cdef in BROKER_CONFIGS:
            if cdef.required and explicit.get(cdef.name) is None:
                raise ConfigError(f"Missing required configuration {cdef.name}: {cdef.doc}")
            value = self._resolve(cdef.name)
            _check(cdef.name, value, cdef.validator)
            self._values[cdef.name] = value
        self._listeners = [parse_listener(u) for u in self._values["listeners"]]
        if not self._listeners:
            raise ConfigError("Invalid value '' for configuration listeners: must be non-empty")
        advertised = self._values["advertised.listeners"] or self._values["listeners"]
        self._advertised = [parse_listener(u) for u in advertised]
        if "advertised.listeners" in explicit:
            for lst in self._advertised:
                if lst.host in ("0.0.0.0", "::"):
                    raise ConfigError(
                        f"Invalid value {format_value(advertised)!r} for configuration"
                        " advertised.listeners: must not be a wildcard address")
        self._check_listener_security(explicit)

    def _check_listener_security(self, explicit: Mapping[str, Any]) -> None:
        """Kafka's listener rules: every listener name has a security protocol, names and
        ports are unique, the inter-broker listener is one of the advertised listeners."""
        from weir.security.listeners import SecurityConfigError, parse_protocol_map

        try:
            self.listener_protocols = parse_protocol_map(
                self._values["listener.security.protocol.map"])
        except SecurityConfigError as exc:
            raise ConfigError(str(exc)) from None
        for key, parsed in (("listeners", self._listeners),
                            ("advertised.listeners", self._advertised)):
            names = [lst.name for lst in parsed]
            if len(set(names)) != len(names):
                raise ConfigError(f"Invalid value {format_value(self._values[key] or self._values['listeners'])!r}"
                                  f" for configuration {key}: each listener must have a "
                                  "different name")
            for lst in parsed:
                if lst.name not in self.listener_protocols:
                    raise ConfigError(
                        f"Invalid value for configuration {key}: listener {lst.name} has no "
                        "security protocol in listener.security.protocol.map")
        ports = [lst.port for lst in self._listeners if lst.port != 0]
        if len(set(ports)) != len(ports):
            raise ConfigError(f"Invalid value {format_value(self._values['listeners'])!r} for "
                              "configuration listeners: each listener must have a different "
                              "port")
        if (explicit.get("inter.broker.listener.name") is not None
                and explicit.get("security.inter.broker.protocol") is not None):
            raise ConfigError("Only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol should be set")
        name = (self._values["inter.broker.listener.name"]
                or self._values["security.inter.broker.protocol"]).upper()
        if name not in {lst.name for lst in self._advertised}:
            key = ("inter.broker.listener.name" if explicit.get("inter.broker.listener.name")
                   else "security.inter.broker.protocol")
            raise ConfigError(f"Invalid value {name!r} for configuration {key}: "
                              "the inter-broker listener must be one of advertised.listeners "
                              f"({', '.join(lst.name for lst in self._advertised)})")
        self.inter_broker_listener_name: str = name

    @classmethod
    def from_dict(cls, props: Mapping[str, Any]) -> BrokerConfig:
        return cls(props)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BrokerConfig:
        try:
            return cls(read_properties(path))
        except OSError as exc:
            raise ConfigError(f"Cannot read configuration file {path}: {exc}") from exc

    def _resolve(self, key: str) -> Any:
        cdef = BROKER_CONFIG_DEFS[key]
        if self._explicit.get(key) is not None:
            return self._explicit[key]
        if cdef.fallback is None:
            return parse_value(key, cdef.type, cdef.default)
        base_key, factor = cdef.fallback
        base = self._resolve(base_key)
        if base is None:
            return None
        if cdef.type == "list" and isinstance(base, str):
            return parse_value(key, "list", base)
        if factor != 1:
            return -1 if base < 0 else base * factor
        return base

    def get(self, key: str) -> Any:
        """The effective typed value of a known key (KeyError for an unknown one)."""
        return self._values[key]

    def with_dynamic(self, dynamic_default: Mapping[str, str],
                     dynamic_broker: Mapping[str, str]) -> BrokerConfig:
        """The same static configuration under other dynamic tiers (ConfigError when the
        result is invalid)."""
        return BrokerConfig(self.originals, dynamic_default, dynamic_broker)

    def is_explicit(self, key: str) -> bool:
        """Whether ``key`` (or a key it derives from) was set in the file or dynamically."""
        while key is not None:
            if self._explicit.get(key) is not None:
                return True
            fallback = BROKER_CONFIG_DEFS[key].fallback
            key = fallback[0] if fallback else None
        return False

    def explicit_raw(self, key: str) -> str | None:
        """The value of ``key`` as written in the file (None when it is not set there)."""
        raw = self.originals.get(key)
        if raw is None or key not in BROKER_CONFIG_DEFS:
            return None
        return raw.strip() if isinstance(raw, str) else format_value(raw)

    def __getattr__(self, attr: str) -> Any:
        key = _ATTRS.get(attr)
        if key is None or attr.startswith("_"):
            raise AttributeError(attr)
        return self._values[key]

    def as_dict(self) -> dict[str, Any]:
        """Every known key with its effective typed value."""
        return dict(self._values)

    # -- listeners -------------------------------------------------------------------------
    @property
    def listeners_parsed(self) -> list[Listener]:
        return list(self._listeners)

    @property
    def listener_host(self) -> str:
        """The host to bind; '' when the listener names no host (all interfaces)."""
        host = self._listeners[0].host
        return "" if host in ("0.0.0.0", "::") else host

    @property
    def listener_port(self) -> int:
        return self._listeners[0].port

    @property
    def advertised_host(self) -> str:
        host = self._advertised[0].host
        return host if host not in ("", "0.0.0.0", "::") else _default_advertised_host()

    @property
    def advertised_port(self) -> int:
        return self._advertised[0].port

    def advertised_endpoint(self, name: str, bound_port: int) -> tuple[str, int]:
        """The advertised (host, port) of listener ``name``; port 0 is the bound port."""
        for lst in self._advertised:
            if lst.name == name:
                host = lst.host if lst.host not in ("", "0.0.0.0", "::") \
                    else _default_advertised_host()
                return host, lst.port or bound_port
        raise KeyError(name)

    def security_value(self, key: str) -> Any:
        """A security setting by Kafka key: a known key's typed value, or a
        ``listener.name.<l>.<key>`` override as written (None when unset)."""
        if key in BROKER_CONFIG_DEFS:
            return self._values[key]
        raw = self.originals.get(key)
        return raw.strip() if isinstance(raw, str) else raw

    @property
    def log_dir_paths(self) -> list[Path]:
        return [Path(p) for p in self._values["log.dirs"]]

    def __repr__(self) -> str:
        return (f"BrokerConfig(broker.id={self.broker_id}, listeners={self.listeners},"
                f" zookeeper.connect={self.zookeeper_connect!r})")


# ---------------------------------------------------------------------------------------------
# Topic configuration


def validate_topic_configs(overrides: Mapping[str, str]) -> dict[str, Any]:
    """Parse and check topic overrides; KafkaError(INVALID_CONFIG) names the bad key."""
    typed: dict[str, Any] = {}
    for key, raw in overrides.items():
        tdef = TOPIC_CONFIGS.get(key)
        if tdef is None:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {key}")
        try:
            value = parse_value(key, tdef.type, raw)
            _check(key, value, tdef.validator)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.invalid_config, str(exc)) from None
        typed[key] = value
    return typed


def topic_config(broker: BrokerConfig, overrides: Mapping[str, str] | None = None
                 ) -> dict[str, Any]:
    """The effective typed config of a topic, keyed by topic-level names."""
    typed = validate_topic_configs(overrides or {})
    result = {}
    for name, tdef in TOPIC_CONFIGS.items():
        if name in typed:
            result[name] = typed[name]
        elif tdef.broker_key is not None:
            result[name] = broker.get(tdef.broker_key)
        else:
            result[name] = tdef.default
    return result


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    """One DescribeConfigs result entry."""

    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    is_default: bool
    type: int
    doc: str
    synonyms: list[ConfigSynonym] = field(default_factory=list)


# Broker keys that are one setting in different units, highest priority first
# (DynamicBrokerConfig.brokerConfigSynonyms); every other key is its own only synonym.
_UNIT_SYNONYMS: dict[str, tuple[str, ...]] = {}
for _group in (("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
               ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
               ("log.retention.ms", "log.retention.minutes", "log.retention.hours")):
    for _key in _group:
        _UNIT_SYNONYMS[_key] = _group
del _group, _key


def _broker_synonyms(broker: BrokerConfig, key: str, sensitive: bool) -> list[ConfigSynonym]:
    """Kafka's synonym list for broker key ``key`` (ConfigHelper.configSynonyms): the keys set
    dynamically for this broker (DYNAMIC_BROKER_CONFIG), then as cluster default
    (DYNAMIC_DEFAULT_BROKER_CONFIG), then in server.properties (STATIC_BROKER_CONFIG), then
    those with a built-in default (DEFAULT_CONFIG), each tier in synonym order."""
    names = _UNIT_SYNONYMS.get(key, (key,))
    out = []
    tiers = ((broker.dynamic_broker.get, ConfigSource.DYNAMIC_BROKER_CONFIG),
             (broker.dynamic_default.get, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
             (broker.explicit_raw, ConfigSource.STATIC_BROKER_CONFIG))
    for lookup, source in tiers:
        for name in names:
            raw = lookup(name)
            if raw is not None:
                out.append(ConfigSynonym(name, None if sensitive else raw, int(source)))
    for name in names:
        default = BROKER_CONFIG_DEFS[name].default
        if default is not None:
            value = None if sensitive else format_value(default)
            out.append(ConfigSynonym(name, value, int(ConfigSource.DEFAULT_CONFIG)))
    return out


def describe_topic_config(broker: BrokerConfig, overrides: Mapping[str, str] | None = None
                          ) -> list[ConfigEntry]:
    """Every topic-level key as ConfigHelper.createTopicConfigEntry describes it: the
    effective value; synonyms in Kafka's order (the topic override as DYNAMIC_TOPIC_CONFIG,
    then the broker keys set dynamically per broker and as cluster default, then in
    server.properties, then built-in defaults); the source is the first synonym's (DEFAULT_CONFIG when there is none); never read-only.

    One deliberate difference: Kafka 3.x drops leading unit synonyms that differ from the
    primary broker key (so ``log.retention.hours=24`` in the file describes ``retention.ms``
    as DEFAULT_CONFIG); Weir keeps them and reports STATIC_BROKER_CONFIG, which is where the
    value comes from.
    """
    overrides = dict(overrides or {})
    effective = topic_config(broker, overrides)
    entries = []
    for name, tdef in TOPIC_CONFIGS.items():
        sensitive = tdef.type == "password"
        value = None if sensitive else format_value(effective[name])
        synonyms = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, value, int(ConfigSource.DYNAMIC_TOPIC_CONFIG)))
        if tdef.broker_key is not None:
            synonyms += _broker_synonyms(broker, tdef.broker_key, sensitive)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(
            name=name, value=value, source=int(source),
            read_only=False, sensitive=sensitive,
            is_default=source == ConfigSource.DEFAULT_CONFIG,
            type=int(tdef.type_code), doc=tdef.doc, synonyms=synonyms))
    return entries


# Broker keys that can change without a restart (Kafka's DynamicBrokerConfig.AllDynamicConfigs,
# the part Weir applies live): the broker defaults of topic configs (DynamicLogConfig, all but
# the message format version), the replication throttles (BrokerConfigHandler) and the
# connection limits (SocketServer.ReconfigurableConfigs).  All may be set per broker and as
# the cluster default; every other key is read-only.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    [d.name for d in BROKER_CONFIGS
     if d.topic_key is not None and d.name != "log.message.format.version"]
    + ["leader.replication.throttled.rate", "follower.replication.throttled.rate",
       "replica.alter.log.dirs.io.max.bytes.per.second",
       # Kafka's LogCleaner.ReconfigurableConfigs
       "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
       "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
       "log.cleaner.backoff.ms",
       "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"])


def describe_broker_config(broker: BrokerConfig, per_broker: bool = True
                           ) -> list[ConfigEntry]:
    """Broker keys as ConfigHelper.createBrokerConfigEntry describes them: synonyms from the
    key itself on (dynamic per broker, dynamic cluster default, server.properties, built-in
    default), source the first synonym's, passwords sensitive with no value, read-only
    unless in :data:`DYNAMIC_BROKER_CONFIGS`.

    ``per_broker`` False describes the cluster-default resource (an empty broker name): only
    the keys set in ``/config/brokers/<default>``, with only their cluster-default synonyms.
    """
    entries = []
    for cdef in BROKER_CONFIGS:
        if not per_broker and cdef.name not in broker.dynamic_default:
            continue
        sensitive = cdef.type == "password"
        synonyms = _broker_synonyms(broker, cdef.name, sensitive)
        while synonyms and synonyms[0].name != cdef.name:
            synonyms.pop(0)  # another unit's key: it describes that key, not this one
        if not per_broker:
            synonyms = [s for s in synonyms
                        if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        if sensitive:
            value = None
        elif per_broker:
            value = format_value(broker.get(cdef.name))
        else:
            value = broker.dynamic_default[cdef.name]
        entries.append(ConfigEntry(
            name=cdef.name, value=value, source=int(source),
            read_only=cdef.name not in DYNAMIC_BROKER_CONFIGS,
            sensitive=sensitive, is_default=source == ConfigSource.DEFAULT_CONFIG,
            type=int(cdef.type_code), doc=cdef.doc, synonyms=synonyms))
    return entries


# ---------------------------------------------------------------------------------------------
# Java properties files

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[tuple[int, int, str]]:
    """Yield (first line index, last line index, joined text) of each logical line."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start, current = i, lines[i].lstrip(" \t\f")
        if current.startswith(("#", "!")) or not current:
            yield start, i, current
            i += 1
            continue
        while _continues(current) and i + 1 < len(lines):
            i += 1
            current = current[:-1] + lines[i].lstrip(" \t\f")
        if _continues(current):
            current = current[:-1]
        yield start, i, current
        i += 1


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-properties text: ``k=v``, ``k: v``, ``k v``, comments, continuations."""
    props: dict[str, str] = {}
    for _first, _last, line in _logical_lines(text):
        if not line or line.startswith(("#", "!")):
            continue
        key, value = _split_key_value(line)
        props[key] = value
    return props


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    return parse_properties(Path(path).read_text(encoding="utf-8"))


def _escape(text: str, is_key: bool) -> str:
    out = []
    for idx, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ch in "=:#!" and is_key or ch == " " and (is_key or idx == 0):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def format_property(key: str, value: Any) -> str:
    return f"{_escape(key, True)}={_escape(format_value(value) or '', False)}"


def write_properties(path: str | os.PathLike[str], props: Mapping[str, Any],
                     header: str | None = None) -> None:
    """Set ``props`` in a properties file, creating it if needed.

    An existing file keeps its comments, order and other keys: each given key is rewritten
    in place (its first occurrence; later duplicates are dropped) and new keys are appended.
    The file is replaced atomically.
    """
    target = Path(path)
    old = target.read_text(encoding="utf-8") if target.exists() else ""
    if not old and header:
        old = "".join(f"# {line}\n" for line in header.splitlines())
    lines = old.splitlines()
    pending = dict(props)
    out: list[str] = []
    cursor = 0
    for first, last, logical in _logical_lines(old):
        out.extend(lines[cursor:first])
        cursor = last + 1
        key = None if not logical or logical.startswith(("#", "!")) else \
            _split_key_value(logical)[0]
        if key is not None and key in props:
            if key in pending:
                out.append(format_property(key, pending.pop(key)))
            continue
        out.extend(lines[first:last + 1])
    out.extend(lines[cursor:])
    out.extend(format_property(k, v) for k, v in pending.items())
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text("\n".join(out) + "\n", encoding="utf-8")
    os.replace(tmp, target)

"""The key table: every broker and topic configuration key Weir knows, with Kafka's name,
type, default, validator, documentation and dynamic-update mode.

This table is the single source of the defaults: :class:`~weir.config.broker.BrokerConfig`
resolves every key from it, the typed accessors (``accessors.py``) are generated from it, and
the settings objects of the broker's parts (``ControllerSettings``, ``LogConfig``,
``CleanerConfig``, ``FetcherSettings``, ``ReplicationSettings``, ``GroupConfig``,
``GroupCoordinatorSettings``, ``TransactionCoordinatorSettings``, ``TlsSettings``) take their
field defaults from :func:`default_value` and their values from a broker config through their
``from_config`` constructors; code reading a raw ``server.properties`` uses
:func:`effective_value`.

A broker key that is also a topic-level default names its topic key (``log.retention.ms`` →
``retention.ms``), as Kafka's ``LogConfig.TopicConfigSynonyms``.  A key with a ``fallback``
takes another key's value (times a unit factor) when unset (``log.roll.ms`` ←
``log.roll.hours``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from weir.config.validators import (
    INT_MAX,
    LONG_MAX,
    OneOf,
    Range,
    Validator,
    ip_overrides,
    listener_list,
    non_empty,
    parse_value,
    principal_list,
    throttled_replicas,
)

__all__ = [
    "BROKER_CONFIGS", "BROKER_CONFIG_DEFS", "DYNAMIC_BROKER_CONFIGS", "THREAD_POOL_CONFIGS",
    "TOPIC_CONFIGS", "UNIT_SYNONYMS", "ConfigDef", "ConfigSource", "ConfigType", "TopicConfigDef",
    "default_value", "effective_value", "resolve", "topic_default",
]


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


@dataclass(frozen=True)
class ConfigDef:
    """One broker configuration key."""

    name: str
    type: str
    default: Any = None
    validator: Validator | None = None
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
    _d("listeners", "list", "PLAINTEXT://:9092", listener_list,
       "Listener URIs NAME://host:port; an empty host binds all interfaces."),
    _d("advertised.listeners", "list", None, listener_list,
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
    _d("super.users", "string", None, principal_list,
       "Principals allowed everything, separated by ';' (User:admin;User:broker)."),
    _d("allow.everyone.if.no.acl.found", "bool", False, None,
       "Allow a resource that has no ACL at all to everyone."),
    _d("log.dir", "string", "/tmp/kafka-logs", None, "Log directory (used when log.dirs unset)."),
    _d("log.dirs", "list", None, non_empty, "Comma-separated log directories.",
       fallback=("log.dir", 1)),
    _d("zookeeper.connect", "string", None, non_empty,
       "ZooKeeper connect string host:port[,host:port][/chroot].", required=True),
    _d("zookeeper.session.timeout.ms", "int", 18000, _AT_LEAST_1, "ZooKeeper session timeout."),
    _d("zookeeper.connection.timeout.ms", "int", None, _AT_LEAST_1,
       "Max wait to connect to ZooKeeper; defaults to the session timeout.",
       fallback=("zookeeper.session.timeout.ms", 1)),
    _d("zookeeper.max.in.flight.requests", "int", 10, _AT_LEAST_1, "ZooKeeper pipelining."),
    _d("zookeeper.set.acl", "bool", False, None,
       "Secure ZooKeeper ACLs; true is refused (no SASL/TLS ZooKeeper client)."),
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
    _d("max.connections.per.ip.overrides", "string", "", ip_overrides,
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
    # Topic tables (weir/tables, docs/tables.md): where the Iceberg tables of topics with
    # weir.iceberg.mode=key_value live, and how far a table may trail its log.
    _d("weir.iceberg.catalog.type", "string", "sql", OneOf(("sql", "rest")),
       "Iceberg catalog of the topic tables: sql (SQLAlchemy, SQLite by default) or rest."),
    _d("weir.iceberg.catalog.uri", "string", None, None,
       "The catalog's URI: an SQLAlchemy URL (sql), the REST endpoint (rest)."),
    _d("weir.iceberg.warehouse", "string", None, None,
       "Where the tables' files go: a path or a pyarrow/fsspec URL."),
    _d("weir.iceberg.namespace", "string", "weir", non_empty,
       "Iceberg namespace of the topic tables; a table is named after its topic."),
    _d("weir.iceberg.target.lag.ms", "long", 60000, _AT_LEAST_1,
       "How far a topic table may trail the log's last stable offset, in ms.",
       "weir.iceberg.target.lag.ms"),
)
BROKER_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in BROKER_CONFIGS}


@dataclass(frozen=True)
class TopicConfigDef:
    """One topic-level key; its default comes from ``broker_key`` (or ``default``)."""

    name: str
    type: str
    broker_key: str | None
    validator: Validator | None
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
        defs[name] = TopicConfigDef(name, "list", None, throttled_replicas,
                                    "Replicas throttled: '*' or partition:broker pairs.", [])
    # Weir's topic tables (docs/tables.md): a topic-only key, as Redpanda's
    # redpanda.iceberg.mode.
    defs["weir.iceberg.mode"] = TopicConfigDef(
        "weir.iceberg.mode", "string", None, OneOf(("disabled", "key_value")),
        "disabled, or key_value: the topic is also kept as an Iceberg table.", "disabled")
    return dict(sorted(defs.items()))


TOPIC_CONFIGS: dict[str, TopicConfigDef] = _topic_defs()


# Broker keys that are one setting in different units, highest priority first
# (DynamicBrokerConfig.brokerConfigSynonyms); every other key is its own only synonym.
UNIT_SYNONYMS: dict[str, tuple[str, ...]] = {
    key: group
    for group in (("log.roll.ms", "log.roll.hours"),
                  ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                  ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
                  ("log.retention.ms", "log.retention.minutes", "log.retention.hours"))
    for key in group
}

# Broker keys that can change without a restart (Kafka's DynamicBrokerConfig.AllDynamicConfigs,
# the part Weir applies live): the broker defaults of topic configs (DynamicLogConfig, all but
# the message format version), the replication throttles (BrokerConfigHandler), the
# connection limits (SocketServer.ReconfigurableConfigs), the thread pool sizes and
# advertised.listeners.  All but advertised.listeners may also be set as the cluster default
# (weir.server.dynamic_config has Kafka's per-broker-only keys); every other key Weir knows
# is read-only.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    [d.name for d in BROKER_CONFIGS
     if d.topic_key is not None and d.name != "log.message.format.version"]
    + ["leader.replication.throttled.rate", "follower.replication.throttled.rate",
       "replica.alter.log.dirs.io.max.bytes.per.second",
       # Kafka's LogCleaner.ReconfigurableConfigs
       "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
       "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
       "log.cleaner.backoff.ms",
       "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
       # Kafka's DynamicThreadPool.ReconfigurableConfigs: dynamic in Kafka; informational
       # in Weir (one event loop), statically as dynamically
       "num.io.threads", "num.network.threads", "num.replica.fetchers",
       "num.recovery.threads.per.data.dir", "background.threads",
       # Kafka's DynamicListenerConfig, per broker only: the broker re-registers with the
       # new endpoints
       "advertised.listeners"])

THREAD_POOL_CONFIGS: tuple[str, ...] = (
    "num.io.threads", "num.network.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "background.threads")
# Kafka's DynamicThreadPool keys: a dynamic change may at most double or halve the value.


def resolve(key: str, explicit: dict[str, Any]) -> Any:
    """The effective typed value of ``key`` given the typed values set explicitly: the
    explicit value, else its fallback key's value times the unit factor (-1 stays -1), else
    the built-in default."""
    cdef = BROKER_CONFIG_DEFS[key]
    if explicit.get(key) is not None:
        return explicit[key]
    if cdef.fallback is None:
        return parse_value(key, cdef.type, cdef.default)
    base_key, factor = cdef.fallback
    base = resolve(base_key, explicit)
    if base is None:
        return None
    if cdef.type == "list" and isinstance(base, str):
        return parse_value(key, "list", base)
    if factor != 1:
        return -1 if base < 0 else base * factor
    return base


def effective_value(props: Mapping[str, Any], key: str) -> Any:
    """The typed value of ``key`` in raw properties ``props`` (a ``server.properties`` read
    without building a whole broker config): as written, else through its fallback keys,
    else the default.  ConfigError names a key whose value is malformed."""
    explicit: dict[str, Any] = {}
    probe: str | None = key
    while probe is not None:
        cdef = BROKER_CONFIG_DEFS[probe]
        if props.get(probe) is not None:
            explicit[probe] = parse_value(probe, cdef.type, props[probe])
        probe = cdef.fallback[0] if cdef.fallback else None
    return resolve(key, explicit)


def default_value(key: str) -> Any:
    """Kafka's default of broker key ``key``, typed, with fallbacks resolved
    (``default_value("log.roll.ms")`` is 168 hours in ms)."""
    return resolve(key, {})


def topic_default(key: str) -> Any:
    """The default of topic key ``key``: its broker key's default (``segment.ms`` ←
    ``log.roll.ms``), or the topic key's own."""
    tdef = TOPIC_CONFIGS[key]
    return default_value(tdef.broker_key) if tdef.broker_key else tdef.default

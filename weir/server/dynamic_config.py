"""Dynamic broker configs and runtime log levels: Kafka's DynamicBrokerConfig, the broker
checks of ConfigAdminManager / ZkAdminManager, BrokerConfigHandler and RuntimeLoggerManager.

Storage is Kafka's: per-broker configs in ``/config/brokers/<id>``, cluster defaults in
``/config/brokers/<default>`` (an empty resource name in the admin APIs), each write followed
by a ``/config/changes/config_change_<seq>`` notification (``{"version":2,"entity_path":
"brokers/<id>"}``).  Every broker watches the notifications and re-reads both znodes; the
effective value of a key is, highest first, the per-broker value, the cluster default, the
static ``server.properties`` value, the built-in default (see
:class:`weir.config.BrokerConfig`).  Only the keys in
:data:`weir.config.DYNAMIC_BROKER_CONFIGS` may be set; a change takes effect on the running
parts without a restart:

- broker defaults of topic configs (``log.retention.ms``, ``log.retention.bytes``,
  ``log.segment.bytes``, ``log.cleanup.policy``, ``min.insync.replicas``,
  ``message.max.bytes``, ...) for every topic without its own override (DynamicLogConfig);
- ``unclean.leader.election.enable``: also tells this broker's controller, which elects the
  offline partitions at once when it becomes true (KafkaController's
  UncleanLeaderElectionEnable event);
- ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``;
- ``max.connections``, ``max.connections.per.ip``, ``max.connections.per.ip.overrides``.

Kafka's thread pool keys (``num.io.threads``, ``num.network.threads``, ...) are dynamic as in
Kafka, within its bounds (half to double the current value), and as informational as their
static values.  Keys Weir does not know are custom configs: stored and described as Kafka
stores and describes them (DynamicConfig.Broker.validate allows custom properties), without
effect.

Errors follow Kafka 3.x (DynamicBrokerConfig.validateConfigs, in its order, each answered
INVALID_REQUEST "Invalid config value for resource ConfigResource(type=BROKER, name='<id>'):
..." as ZkAdminManager answers a ConfigException): a read-only key ("Cannot update these
configs dynamically: Set(...)"), a keystore/truststore key without a listener prefix, an
invalid value, a per-broker key (listener and SASL settings) as a cluster default; a broker
id other than this broker's is INVALID_REQUEST too.

``BROKER_LOGGER`` resources (type 8) are the broker's Python loggers: DescribeConfigs lists
every logger with its effective level (Kafka's level names: TRACE, DEBUG, INFO, WARN, ERROR,
FATAL), IncrementalAlterConfigs SET / DELETE change them live on the broker that receives
the request; nothing is stored in ZooKeeper (RuntimeLoggerManager).

The checks and the resolution are plain functions; :class:`DynamicBrokerConfigs` is the thin
shell that reads ZooKeeper, keeps the live configuration and calls the
:class:`BrokerReconfigurable` parts it is given (:mod:`weir.server.reconfigurables`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from weir.config import (
    BROKER_CONFIG_DEFS,
    DYNAMIC_BROKER_CONFIGS,
    THREAD_POOL_CONFIGS,
    BrokerConfig,
    ConfigError,
    parse_listener,
    parse_value,
)
from weir.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"
"""The ZooKeeper entity name of the cluster-wide defaults (Kafka's ZooKeeperInternals)."""


# -- sans-I/O core ----------------------------------------------------------------------------


def _broker_id_of(name: str, what: str = "Broker id") -> int:
    try:
        return int(name)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request,
                         f"{what} must be an integer, but it is: {name}") from None


def broker_entity(resource_name: str, broker_id: int) -> str:
    """The ZooKeeper entity of an altered BROKER resource: ``<default>`` for an empty name,
    else the name, which must be this broker's id (ZkAdminManager.getBrokerId; clients send a
    per-broker change to that broker)."""
    if not resource_name:
        return DEFAULT_ENTITY
    if _broker_id_of(resource_name) != broker_id:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected broker id, expected {broker_id}, but received "
                         f"{resource_name}")
    return str(broker_id)


def check_describe_name(resource_name: str, broker_id: int) -> bool:
    """A described BROKER resource: True for this broker, False for the cluster default
    (empty name); INVALID_REQUEST for anything else (ConfigHelper.describeConfigs)."""
    if not resource_name:
        return False
    if _broker_id_of(resource_name) != broker_id:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected broker id, expected {broker_id} or empty string, but "
                         f"received {resource_name}")
    return True


def _value_problem(key: str, raw: str) -> str | None:
    """Why ``raw`` is not a valid value of broker key ``key`` (None when it is)."""
    cdef = BROKER_CONFIG_DEFS[key]
    try:
        value = parse_value(key, cdef.type, raw)
    except ConfigError as exc:
        return str(exc)
    if cdef.validator is not None and value is not None:
        allowed = cdef.validator(value)
        if allowed is not None:
            return f"Invalid value {raw!r} for configuration {key}: must be {allowed}"
    return None


# Kafka's DynamicBrokerConfig.DynamicSecurityConfigs (SslConfigs.RECONFIGURABLE_CONFIGS): they
# may change only per listener (``listener.name.<l>.<key>``), never under their own name.
SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates"})

# Kafka's DynamicBrokerConfig.PerBrokerConfigs: the security configs and DynamicListenerConfig
# .ReconfigurableConfigs less the cluster-level ones (max.connections,
# max.connection.creation.rate, num.network.threads); refused as cluster defaults.
PER_BROKER_CONFIGS = SECURITY_CONFIGS | frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol",
    "sasl.jaas.config", "sasl.enabled.mechanisms", "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds"})
_CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({
    "max.connections", "max.connection.creation.rate", "num.network.threads"})
_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]*\.(.*)")  # Kafka's ListenerConfigRegex


def _base_name(key: str) -> str:
    """The key without its ``listener.name.<l>.`` prefix."""
    found = _LISTENER_PREFIX.fullmatch(key)
    return found.group(1) if found else key


def is_custom(key: str) -> bool:
    """A key Weir does not know (a plugin's, another version's, a topic-level name): Kafka
    stores such keys on a broker resource as they are (DynamicConfig.Broker.validate with
    custom properties allowed); they have no effect on Weir."""
    return _base_name(key) not in BROKER_CONFIG_DEFS


def _read_only(key: str) -> bool:
    base = _base_name(key)
    if base not in BROKER_CONFIG_DEFS:
        return False
    if base != key:  # a listener's TLS / SASL setting: Weir reloads none of them live
        return True
    return key not in DYNAMIC_BROKER_CONFIGS and key not in SECURITY_CONFIGS


def _kafka_set(keys: Iterable[str]) -> str:
    return f"Set({', '.join(sorted(keys))})"  # Scala's Set.toString, in sorted order


def check_broker_configs(props: Mapping[str, str], per_broker: bool = True) -> None:
    """DynamicBrokerConfig.validateConfigs for a new per-broker or default config set, in
    Kafka's order: keys that cannot change dynamically, security keys without a listener
    prefix, values, per-broker keys as cluster defaults (each a ConfigException, which
    ZkAdminManager answers INVALID_REQUEST).  Keys Weir does not know are custom configs,
    stored as they are."""
    def refuse(keys: Iterable[str], message: str) -> None:
        found = [k for k in keys]
        if found:
            raise KafkaError(ErrorCode.invalid_request, f"{message}: {_kafka_set(found)}")

    refuse((k for k in props if _read_only(k)), "Cannot update these configs dynamically")
    refuse((k for k in props if k in SECURITY_CONFIGS),
           "These security configs can be dynamically updated only per-listener using the "
           "listener prefix")
    for key in sorted(props):
        if not is_custom(key) and (problem := _value_problem(key, props[key])) is not None:
            raise KafkaError(ErrorCode.invalid_request, problem)
    if not per_broker:
        refuse((k for k in props if k in PER_BROKER_CONFIGS or (
            _base_name(k) != k and _base_name(k) not in _CLUSTER_LEVEL_LISTENER_CONFIGS)),
            "Cannot update these configs at default cluster level, broker id must be "
            "specified")


def check_thread_counts(old: BrokerConfig, new: BrokerConfig) -> None:
    """Kafka's DynamicThreadPool.validateReconfiguration: a thread count may change to at
    least half and at most double its current value."""
    for key in THREAD_POOL_CONFIGS:
        before, after = old.get(key), new.get(key)
        if after == before:
            continue
        failed = f"Dynamic thread count update validation failed for {key}={after}"
        if after <= 0:
            raise ConfigError(f"{failed}, value should be at least 1")
        if after < before // 2:
            raise ConfigError(f"{failed}, value should be at least half the current value "
                              f"{before}")
        if after > before * 2:
            raise ConfigError(f"{failed}, value should not be greater than double the "
                              f"current value {before}")


def check_listeners(old: BrokerConfig, new: BrokerConfig) -> None:
    """Kafka's DynamicListenerConfig.validateReconfiguration for a new
    ``advertised.listeners``: every advertised listener is one of ``listeners`` (the
    inter-broker listener among them is checked by :class:`BrokerConfig`)."""
    key = "advertised.listeners"
    if new.get(key) == old.get(key):
        return
    names = [parse_listener(uri).name for uri in new.get(key) or new.get("listeners")]
    bound = [lst.name for lst in new.listeners_parsed]
    if not set(names) <= set(bound):
        raise ConfigError(f"Advertised listeners '{', '.join(names)}' must be a subset of "
                          f"listeners '{', '.join(bound)}'")


def usable_stored(props: Mapping[str, str], entity: str) -> dict[str, str]:
    """The stored dynamic configs this broker can apply (DynamicBrokerConfig
    .fromPersistentProps): read-only and invalid entries are left out with an error in the
    log, so that one bad znode entry does not block the others or a fix; custom keys stay."""
    out = {}
    for key, raw in props.items():
        if _read_only(key) or key in SECURITY_CONFIGS:
            log.error("dynamic broker config %s=%r in /config/brokers/%s cannot be updated "
                      "dynamically; ignored", key, raw, entity)
        elif entity == DEFAULT_ENTITY and key in PER_BROKER_CONFIGS:
            log.error("per-broker config %s defined at default cluster level will be "
                      "ignored", key)
        elif not is_custom(key) and (problem := _value_problem(key, raw)) is not None:
            log.error("dynamic broker config in /config/brokers/%s ignored: %s", entity, problem)
        else:
            out[key] = raw
    return out


def validated_config(config: BrokerConfig, props: Mapping[str, str], entity: str
                     ) -> BrokerConfig:
    """The effective configuration once ``props`` replaces ``entity``'s dynamic configs
    (DynamicBrokerConfig.validate); INVALID_REQUEST as ZkAdminManager answers a
    ConfigException: "Invalid config value for resource ConfigResource(type=BROKER,
    name='<id>'): <why>"."""
    name = "" if entity == DEFAULT_ENTITY else entity
    try:
        check_broker_configs(props, per_broker=entity != DEFAULT_ENTITY)
        default, per_broker = config.dynamic_default, config.dynamic_broker
        if entity == DEFAULT_ENTITY:
            default = dict(props)
        else:
            per_broker = dict(props)
        try:
            new = config.with_dynamic(default, per_broker)
            check_thread_counts(config, new)
            check_listeners(config, new)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Invalid dynamic configuration: {exc}") from None
    except KafkaError as exc:
        raise KafkaError(exc.code, f"Invalid config value for resource "
                                   f"ConfigResource(type=BROKER, name='{name}'): "
                                   f"{exc.message}") from None
    return new


def changed_keys(old: BrokerConfig, new: BrokerConfig) -> set[str]:
    """Broker keys whose effective value differs between ``old`` and ``new``."""
    before, after = old.as_dict(), new.as_dict()
    return {k for k in after if before.get(k) != after[k]}


# -- runtime log levels (BROKER_LOGGER) --------------------------------------------------------

ROOT_LOGGER = "root"
_TRACE = 5
_KAFKA_LEVELS = {"TRACE": _TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
                 "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _level_name(level: int) -> str:
    for name, value in sorted(_KAFKA_LEVELS.items(), key=lambda item: -item[1]):
        if level >= value:
            return name
    return "TRACE"


def _existing_logger(name: str) -> logging.Logger | None:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def describe_loggers() -> dict[str, str]:
    """Every logger of the process with its effective level (Log4jController.loggers)."""
    out = {ROOT_LOGGER: _level_name(logging.getLogger().getEffectiveLevel())}
    for name, found in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(found, logging.Logger):
            out[name] = _level_name(found.getEffectiveLevel())
    return out


def check_logger_ops(ops: list[tuple[str, int, str | None]]) -> None:
    """RuntimeLoggerManager.validateLogLevelConfigs."""
    valid = ", ".join(sorted(_KAFKA_LEVELS))
    for name, op, value in ops:
        if op in (SET, DELETE) and _existing_logger(name) is None:
            raise KafkaError(ErrorCode.invalid_config, f"Logger {name} does not exist!")
        if op == SET:
            if value not in _KAFKA_LEVELS:
                raise KafkaError(ErrorCode.invalid_config,
                                 f"Cannot set the log level of {name} to {value} as it is not "
                                 f"a supported log level. Valid log levels are {valid}")
        elif op == DELETE:
            if name == ROOT_LOGGER:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"Removing the log level of the {ROOT_LOGGER} logger is not "
                                 "allowed")
        elif op in (APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.invalid_request,
                             f"{'APPEND' if op == APPEND else 'SUBTRACT'} operation is not "
                             "allowed for the BROKER_LOGGER resource")
        else:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Unknown operation type {op} is not allowed for the "
                             "BROKER_LOGGER resource")


def alter_loggers(resource_name: str, broker_id: int,
                  ops: list[tuple[str, int, str | None]], validate_only: bool) -> None:
    """IncrementalAlterConfigs on a BROKER_LOGGER resource (RuntimeLoggerManager
    .applyChangesForResource): checked as a whole, then applied in order; DELETE makes the
    logger inherit its parent's level again."""
    if _broker_id_of(resource_name, "Node id") != broker_id:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected node id. Expected {broker_id}, but received "
                         f"{resource_name}")
    names = [name for name, _, _ in ops]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    check_logger_ops(ops)
    if validate_only:
        return
    for name, op, value in ops:
        logger = _existing_logger(name)
        assert logger is not None
        if op == SET:
            logger.setLevel(_KAFKA_LEVELS[str(value)])
            log.warning("Updated the log level of %s to %s", name, value)
        else:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", name)


def describe_logger_resource(resource_name: str, broker_id: int) -> dict[str, str]:
    """DescribeConfigs of a BROKER_LOGGER resource (ConfigHelper.describeConfigs)."""
    if not resource_name:
        raise KafkaError(ErrorCode.invalid_request, "Broker id must not be empty")
    if _broker_id_of(resource_name) != broker_id:
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected broker id, expected {broker_id} but received "
                         f"{resource_name}")
    return describe_loggers()


# -- the shell --------------------------------------------------------------------------------

Change = Callable[[dict[str, str], dict[str, Any]], dict[str, str]]


class BrokerReconfigurable(Protocol):
    """One running part a dynamic broker config change reconfigures (Kafka's
    ``BrokerReconfigurable``: its ``reconfigurableConfigs`` and ``reconfigure``); the
    implementations are in :mod:`weir.server.reconfigurables`."""

    def reconfigures(self, key: str) -> bool:
        """Whether a change of broker key ``key`` concerns this part."""
        ...

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> Awaitable[None] | None:
        """Take ``new``; work that goes on in the background is returned (awaited by
        :meth:`DynamicBrokerConfigs.stop`)."""
        ...


class BrokerConfigStore(Protocol):
    """``/config/brokers/<entity>`` (weir.coordination.zk.ZkClient): each write is followed by
    a change notification (AdminZkClient.changeBrokerConfig)."""

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]: ...

    def set_entity_config(self, entity_type: str, name: str,
                          configs: Mapping[str, str]) -> Any: ...


class DynamicBrokerConfigs:
    """Reads ``/config/brokers/<default>`` and ``/config/brokers/<id>``, keeps the broker's
    live configuration (``config`` / ``publish``) at the effective one and reconfigures the
    running parts (DynamicBrokerConfig.updateCurrentConfig → the BrokerReconfigurables, in
    the order given)."""

    def __init__(self, broker_id: int, store: BrokerConfigStore | None,
                 config: Callable[[], BrokerConfig], publish: Callable[[BrokerConfig], None],
                 reconfigurables: Sequence[BrokerReconfigurable]) -> None:
        self.broker_id = broker_id
        self._store = store
        self._config = config
        self._publish = publish
        self._reconfigurables = list(reconfigurables)
        self._lock = asyncio.Lock()  # one read-modify-write of a znode at a time
        self._reload_lock = asyncio.Lock()  # reloads in order: a later one reads newer data
        # The latest background work of each part (a log cleaner restart), by position.
        self._in_flight: dict[int, Awaitable[None]] = {}

    @property
    def store(self) -> BrokerConfigStore:
        if self._store is None:
            raise RuntimeError("no ZooKeeper store for dynamic broker configs")
        return self._store

    async def stop(self) -> None:
        """Let reconfigurations in flight (a log cleaner restart) finish; the broker stops
        those parts next."""
        in_flight, self._in_flight = self._in_flight, {}
        for work in in_flight.values():
            try:
                await work
            except Exception:
                log.exception("reconfiguring with new dynamic broker configs failed")

    async def reload(self) -> None:
        """Re-read both znodes and apply what changed (startup and every change
        notification)."""
        async with self._reload_lock:
            await self._reload()

    async def _reload(self) -> None:
        store = self.store
        default = usable_stored(
            await asyncio.to_thread(store.get_entity_config, "brokers", DEFAULT_ENTITY),
            DEFAULT_ENTITY)
        own = usable_stored(
            await asyncio.to_thread(store.get_entity_config, "brokers", str(self.broker_id)),
            str(self.broker_id))
        current = self._config()
        if default == current.dynamic_default and own == current.dynamic_broker:
            return
        try:
            new = current.with_dynamic(default, own)
        except ConfigError as exc:
            log.error("dynamic broker configs not applied (default %s, broker %s): %s",
                      default, own, exc)
            return
        self.apply(new)

    def apply(self, new: BrokerConfig) -> None:
        """Make ``new`` the broker's configuration and reconfigure the parts that depend on
        the keys that changed."""
        old = self._config()
        self._publish(new)
        changed = changed_keys(old, new)
        if not changed:
            return
        log.info("broker %d: dynamic config updated: %s", self.broker_id,
                 ", ".join(f"{k}={new.get(k)}" for k in sorted(changed)))
        for index, part in enumerate(self._reconfigurables):
            if any(part.reconfigures(key) for key in changed):
                work = part.reconfigure(old, new)
                if work is not None:
                    self._in_flight[index] = work

    async def alter(self, resource_name: str, change: Change, validate_only: bool) -> None:
        """AlterConfigs / IncrementalAlterConfigs of a BROKER resource: compute the new
        per-broker or default set from the stored one, validate it against the whole
        configuration, store it with a change notification (AdminZkClient
        .changeBrokerConfig) and apply it here at once; the other brokers follow the
        notification."""
        store = self.store
        entity = broker_entity(resource_name, self.broker_id)
        async with self._lock:
            stored = await asyncio.to_thread(store.get_entity_config, "brokers", entity)
            current = usable_stored(stored, entity)
            config = self._config()
            new = change(dict(current), config.as_dict())
            validated_config(config, new, entity)
            if validate_only or new == stored:
                return
            log.info("broker %d: updating dynamic configs of %s: %s", self.broker_id,
                     "the cluster default" if entity == DEFAULT_ENTITY else f"broker {entity}",
                     new)
            await asyncio.to_thread(store.set_entity_config, "brokers", entity, new)
        await self.reload()

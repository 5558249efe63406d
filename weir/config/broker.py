"""BrokerConfig: a validated, typed broker configuration, with Kafka's precedence of the
dynamic tiers, derived keys and listener rules."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from weir.config.accessors import BrokerConfigAccessors
from weir.config.keys import BROKER_CONFIG_DEFS, BROKER_CONFIGS, UNIT_SYNONYMS, resolve
from weir.config.properties import read_properties
from weir.config.security_protocols import SecurityConfigError, parse_protocol_map
from weir.config.validators import LISTENER_RE, ConfigError, check, format_value, parse_value

__all__ = ["BrokerConfig", "Listener", "parse_listener"]

log = logging.getLogger("weir.config")


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
    match = LISTENER_RE.match(uri.strip())
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


class BrokerConfig(BrokerConfigAccessors):
    """A validated, typed broker configuration (Kafka's ``KafkaConfig``).

    Values are reached through the typed properties (``cfg.log_segment_bytes``, generated
    from the key table into ``accessors.py``) or by Kafka name (``cfg.get("log.segment.bytes")``).
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
                for synonym in UNIT_SYNONYMS.get(key, (key,)):
                    merged.pop(synonym, None)
                merged[key] = value
        explicit = {k: parse_value(k, BROKER_CONFIG_DEFS[k].type, v)
                    for k, v in merged.items() if k in BROKER_CONFIG_DEFS}
        self._values: dict[str, Any] = {}
        for cdef in BROKER_CONFIGS:
            if cdef.required and explicit.get(cdef.name) is None:
                raise ConfigError(f"Missing required configuration {cdef.name}: {cdef.doc}")
            value = resolve(cdef.name, explicit)
            check(cdef.name, value, cdef.validator)
            self._values[cdef.name] = value
        if self._values["broker.id.generation.enable"] and \
                self._values["broker.id"] > self._values["reserved.broker.max.id"]:
            # Kafka's KafkaConfig (ZooKeeper mode): the ids above it are for generated ones.
            raise ConfigError(
                f"Invalid value {self._values['broker.id']} for configuration broker.id: must "
                "not be greater than reserved.broker.max.id "
                f"({self._values['reserved.broker.max.id']}) while broker.id.generation.enable "
                "is true")
        if self._values["zookeeper.set.acl"]:
            # Kafka's KafkaServer.initZkClient refuses secure ACLs without an authenticated
            # ZooKeeper client; Weir's has neither SASL nor TLS.
            raise ConfigError(
                "Invalid value true for configuration zookeeper.set.acl: secure ZooKeeper "
                "ACLs need an authenticated ZooKeeper client (SASL or TLS), which Weir does "
                "not have; Kafka refuses to start in that case too")
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
        try:
            self.listener_protocols: dict[str, str] = parse_protocol_map(
                self._values["listener.security.protocol.map"])
        except SecurityConfigError as exc:
            raise ConfigError(str(exc)) from None
        for key, parsed in (("listeners", self._listeners),
                            ("advertised.listeners", self._advertised)):
            names = [lst.name for lst in parsed]
            if len(set(names)) != len(names):
                written = format_value(self._values[key] or self._values["listeners"])
                raise ConfigError(f"Invalid value {written!r} for configuration {key}: each "
                                  "listener must have a different name")
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
        self._inter_broker_listener_name = name

    @classmethod
    def from_dict(cls, props: Mapping[str, Any]) -> BrokerConfig:
        return cls(props)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BrokerConfig:
        try:
            return cls(read_properties(path))
        except OSError as exc:
            raise ConfigError(f"Cannot read configuration file {path}: {exc}") from exc

    def get(self, key: str) -> Any:
        """The effective typed value of a known key (KeyError for an unknown one)."""
        return self._values[key]

    def with_dynamic(self, dynamic_default: Mapping[str, str],
                     dynamic_broker: Mapping[str, str]) -> BrokerConfig:
        """The same static configuration under other dynamic tiers (ConfigError when the
        result is invalid)."""
        return BrokerConfig(self.originals, dynamic_default, dynamic_broker)

    def explicit_raw(self, key: str) -> str | None:
        """The value of ``key`` as written in the file (None when it is not set there)."""
        raw = self.originals.get(key)
        if raw is None or key not in BROKER_CONFIG_DEFS:
            return None
        return raw.strip() if isinstance(raw, str) else format_value(raw)

    def as_dict(self) -> dict[str, Any]:
        """Every known key with its effective typed value."""
        return dict(self._values)

    # -- listeners -------------------------------------------------------------------------
    @property
    def inter_broker_listener_name(self) -> str:
        """The listener brokers use with each other: ``inter.broker.listener.name``, else
        the one named by ``security.inter.broker.protocol`` (upper case)."""
        return self._inter_broker_listener_name

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

"""Topic configuration: overrides checked against the key table, merged with the broker's
defaults, and described for DescribeConfigs (topic and broker resources) with Kafka's
config sources and synonyms (``ConfigHelper``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from weir.config.keys import (
    BROKER_CONFIG_DEFS,
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    UNIT_SYNONYMS,
    ConfigSource,
    ConfigType,
)
from weir.config.validators import ConfigError, check, format_value, parse_value
from weir.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from weir.config.broker import BrokerConfig

__all__ = ["ConfigEntry", "ConfigSynonym", "describe_broker_config", "describe_topic_config",
           "topic_config", "validate_topic_configs"]


def validate_topic_configs(overrides: Mapping[str, str]) -> dict[str, Any]:
    """Parse and check topic overrides; KafkaError(INVALID_CONFIG) names the bad key."""
    typed: dict[str, Any] = {}
    for key, raw in overrides.items():
        tdef = TOPIC_CONFIGS.get(key)
        if tdef is None:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {key}")
        try:
            value = parse_value(key, tdef.type, raw)
            check(key, value, tdef.validator)
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


def _broker_synonyms(broker: BrokerConfig, key: str, sensitive: bool) -> list[ConfigSynonym]:
    """Kafka's synonym list for broker key ``key`` (ConfigHelper.configSynonyms): the keys set
    dynamically for this broker (DYNAMIC_BROKER_CONFIG), then as cluster default
    (DYNAMIC_DEFAULT_BROKER_CONFIG), then in server.properties (STATIC_BROKER_CONFIG), then
    those with a built-in default (DEFAULT_CONFIG), each tier in synonym order."""
    names = UNIT_SYNONYMS.get(key, (key,))
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
    # ConfigHelper.configSynonyms ends with dropWhile(name != key): the synonyms listed
    # before the key itself (another unit's key set higher up) are left out.
    while out and out[0].name != key:
        out.pop(0)
    return out


def describe_topic_config(broker: BrokerConfig, overrides: Mapping[str, str] | None = None
                          ) -> list[ConfigEntry]:
    """Every topic-level key as ConfigHelper.createTopicConfigEntry describes it: the
    effective value; synonyms in Kafka's order (the topic override as DYNAMIC_TOPIC_CONFIG,
    then the broker keys set dynamically per broker and as cluster default, then in
    server.properties, then built-in defaults); the source is the first synonym's
    (DEFAULT_CONFIG when there is none); never read-only.

    As in Kafka 3.x, the broker synonyms start at the topic key's own broker key: the unit
    synonyms listed before it are dropped, so ``log.retention.hours=24`` in the file (and
    ``log.retention.ms`` unset) describes ``retention.ms`` with its effective value but as
    DEFAULT_CONFIG with no synonyms, and a default ``retention.ms`` lists no synonym.
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
    return entries + _custom_entries(broker, per_broker)


def _custom_entries(broker: BrokerConfig, per_broker: bool) -> list[ConfigEntry]:
    """Keys Weir does not know, set in the file or stored dynamically (custom configs): as
    Kafka describes a key of unknown type (KafkaConfig.maybeSensitive): sensitive, so no
    value, read-only, type UNKNOWN."""
    tiers = ((broker.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
             (broker.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
             ({k: broker.originals[k] for k in broker.unknown},
              ConfigSource.STATIC_BROKER_CONFIG))
    if not per_broker:
        tiers = tiers[1:2]
    names = dict.fromkeys(k for tier, _ in tiers for k in tier if k not in BROKER_CONFIG_DEFS)
    entries = []
    for name in names:
        synonyms = [ConfigSynonym(name, None, int(source))
                    for tier, source in tiers if name in tier]
        entries.append(ConfigEntry(
            name=name, value=None, source=synonyms[0].source, read_only=True, sensitive=True,
            is_default=False, type=int(ConfigType.UNKNOWN), doc="", synonyms=synonyms))
    return entries



"""Broker and topic configuration with Kafka's key names, types, defaults and validation.

A broker reads a Java-properties ``server.properties`` into :class:`BrokerConfig`.  The
package's modules:

- ``validators``: the validator language (ranges, fixed sets, listener and principal lists)
  and the parsing of values into their types; :class:`ConfigError` names the bad key.
- ``keys``: the key table (every key's type, default, validator, doc, topic-level synonym and
  whether it is dynamic); the single source of every default (:func:`default_value`).
- ``accessors``: typed properties generated from the key table (``codegen``).
- ``broker``: :class:`BrokerConfig`, the dynamic tiers' precedence and the listener rules.
- ``topic``: topic overrides checked (:func:`validate_topic_configs`), merged with the
  broker's defaults (:func:`topic_config`) and described for DescribeConfigs.
- ``properties``: ``.properties`` reading and in-place writing.
- ``security_protocols``: Kafka's security protocols and ``listener.security.protocol.map``,
  shared with :mod:`weir.security.listeners` (which sits above this package).

The settings objects of the broker's parts are built from a BrokerConfig by their own
``from_config`` constructors (``ControllerSettings``, ``LogConfig``, ``CleanerConfig``,
``ReplicationSettings``, ``FetcherSettings``, ``GroupConfig``, ``GroupCoordinatorSettings``,
``TransactionCoordinatorSettings``, ``TopicAdminSettings``); see README.md.
"""

from weir.config.broker import BrokerConfig, Listener, parse_listener
from weir.config.keys import (
    BROKER_CONFIG_DEFS,
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    THREAD_POOL_CONFIGS,
    TOPIC_CONFIGS,
    UNIT_SYNONYMS,
    ConfigDef,
    ConfigSource,
    ConfigType,
    TopicConfigDef,
    default_value,
    effective_value,
    topic_default,
)
from weir.config.properties import (
    format_property,
    parse_properties,
    read_properties,
    write_properties,
)
from weir.config.topic import (
    ConfigEntry,
    ConfigSynonym,
    describe_broker_config,
    describe_topic_config,
    topic_config,
    validate_topic_configs,
)
from weir.config.validators import (
    INT_MAX,
    LONG_MAX,
    ConfigError,
    OneOf,
    Range,
    format_value,
    parse_ip_overrides,
    parse_value,
)

__all__ = [
    "BROKER_CONFIGS", "BROKER_CONFIG_DEFS", "DYNAMIC_BROKER_CONFIGS", "INT_MAX", "LONG_MAX",
    "THREAD_POOL_CONFIGS", "TOPIC_CONFIGS", "UNIT_SYNONYMS", "BrokerConfig", "ConfigDef", "ConfigEntry", "ConfigError",
    "ConfigSource", "ConfigSynonym", "ConfigType", "Listener", "OneOf", "Range",
    "TopicConfigDef", "default_value", "describe_broker_config", "describe_topic_config",
    "effective_value",
    "format_property", "format_value", "parse_ip_overrides", "parse_listener",
    "parse_properties", "parse_value", "read_properties", "topic_config", "topic_default",
    "validate_topic_configs", "write_properties",
]

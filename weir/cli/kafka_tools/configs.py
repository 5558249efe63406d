"""``kafka-configs.sh``: Kafka 3.x's ConfigCommand for topics, brokers, the broker default,
broker loggers and users' SCRAM credentials, over the Kafka protocol.

``--describe`` prints ConfigCommand's block per entity (``Dynamic configs for topic t
are:``, ``All configs ...`` with ``--all``, ``Default configs for brokers in the cluster
are:``), one ``  name=value sensitive=false synonyms={SOURCE:name=value, ...}`` line per
key; ``--alter`` applies ``--add-config k1=v1,k2=[a,b]`` and ``--delete-config k1,k2``
through IncrementalAlterConfigs and prints ``Completed updating config for topic t.``.
Broker requests go through :mod:`weir.cli.admin_configs` (every synonym, the default
resource and BROKER_LOGGER, which librdkafka lacks); users' SCRAM credentials through
:mod:`weir.cli.kafka_tools.configs_users` (KIP-554).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from weir.cli.kafka_tools import common
from weir.cli.kafka_tools.common import ToolError

PROG = "kafka-configs.sh"
ENTITY_TYPES = ("topics", "brokers", "broker-loggers", "users")
_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
            3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
            5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
_DYNAMIC = {"topics": {1}, "brokers": {2}, "broker-default": {3}, "broker-loggers": {6}}


def build_parser() -> argparse.ArgumentParser:
    p = common.parser(PROG, "Add, remove or describe configs of topics, brokers, "
                            "broker loggers and users (SCRAM credentials).")
    p.add_argument("--describe", action="store_true", help="List configs for the entity.")
    p.add_argument("--alter", action="store_true", help="Alter the configs of the entity.")
    p.add_argument("--entity-type", choices=ENTITY_TYPES, default=None,
                   help="topics, brokers, broker-loggers or users")
    p.add_argument("--entity-name", default=None, metavar="NAME",
                   help="Name of the entity (topic name, broker id); default with "
                        "--describe: every entity of the type")
    p.add_argument("--entity-default", action="store_true",
                   help="The cluster-wide default of --entity-type brokers")
    p.add_argument("--topic", default=None, help="The same as --entity-type topics "
                                                 "--entity-name TOPIC")
    p.add_argument("--broker", default=None, metavar="ID",
                   help="The same as --entity-type brokers --entity-name ID")
    p.add_argument("--broker-defaults", action="store_true",
                   help="The same as --entity-type brokers --entity-default")
    p.add_argument("--broker-logger", default=None, metavar="ID",
                   help="The same as --entity-type broker-loggers --entity-name ID")
    p.add_argument("--user", default=None, metavar="PRINCIPAL",
                   help="The same as --entity-type users --entity-name PRINCIPAL")
    p.add_argument("--add-config", dest="add_configs", action="append", default=[],
                   metavar="K1=V1,K2=[V1,V2]", help="Configs to set (--alter)")
    p.add_argument("--delete-config", dest="delete_configs", action="append", default=[],
                   metavar="K1,K2", help="Configs to remove (--alter)")
    p.add_argument("--all", action="store_true",
                   help="--describe: every config, not only the dynamic ones")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(PROG, "Error while executing config command : ", _main, argv)


def _entity(p: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, name; "" for the broker default, None for every entity)."""
    shortcuts = [(t, n) for t, n in (
        ("topics", args.topic), ("brokers", args.broker),
        ("brokers", "" if args.broker_defaults else None),
        ("broker-loggers", args.broker_logger), ("users", args.user)) if n is not None]
    if shortcuts:
        if len(shortcuts) > 1 or args.entity_type or args.entity_name or args.entity_default:
            p.error("give one entity: --topic, --broker, --broker-defaults, --broker-logger, "
                    "--user or --entity-type with --entity-name/--entity-default")
        return shortcuts[0]
    if args.entity_type is None:
        p.error("Missing required argument \"[entity-type]\"")
    if args.entity_default:
        if args.entity_type != "brokers" or args.entity_name:
            p.error("--entity-default goes with --entity-type brokers, without --entity-name")
        return "brokers", ""
    return args.entity_type, args.entity_name


def _main(argv: Sequence[str]) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    action = common.one_action(p, args, ("describe", "alter"))
    kind, name = _entity(p, args)
    for what, value in (("broker", name), ("broker-logger", name)):
        if kind.startswith(what) and value and not value.strip().isdigit():
            raise ToolError(f"The entity name for {kind} must be a valid integer broker id, "
                            f"but it is: {value}", name="INVALID_ARGUMENT")
    if kind == "users":
        from weir.cli.kafka_tools import configs_users

        if action == "alter":
            if not name:
                p.error("--alter needs an entity name")
            return configs_users.alter(args, name)
        if args.add_configs or args.delete_configs:
            p.error("--add-config and --delete-config go with --alter")
        return configs_users.describe(args, name)
    if action == "alter":
        if name is None:
            p.error("--alter needs an entity name (or --entity-default)")
        if not args.add_configs and not args.delete_configs:
            p.error("--alter needs --add-config and/or --delete-config")
        return alter(args, kind, name)
    if args.add_configs or args.delete_configs:
        p.error("--add-config and --delete-config go with --alter")
    return describe(args, kind, name)


def _words(kind: str, name: str) -> str:
    if kind == "brokers":
        return "default config for brokers in the cluster" if name == "" else \
            f"config for broker {name}"
    return f"config for {'topic' if kind == 'topics' else 'broker-logger'} {name}"


def alter(args: argparse.Namespace, kind: str, name: str) -> int:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    from weir.cli.admin_configs import _own_alter, cluster_broker

    sets = common.key_values(args.add_configs, "--add-config")
    deletes = [k.strip() for text in args.delete_configs for k in text.split(",") if k.strip()]
    what = f"altering {_words(kind, name)}"
    a = common.admin_args(args)
    if kind == "broker-loggers" or (kind == "brokers" and name == ""):
        _own_alter(a, 8 if kind == "broker-loggers" else 4, name,
                   [(k, 0, v) for k, v in sets] + [(k, 1, None) for k in deletes], what)
    else:
        if kind == "brokers":
            cluster_broker(a, name)  # a broker the cluster lacks: BROKER_NOT_AVAILABLE now
        rtype = ConfigResource.Type.TOPIC if kind == "topics" else ConfigResource.Type.BROKER
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in sets]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in deletes]
        res = ConfigResource(rtype, name, incremental_configs=entries)
        admin = common.admin(args)
        futures = admin.incremental_alter_configs([res], request_timeout=args.timeout)
        common.wait(futures[res], args, what)
    print(f"Completed updating {_words(kind, name)}.")
    return 0


def describe(args: argparse.Namespace, kind: str, name: str | None) -> int:
    names = [name] if name is not None else _all_names(args, kind)
    blocks = []
    for entity in names:
        configs = _configs(args, kind, entity)
        dynamic = _DYNAMIC["broker-default" if kind == "brokers" and entity == "" else kind]
        rows = [(k, e) for k, e in sorted(configs.items())
                if args.all or int(e.source) in dynamic]
        blocks.append(_header(kind, entity, args.all))
        blocks.extend(_line(k, e) for k, e in rows)
    if blocks:
        print("\n".join(blocks))
    return 0


def _all_names(args: argparse.Namespace, kind: str) -> list[str]:
    admin = common.admin(args)
    md = admin.list_topics(timeout=args.timeout)
    if kind == "topics":
        return sorted(md.topics)
    return [str(b) for b in sorted(md.brokers)]


def _configs(args: argparse.Namespace, kind: str, name: str) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource

    from weir.cli.admin_configs import _own_describe

    if kind != "topics":
        words = "the broker default" if name == "" else f"{kind[:-1]} {name}"
        return _own_describe(common.admin_args(args), 8 if kind == "broker-loggers" else 4,
                             name, f"describing {words}")
    res = ConfigResource(ConfigResource.Type.TOPIC, name)
    admin = common.admin(args)
    return common.wait(admin.describe_configs([res], request_timeout=args.timeout)[res],
                       args, f"describing configs of topic {name}")


def _header(kind: str, name: str, all_keys: bool) -> str:
    if kind == "brokers" and name == "":
        return "Default configs for brokers in the cluster are:"
    entity = {"topics": "topic", "brokers": "broker", "broker-loggers": "broker-logger"}[kind]
    return f"{'All' if all_keys else 'Dynamic'} configs for {entity} {name} are:"


def _line(key: str, entry: Any) -> str:
    synonyms = entry.synonyms
    pairs = list(synonyms.items()) if isinstance(synonyms, dict) else list(synonyms or [])
    text = ", ".join(f"{_SOURCES.get(int(s.source), s.source)}:{n}={_value(s)}"
                     for n, s in pairs)
    sensitive = bool(entry.is_sensitive)
    value = "null" if sensitive else _value(entry)
    return f"  {key}={value} sensitive={str(sensitive).lower()} synonyms={{{text}}}"


def _value(entry: Any) -> str:
    return "null" if entry.value is None else str(entry.value)


if __name__ == "__main__":
    sys.exit(main())

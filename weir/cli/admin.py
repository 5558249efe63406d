"""Operator commands over the Kafka protocol: ``weir topic``, ``weir group``, ``weir config``.

They speak to ``--bootstrap-server`` with confluent-kafka's AdminClient, as Kafka's
kafka-topics.sh, kafka-consumer-groups.sh and kafka-configs.sh do (default: the ``weir up``
cluster recorded in ``--data-dir``).  People get tables; ``--json`` prints one JSON document
for scripts.  A Kafka error is printed as ``weir: <error name>: <message>`` with exit code 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from weir.cli import int32
from weir.cli.admin_common import (  # re-exported: the commands' shared names, as before
    DEFAULT_TIMEOUT_S,
    AdminCliError,
    _common,
    _key_value,
    _metadata,
    admin_client,
    bootstrap_of,
    check_reachable,
    client_settings,
    emit,
    positive_seconds,
    reachable_bootstrap,
    table,
    wait,
)
from weir.cli.errors import command_of, kafka_error_text, kafka_name, report

__all__ = ["DEFAULT_TIMEOUT_S", "AdminCliError", "admin_client", "bootstrap_of",
           "check_reachable", "client_settings", "emit", "kafka_error_text", "kafka_name",
           "positive_seconds", "reachable_bootstrap", "table", "wait"]


def add_parsers(sub: Any) -> None:
    """``topic``, ``group`` and ``config`` under the ``weir`` parser."""
    topic = sub.add_parser("topic", help="create, list, describe, delete and alter topics")
    tsub = topic.add_subparsers(dest="topic_command", required=True, metavar="ACTION")
    p = _common(tsub.add_parser("create", help="create a topic"))
    p.add_argument("name", help="the topic")
    p.add_argument("--partitions", type=int32, default=-1, help="default: num.partitions")
    p.add_argument("--replication-factor", type=int32, default=-1,
                   help="default: default.replication.factor")
    p.add_argument("--config", dest="configs", type=_key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="topic config override (repeatable)")
    p = _common(tsub.add_parser("list", help="list topic names"))
    p.add_argument("--exclude-internal", action="store_true", help="hide __consumer_offsets ...")
    p = _common(tsub.add_parser("describe", help="partitions, leaders, ISR and overrides"))
    p.add_argument("names", nargs="*", metavar="NAME", help="default: every topic")
    p = _common(tsub.add_parser("delete", help="delete topics"))
    p.add_argument("names", nargs="+", metavar="NAME", help="the topics")
    p = _common(tsub.add_parser("add-partitions", help="grow a topic to --partitions"))
    p.add_argument("name", help="the topic")
    p.add_argument("--partitions", type=int32, required=True, help="the new total count")
    p = _common(tsub.add_parser("alter-config", help="set or delete topic config overrides"))
    p.add_argument("name", help="the topic")
    _alter_args(p)

    group = sub.add_parser("group", help="list, describe, delete consumer groups, reset offsets")
    gsub = group.add_subparsers(dest="group_command", required=True, metavar="ACTION")
    p = _common(gsub.add_parser("list", help="consumer groups and their states"))
    p.add_argument("--state", default=None, metavar="STATE[,STATE...]",
                   help="only groups in these states (Stable, Empty, PreparingRebalance, "
                        "CompletingRebalance, Dead), as kafka-consumer-groups.sh --list "
                        "--state; default: every group")
    p = _common(gsub.add_parser(
        "describe", help="members, assignments, committed offsets and lag per partition"))
    p.add_argument("group", help="the consumer group")
    from weir.cli import admin_groups

    admin_groups.add_parsers(gsub, _common)

    from weir.cli import admin_configs  # topics, brokers, the broker default, loggers

    admin_configs.add_parsers(sub, _common)


def _alter_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="sets", type=_key_value, action="append", default=[],
                   metavar="KEY=VALUE", help="set an override (repeatable)")
    p.add_argument("--delete", dest="deletes", action="append", default=[], metavar="KEY",
                   help="remove an override (repeatable)")


# -- topics -------------------------------------------------------------------------------------


def cmd_topic(args: argparse.Namespace) -> int:
    return {"create": topic_create, "list": topic_list, "describe": topic_describe,
            "delete": topic_delete, "add-partitions": topic_add_partitions,
            "alter-config": topic_alter_config}[args.topic_command](args)


def topic_create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    admin = admin_client(args)
    new = NewTopic(args.name, args.partitions, args.replication_factor,
                   config=dict(args.configs))
    futures = admin.create_topics([new], operation_timeout=args.timeout,
                                  request_timeout=args.timeout)
    wait(futures[args.name], args, f"creating topic {args.name}")
    return emit(args, {"created": args.name}, lambda: f"Created topic {args.name}.")





def topic_list(args: argparse.Namespace) -> int:
    names = sorted(_metadata(args, admin_client(args)).topics)
    if args.exclude_internal:
        names = [n for n in names if not n.startswith("__")]
    return emit(args, names, lambda: "\n".join(names))


def topic_describe(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ConfigResource

    admin = admin_client(args)
    md = _metadata(args, admin)
    names = args.names or sorted(md.topics)
    missing = [n for n in names if n not in md.topics]
    if missing:
        raise AdminCliError(f"unknown topic(s): {', '.join(missing)}",
                            name="UNKNOWN_TOPIC_OR_PARTITION")
    resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    futures = admin.describe_configs(resources, request_timeout=args.timeout) if names else {}
    topics = []
    for name, res in zip(names, resources, strict=True):
        meta = md.topics[name]
        if meta.error is not None:
            raise AdminCliError(f"describing topic {name}: {kafka_name(meta.error)}: "
                                f"{meta.error.str()}")
        configs = wait(futures[res], args, f"describing configs of {name}")
        parts = [{"partition": p.id, "leader": p.leader, "replicas": list(p.replicas),
                  "isr": list(p.isrs)} for p in sorted(meta.partitions.values(), key=_pid)]
        topics.append({
            "name": name, "partitions": len(parts),
            "replication_factor": len(parts[0]["replicas"]) if parts else 0,
            "configs": {k: e.value for k, e in sorted(configs.items()) if _is_override(e)},
            "partition_details": parts})
    return emit(args, topics, lambda: _describe_text(topics))


def _pid(p: Any) -> int:
    return int(p.id)


def _is_override(entry: Any) -> bool:
    from confluent_kafka.admin import ConfigSource

    return entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def _describe_text(topics: list[dict[str, Any]]) -> str:
    blocks = []
    for t in topics:
        configs = ",".join(f"{k}={v}" for k, v in t["configs"].items())
        head = (f"Topic: {t['name']}  PartitionCount: {t['partitions']}  "
                f"ReplicationFactor: {t['replication_factor']}  Configs: {configs}")
        rows = [(p["partition"], p["leader"], ",".join(map(str, p["replicas"])),
                 ",".join(map(str, p["isr"]))) for p in t["partition_details"]]
        blocks.append(head + "\n" + table(("PARTITION", "LEADER", "REPLICAS", "ISR"), rows))
    return "\n\n".join(blocks)


def topic_delete(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    futures = admin.delete_topics(list(args.names), operation_timeout=args.timeout,
                                  request_timeout=args.timeout)
    for name in args.names:
        wait(futures[name], args, f"deleting topic {name}")
    return emit(args, {"deleted": list(args.names)},
                lambda: "\n".join(f"Deleted topic {n}." for n in args.names))


def topic_add_partitions(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewPartitions

    admin = admin_client(args)
    futures = admin.create_partitions([NewPartitions(args.name, args.partitions)],
                                      operation_timeout=args.timeout,
                                      request_timeout=args.timeout)
    wait(futures[args.name], args, f"adding partitions to {args.name}")
    return emit(args, {"topic": args.name, "partitions": args.partitions},
                lambda: f"Topic {args.name} now has {args.partitions} partitions.")


def topic_alter_config(args: argparse.Namespace) -> int:
    if not args.sets and not args.deletes:
        raise AdminCliError("nothing to change: give --set KEY=VALUE and/or --delete KEY")
    return alter_topic(args, args.name, list(args.sets), list(args.deletes))


# -- configs ------------------------------------------------------------------------------------


def alter_topic(args: argparse.Namespace, topic: str, sets: list[tuple[str, str]],
                deletes: list[str]) -> int:
    """IncrementalAlterConfigs SET / DELETE on one topic."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in deletes]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    admin = admin_client(args)
    futures = admin.incremental_alter_configs([res], request_timeout=args.timeout)
    wait(futures[res], args, f"altering configs of topic {topic}")
    doc = {"topic": topic, "set": dict(sets), "deleted": deletes}
    return emit(args, doc, lambda: f"Updated configs of topic {topic}: " + ", ".join(
        [f"{k}={v}" for k, v in sets] + [f"-{k}" for k in deletes]))


def cmd_config(args: argparse.Namespace) -> int:
    from weir.cli import admin_configs

    return admin_configs.cmd_config(args)


# -- groups -------------------------------------------------------------------------------------


def cmd_group(args: argparse.Namespace) -> int:
    from weir.cli import admin_groups

    return {"list": admin_groups.group_list, "describe": admin_groups.group_describe,
            "delete": admin_groups.group_delete,
            "reset-offsets": admin_groups.group_reset_offsets}[args.group_command](args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "topic": cmd_topic, "group": cmd_group, "config": cmd_config}


def run(args: argparse.Namespace,
        command: Callable[[argparse.Namespace], int] | None = None) -> int:
    """Run ``command`` (default: ``args.command`` from :data:`COMMANDS`); an AdminCliError is
    printed, exit code 1."""
    try:
        return (command or COMMANDS[args.command])(args)
    except AdminCliError as exc:
        return report(exc, as_json=bool(getattr(args, "json", False)),
                      command=command_of(args))

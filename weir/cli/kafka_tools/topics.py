"""``kafka-topics.sh``: Kafka 3.x's TopicCommand over confluent-kafka's AdminClient.

Actions: ``--create``, ``--list``, ``--describe``, ``--delete``, ``--alter`` (``--partitions``
grows a topic; ``--config`` sets topic configs through IncrementalAlterConfigs, which Kafka's
3.x tool refused with ``--bootstrap-server`` but older scripts still pass). ``--topic`` is a
regular expression for list, describe, delete and alter (``a,b`` means ``a|b``), as Kafka's
IncludeList. Output lines are Kafka's: ``Created topic t.``, one name per line, and for
describe a topic line (``Topic: t<TAB>TopicId: ...<TAB>PartitionCount: ...``) followed by
one line per partition (``<TAB>Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas:
1,2<TAB>Isr: 1,2``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any

from weir.cli import int32
from weir.cli.errors import CliError, error_name
from weir.cli.kafka_tools import common
from weir.cli.kafka_tools.common import ToolError

PROG = "kafka-topics.sh"
ACTIONS = ("create", "list", "describe", "delete", "alter")
_INTERNAL = ("__consumer_offsets", "__transaction_state")


def build_parser() -> argparse.ArgumentParser:
    p = common.parser(PROG, "Create, delete, describe, or change a topic.")
    for action, text in (("create", "Create a new topic."),
                         ("list", "List all available topics."),
                         ("describe", "List details for the given topics."),
                         ("delete", "Delete a topic"),
                         ("alter", "Alter the number of partitions (Weir: also configs)")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--topic", default=None, metavar="TOPIC",
                   help="The topic to create, alter, describe or delete; a regular "
                        "expression except with --create")
    p.add_argument("--partitions", type=int32, default=None, metavar="N",
                   help="The number of partitions (create) or the new total (alter); "
                        "default for create: the broker's num.partitions")
    p.add_argument("--replication-factor", type=int32, default=None, metavar="R",
                   help="The replication factor of each partition; default: the broker's "
                        "default.replication.factor")
    p.add_argument("--replica-assignment", default=None, metavar="B1:B2,B3:B4",
                   help="Replicas of each partition, partitions separated by commas")
    p.add_argument("--config", dest="configs", action="append", default=[],
                   metavar="NAME=VALUE", help="A topic config override (repeatable)")
    p.add_argument("--if-exists", action="store_true",
                   help="alter, describe, delete: no error when the topic does not exist")
    p.add_argument("--if-not-exists", action="store_true",
                   help="create: no error when the topic exists")
    p.add_argument("--exclude-internal", action="store_true",
                   help="Leave out internal topics (__consumer_offsets, ...) from list and "
                        "describe")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="describe: only partitions whose ISR is smaller than their replicas")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="describe: only partitions whose leader is not available")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="describe: only partitions whose ISR is smaller than "
                        "min.insync.replicas")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="describe: only partitions whose ISR equals min.insync.replicas")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="describe: only topics with config overrides, without partitions")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(PROG, "Error while executing topic command : ", _main, argv)


def _main(argv: Sequence[str]) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    action = common.one_action(p, args, ACTIONS)
    if action in ("create", "delete", "alter") and not args.topic:
        p.error(f"Missing required argument \"[topic]\" for --{action}")
    if action == "create":
        return create(args)
    if action == "list":  # one name per line; Kafka prints an empty line for no topic
        print("\n".join(_topics(args, common.admin(args))))
        return 0
    if action == "describe":
        return describe(args)
    if action == "delete":
        return delete(args)
    return alter(args)


def _replica_assignment(text: str) -> list[list[int]]:
    rows = []
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            raise ToolError(f"--replica-assignment: expected broker ids, got {part!r}",
                            name="INVALID_REPLICA_ASSIGNMENT") from None
        if len(set(brokers)) != len(brokers):
            raise ToolError("Partition replica lists may not contain duplicate entries: "
                            f"{part}", name="INVALID_REPLICA_ASSIGNMENT")
        if rows and len(brokers) != len(rows[0]):
            raise ToolError(f"Partition {i} has different replication factor: {brokers}",
                            name="INVALID_REPLICA_ASSIGNMENT")
        rows.append(brokers)
    return rows


def create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise ToolError("The replication factor must be between 1 and 32767 inclusive",
                        name="INVALID_REPLICATION_FACTOR")
    if args.partitions is not None and args.partitions < 1:
        raise ToolError("The partitions must be greater than 0", name="INVALID_PARTITIONS")
    configs = dict(common.key_values(args.configs, "--config", split=False))
    if args.replica_assignment:
        new = NewTopic(args.topic, replica_assignment=_replica_assignment(
            args.replica_assignment), config=configs)
    else:
        new = NewTopic(args.topic, args.partitions or -1, args.replication_factor or -1,
                       config=configs)
    if "." in args.topic or "_" in args.topic:
        print("WARNING: Due to limitations in metric names, topics with a period ('.') or "
              "underscore ('_') could collide. To avoid issues it is best to use either, "
              "but not both.")
    admin = common.admin(args)
    future = admin.create_topics([new], operation_timeout=args.timeout,
                                 request_timeout=args.timeout)[args.topic]
    try:
        common.wait(future, args, f"creating topic {args.topic}")
    except CliError as exc:
        if args.if_not_exists and error_name(exc) == "TOPIC_ALREADY_EXISTS":
            return 0
        raise
    print(f"Created topic {args.topic}.")
    return 0


def _include(pattern: str | None) -> re.Pattern[str] | None:
    """Kafka's IncludeList: commas mean "or", quotes and spaces are dropped."""
    if pattern is None:
        return None
    text = pattern.strip().replace(",", "|").replace(" ", "").strip("\"'")
    try:
        return re.compile(text)
    except re.error as exc:
        raise ToolError(f"--topic {pattern!r} is not a valid regular expression: {exc}",
                        name="INVALID_ARGUMENT") from None


def _topics(args: argparse.Namespace, admin: Any) -> list[str]:
    """Sorted topic names matching --topic (internal ones unless --exclude-internal)."""
    from confluent_kafka import KafkaException

    from weir.cli.errors import kafka_error_text

    try:
        names = sorted(admin.list_topics(timeout=args.timeout).topics)
    except KafkaException as exc:
        raise ToolError(f"listing topics: {kafka_error_text(exc)}") from None
    if args.exclude_internal:
        names = [n for n in names if n not in _INTERNAL]
    wanted = _include(args.topic)
    return [n for n in names if wanted is None or wanted.fullmatch(n)]


def _existing(args: argparse.Namespace, admin: Any) -> list[str]:
    names = _topics(args, admin)
    if args.topic and not names and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected",
                        name="UNKNOWN_TOPIC_OR_PARTITION")
    return names


def delete(args: argparse.Namespace) -> int:
    admin = common.admin(args)
    names = _existing(args, admin)
    if names:
        futures = admin.delete_topics(names, operation_timeout=args.timeout,
                                      request_timeout=args.timeout)
        for name in names:
            common.wait(futures[name], args, f"deleting topic {name}")
    return 0


def alter(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
    )

    if args.partitions is None and not args.configs:
        raise ToolError("--alter needs --partitions (or --config)", name="INVALID_ARGUMENT")
    admin = common.admin(args)
    names = _existing(args, admin)
    if not names:
        return 0
    if args.partitions is not None:
        extra = None
        if args.replica_assignment:
            rows = _replica_assignment(args.replica_assignment)
            md = admin.list_topics(timeout=args.timeout).topics
            extra = rows[len(md[names[0]].partitions):]
        futures = admin.create_partitions(
            [NewPartitions(n, args.partitions) if extra is None
             else NewPartitions(n, args.partitions, extra) for n in names],
            operation_timeout=args.timeout, request_timeout=args.timeout)
        for name in names:
            common.wait(futures[name], args, f"adding partitions to {name}")
    if args.configs:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in common.key_values(args.configs, "--config", split=False)]
        resources = [ConfigResource(ConfigResource.Type.TOPIC, n, incremental_configs=entries)
                     for n in names]
        futures = admin.incremental_alter_configs(resources, request_timeout=args.timeout)
        for res in resources:
            common.wait(futures[res], args, f"altering configs of {res.name}")
    return 0


def describe(args: argparse.Namespace) -> int:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource, ConfigSource

    admin = common.admin(args)
    names = _existing(args, admin)
    if not names:
        return 0
    described = admin.describe_topics(TopicCollection(names), request_timeout=args.timeout)
    resources = {n: ConfigResource(ConfigResource.Type.TOPIC, n) for n in names}
    configs = admin.describe_configs(list(resources.values()), request_timeout=args.timeout)
    live = {n.id for n in common.wait(admin.describe_cluster(request_timeout=args.timeout),
                                      args, "describing the cluster").nodes}
    filtered = (args.under_replicated_partitions or args.unavailable_partitions
                or args.under_min_isr_partitions or args.at_min_isr_partitions)
    out = []
    for name in names:
        topic = common.wait(described[name], args, f"describing topic {name}")
        entries = common.wait(configs[resources[name]], args, f"describing configs of {name}")
        overrides = [(k, e.value) for k, e in sorted(entries.items())
                     if e.source != ConfigSource.DEFAULT_CONFIG.value]
        parts = sorted(topic.partitions, key=lambda p: p.id)
        if args.topics_with_overrides:
            if any(e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                   for e in entries.values()):
                out.append(_topic_line(topic, parts, overrides))
            continue
        if not filtered:
            out.append(_topic_line(topic, parts, overrides))
        min_isr = int(getattr(entries.get("min.insync.replicas"), "value", None) or 1)
        for part in parts:
            if filtered and not _selected(args, part, live, min_isr):
                continue
            out.append(_partition_line(name, part))
    if out:
        print("\n".join(out))
    return 0


def _ids(nodes: Any) -> str:
    return ",".join(str(n.id) for n in nodes)


def _topic_line(topic: Any, parts: list[Any], overrides: list[tuple[str, str]]) -> str:
    line = f"Topic: {topic.name}"
    # Kafka's Uuid.toString: URL-safe base64 without padding (confluent-kafka: standard)
    topic_id = str(topic.topic_id or "").replace("+", "-").replace("/", "_").rstrip("=")
    if topic_id and topic_id != "AAAAAAAAAAAAAAAAAAAAAA":
        line += f"\tTopicId: {topic_id}"
    rf = len(parts[0].replicas) if parts else 0
    return (line + f"\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}\tConfigs: "
            + ",".join(f"{k}={v}" for k, v in overrides))


def _partition_line(topic: str, part: Any) -> str:
    leader = part.leader.id if part.leader is not None and part.leader.id >= 0 else "none"
    return (f"\tTopic: {topic}\tPartition: {part.id}\tLeader: {leader}"
            f"\tReplicas: {_ids(part.replicas)}\tIsr: {_ids(part.isr)}")


def _selected(args: argparse.Namespace, part: Any, live: set[int], min_isr: int) -> bool:
    has_leader = part.leader is not None and part.leader.id >= 0
    return bool(
        (args.under_replicated_partitions and len(part.isr) < len(part.replicas))
        or (args.unavailable_partitions and (not has_leader or part.leader.id not in live))
        or (args.under_min_isr_partitions and (not has_leader or len(part.isr) < min_isr))
        or (args.at_min_isr_partitions and len(part.isr) == min_isr))


if __name__ == "__main__":
    sys.exit(main())

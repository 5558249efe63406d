"""``weir group list|describe``: consumer groups as kafka-consumer-groups.sh shows them.

``describe`` joins DescribeGroups (members and their assignments), OffsetFetch (committed
offsets) and ListOffsets (log end offsets) into one row per partition with its lag.
"""

from __future__ import annotations

import argparse
from typing import Any

from weir.cli.admin import AdminCliError, admin_client, emit, table, wait


def _name(value: Any) -> str:
    """An enum's name (ConsumerGroupState.STABLE → 'Stable'-ish), else its text."""
    name = getattr(value, "name", None)
    return str(name if name is not None else value)


def group_list(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    result = wait(admin.list_consumer_groups(request_timeout=args.timeout), args,
                  "listing consumer groups")
    groups = sorted(({"group": g.group_id, "state": _name(g.state),
                      "simple": bool(g.is_simple_consumer_group)} for g in result.valid),
                    key=lambda g: g["group"])
    return emit(args, groups, lambda: table(
        ("GROUP", "STATE"), [(g["group"], g["state"]) for g in groups]))


def group_describe(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = admin_client(args)
    group = args.group
    desc = wait(admin.describe_consumer_groups([group], request_timeout=args.timeout)[group],
                args, f"describing group {group}")
    fetched = wait(admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=args.timeout)[group],
        args, f"fetching committed offsets of group {group}")
    committed = {(tp.topic, tp.partition): tp.offset for tp in fetched.topic_partitions or []
                 if tp.offset >= 0}
    owner: dict[tuple[str, int], Any] = {}
    members = []
    for m in desc.members:
        tps = sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        for tp in tps:
            owner[tp] = m
        members.append({"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                        "group_instance_id": m.group_instance_id,
                        "assignment": [{"topic": t, "partition": p} for t, p in tps]})
    state = _name(desc.state)
    if not members and not committed and state.upper() in ("DEAD", "UNKNOWN"):
        raise AdminCliError(f"consumer group {group!r} does not exist")
    partitions = sorted(set(committed) | set(owner))
    ends = _log_end_offsets(args, admin, partitions)
    rows = []
    for tp in partitions:
        current, end, m = committed.get(tp), ends.get(tp), owner.get(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "current_offset": current,
                     "log_end_offset": end,
                     "lag": end - current if end is not None and current is not None else None,
                     "member_id": m.member_id if m else None,
                     "host": m.host if m else None, "client_id": m.client_id if m else None})
    doc = {"group": group, "state": state, "protocol": desc.partition_assignor,
           "coordinator": desc.coordinator.id if desc.coordinator else None,
           "members": members, "partitions": rows}

    def text() -> str:
        head = (f"Group {group}: state {state}, {len(members)} member(s), "
                f"assignor {desc.partition_assignor or '-'}, coordinator "
                f"{doc['coordinator']}")
        body = table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                      "CONSUMER-ID", "HOST", "CLIENT-ID"),
                     [(r["topic"], r["partition"], _dash(r["current_offset"]),
                       _dash(r["log_end_offset"]), _dash(r["lag"]), _dash(r["member_id"]),
                       _dash(r["host"]), _dash(r["client_id"])) for r in rows])
        return head + "\n\n" + body

    return emit(args, doc, text)


def _dash(value: Any) -> Any:
    return "-" if value is None else value


def _log_end_offsets(args: argparse.Namespace, admin: Any,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
    futures = admin.list_offsets(request, request_timeout=args.timeout)
    out = {}
    for tp, future in futures.items():
        try:
            out[(tp.topic, tp.partition)] = wait(future, args, "listing offsets").offset
        except AdminCliError:
            continue  # shown as '-': e.g. the partition is offline
    return out

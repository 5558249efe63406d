"""``weir group list|describe|delete|reset-offsets``: kafka-consumer-groups.sh for Weir.

``describe`` joins DescribeGroups (members and their assignments), OffsetFetch (committed
offsets) and ListOffsets (log end offsets) into one row per partition with its lag; members
without partitions get a row of their own.  ``delete`` is DeleteGroups (a group with members
answers NON_EMPTY_GROUP).  ``reset-offsets`` plans new committed offsets
(``weir/ops/offset_reset.py``), prints the plan (``--dry-run``, the default) or commits it
with ``--execute`` (OffsetCommit as an admin: generation -1, no member), and, as Kafka's tool,
refuses while the group is not Empty (or Dead: a group that does not exist yet).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from weir.cli.admin_common import AdminCliError, admin_client, emit, table, wait
from weir.common import TopicPartition as Tp
from weir.ops import offset_reset

# Kafka's spelling of the group states (ConsumerGroupState.toString)
_STATE_NAMES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
                "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable",
                "DEAD": "Dead", "EMPTY": "Empty"}


def _name(value: Any) -> str:
    """A group state as Kafka spells it (ConsumerGroupState.STABLE → 'Stable')."""
    name = str(getattr(value, "name", value))
    return _STATE_NAMES.get(name, name)


def _states(text: str | None) -> set[str] | None:
    """``--state Stable,Empty`` as Kafka's state names; INVALID_ARGUMENT for another word."""
    if text is None:
        return None
    known = {v.lower(): v for v in _STATE_NAMES.values()}
    wanted = set()
    for word in (w.strip() for w in text.split(",") if w.strip()):
        if word.lower() not in known:
            raise AdminCliError(f"--state: unknown group state {word!r} (states: "
                                f"{', '.join(sorted(known.values()))})")
        wanted.add(known[word.lower()])
    return wanted or None


def group_list(args: argparse.Namespace) -> int:
    states = _states(getattr(args, "state", None))
    admin = admin_client(args)
    result = wait(admin.list_consumer_groups(request_timeout=args.timeout), args,
                  "listing consumer groups")
    groups = sorted(({"group": g.group_id, "state": _name(g.state),
                      "simple": bool(g.is_simple_consumer_group)} for g in result.valid),
                    key=lambda g: g["group"])
    if states is not None:
        groups = [g for g in groups if g["state"] in states]
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
    if not members and not committed and state in ("Dead", "Unknown"):
        raise AdminCliError(f"consumer group {group!r} does not exist",
                            name="GROUP_ID_NOT_FOUND")
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
        if getattr(args, "state", False):  # kafka-consumer-groups --describe --state
            return table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                          "#MEMBERS"), [(group, _dash(doc["coordinator"]),
                                         desc.partition_assignor or "-", state, len(members))])
        if getattr(args, "members", False):  # --describe --members [--verbose]
            return head + "\n\n" + _members_table(members, args.verbose)
        lines = [(r["topic"], r["partition"], _dash(r["current_offset"]),
                  _dash(r["log_end_offset"]), _dash(r["lag"]), _dash(r["member_id"]),
                  _dash(r["host"]), _dash(r["client_id"])) for r in rows]
        lines += [("-", "-", "-", "-", "-", m["member_id"], m["host"], m["client_id"])
                  for m in members if not m["assignment"]]  # members without partitions
        body = table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                      "CONSUMER-ID", "HOST", "CLIENT-ID"), lines)
        return head + "\n\n" + body

    return emit(args, doc, text)


def _members_table(members: list[dict[str, Any]], verbose: bool) -> str:
    headers = ["CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    rows = []
    for m in members:
        row = [m["member_id"], m["host"], m["client_id"], len(m["assignment"])]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for a in m["assignment"]:
                by_topic.setdefault(a["topic"], []).append(a["partition"])
            row.append(",".join(f"{t}({','.join(map(str, ps))})"
                                for t, ps in sorted(by_topic.items())) or "-")
        rows.append(row)
    return table(headers + (["ASSIGNMENT"] if verbose else []), rows)


def _dash(value: Any) -> Any:
    return "-" if value is None else value


def _log_end_offsets(args: argparse.Namespace, admin: Any,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    return _list_offsets(args, admin, partitions, OffsetSpec.latest())  # a failure shows '-'


def _list_offsets(args: argparse.Namespace, admin: Any, partitions: Any, spec: Any,
                  strict: bool = False) -> dict[tuple[str, int], int]:
    """ListOffsets for ``partitions`` with one OffsetSpec; failures are left out (``strict``:
    raised)."""
    if not partitions:
        return {}
    from confluent_kafka import TopicPartition

    request = {TopicPartition(t, p): spec for t, p in partitions}
    futures = admin.list_offsets(request, request_timeout=args.timeout)
    out = {}
    for tp, future in futures.items():
        try:
            out[(tp.topic, tp.partition)] = wait(
                future, args, f"listing offsets of {tp.topic}-{tp.partition}").offset
        except AdminCliError:
            if strict:
                raise
    return out


# -- delete -------------------------------------------------------------------------------------


def group_delete(args: argparse.Namespace) -> int:
    """DeleteGroups; prints Kafka's lines, exit 1 when any group could not be deleted."""
    admin = admin_client(args)
    groups = list(dict.fromkeys(args.groups))
    futures = admin.delete_consumer_groups(groups, request_timeout=args.timeout)
    deleted, failed = [], {}
    for group in groups:
        try:
            wait(futures[group], args, f"deleting group {group}")
            deleted.append(group)
        except AdminCliError as exc:
            failed[group] = str(exc).split(": ", 1)[1]
    doc = {"deleted": deleted, "failed": failed}

    if args.json:
        emit(args, doc, str)
    elif not failed:
        print("Deletion of requested consumer groups ("
              + ", ".join(f"'{g}'" for g in deleted) + ") was successful.")
    else:  # Kafka's lines (on stdout, as kafka-consumer-groups.sh), then one error line
        lines = ["Deletion of some consumer groups failed:"]
        lines += [f"* Group '{g}' could not be deleted due to: {why}"
                  + (" (the group still has members: stop its consumers first)"
                     if "NON_EMPTY_GROUP" in why else "")
                  for g, why in failed.items()]
        if deleted:
            lines.append("These consumer groups were deleted successfully: "
                         + ", ".join(f"'{g}'" for g in deleted))
        print("\n".join(lines))
    if failed:
        first = next(iter(failed.values()))
        raise AdminCliError(f"deleting consumer groups: {first.split(': ', 1)[0]}: "
                            f"{len(failed)} of {len(groups)} group(s) could not be deleted")
    return 0


# -- reset-offsets ------------------------------------------------------------------------------


def _group_of(args: argparse.Namespace) -> str:
    if args.group and args.group_opt and args.group != args.group_opt:
        raise AdminCliError("give the group once (GROUP or --group)")
    group = args.group or args.group_opt
    if not group:
        raise AdminCliError("which group? give GROUP (or --group GROUP)")
    return group


def _scenario(args: argparse.Namespace) -> tuple[str, Any]:
    chosen = [(name, getattr(args, name.replace("-", "_")))
              for name in offset_reset.SCENARIOS
              if getattr(args, name.replace("-", "_")) not in (None, False)]
    if len(chosen) != 1:
        raise AdminCliError("give exactly one of: " + ", ".join(
            f"--{n}" for n in offset_reset.SCENARIOS))
    return chosen[0]


def _reset_partitions(args: argparse.Namespace, admin: Any,
                      committed: dict[tuple[str, int], int]) -> list[tuple[str, int]]:
    if args.from_file is not None:  # the file names the partitions (a scope is ignored)
        return sorted((tp.topic, tp.partition) for tp in args.from_file_plan)
    if args.all_topics == bool(args.topics):
        raise AdminCliError("One of the reset scopes should be defined: --all-topics, --topic.")
    if args.all_topics:
        return sorted(committed)
    specs = [offset_reset.parse_topic_partitions(t) for t in args.topics]
    from weir.cli.admin_common import _metadata

    md = _metadata(args, admin)
    out: set[tuple[str, int]] = set()
    for topic, parts in specs:
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None:
            raise AdminCliError(f"topic {topic!r} does not exist",
                                name="UNKNOWN_TOPIC_OR_PARTITION")
        known = set(meta.partitions)
        missing = [p for p in parts or () if p not in known]
        if missing:
            raise AdminCliError(f"topic {topic} has no partition(s) "
                                f"{', '.join(map(str, missing))} (it has {len(known)})")
        out |= {(topic, p) for p in (parts if parts is not None else known)}
    return sorted(out)


def group_reset_offsets(args: argparse.Namespace) -> int:
    import time

    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    group = _group_of(args)
    scenario, value = _scenario(args)
    if scenario == "from-file":
        try:
            text = Path(value).read_text(encoding="utf-8")
            value = args.from_file_plan = offset_reset.parse_reset_csv(text, group)
        except OSError as exc:
            raise AdminCliError(f"cannot read {value}: {exc}") from None
        except offset_reset.ResetError as exc:
            raise AdminCliError(str(exc)) from None
    if args.dry_run and args.execute:
        raise AdminCliError("--dry-run and --execute exclude each other")
    admin = admin_client(args)
    desc = wait(admin.describe_consumer_groups([group], request_timeout=args.timeout)[group],
                args, f"describing group {group}")
    state = _name(desc.state)
    if state not in ("Empty", "Dead"):
        raise AdminCliError(f"Assignments can only be reset if the group '{group}' is "
                            f"inactive, but the current state is {state}.")
    fetched = wait(admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=args.timeout)[group],
        args, f"fetching committed offsets of group {group}")
    committed = {(tp.topic, tp.partition): tp.offset for tp in fetched.topic_partitions or []
                 if tp.offset >= 0}
    try:
        partitions = _reset_partitions(args, admin, committed)
        starts = _list_offsets(args, admin, partitions, OffsetSpec.earliest(), strict=True)
        ends = _list_offsets(args, admin, partitions, OffsetSpec.latest(), strict=True)
        by_time = None
        if scenario in offset_reset.NEEDS_TIMESTAMP:
            when = offset_reset.target_time_ms(scenario, value, int(time.time() * 1000))
            by_time = _list_offsets(args, admin, partitions, OffsetSpec.for_timestamp(when),
                                    strict=True)
        plan = offset_reset.plan_reset(
            scenario, value, [Tp(t, p) for t, p in partitions], _keyed(committed),
            _keyed(starts), _keyed(ends), _keyed(by_time) if by_time is not None else None)
    except offset_reset.ResetError as exc:
        raise AdminCliError(str(exc)) from None
    for warning in plan.warnings:
        print(f"Warn: {warning}", file=sys.stderr)
    if args.execute and plan.offsets:
        request = ConsumerGroupTopicPartitions(group, [
            TopicPartition(tp.topic, tp.partition, offset)
            for tp, offset in plan.offsets.items()])
        result = wait(admin.alter_consumer_group_offsets(
            [request], request_timeout=args.timeout)[group], args,
            f"committing offsets of group {group}")
        errors = [f"{tp.topic}-{tp.partition}: {tp.error.name()}"
                  for tp in result.topic_partitions or [] if tp.error is not None]
        if errors:
            raise AdminCliError(f"committing offsets of group {group}: " + ", ".join(errors))
    rows = [{"topic": tp.topic, "partition": tp.partition,
             "current_offset": committed.get((tp.topic, tp.partition)), "new_offset": offset}
            for tp, offset in plan.offsets.items()]
    doc = {"group": group, "state": state, "scenario": scenario, "executed": bool(args.execute),
           "partitions": rows, "warnings": plan.warnings}

    def text() -> str:
        if args.export:
            return offset_reset.export_csv(plan.offsets).rstrip("\n")
        if not rows:
            return f"Group {group} has no partitions to reset."
        out = table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                    [(group, r["topic"], r["partition"], r["new_offset"]) for r in rows])
        if not args.execute:
            out += "\n\n(dry run: nothing was changed; --execute commits these offsets)"
        return out

    return emit(args, doc, text)


def _keyed(offsets: dict[tuple[str, int], int]) -> dict[Tp, int]:
    return {Tp(t, p): o for (t, p), o in offsets.items()}


def add_parsers(gsub: Any, common: Any) -> None:
    """``group delete`` and ``group reset-offsets`` (``common`` adds the connection options),
    and ``describe``'s views."""
    describe = gsub.choices["describe"]
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true",
                      help="one row per member (--verbose: with its partitions)")
    view.add_argument("--state", action="store_true",
                      help="coordinator, assignor, state and member count")
    describe.add_argument("--verbose", action="store_true", help="with --members")
    p = common(gsub.add_parser("delete", help="delete consumer groups without members"))
    p.add_argument("groups", nargs="+", metavar="GROUP", help="the groups to delete")
    p = common(gsub.add_parser(
        "reset-offsets", help="plan (default) or --execute new committed offsets of a group "
                              "that has no active members"))
    p.add_argument("group", nargs="?", metavar="GROUP", help="the group (or --group)")
    p.add_argument("--group", dest="group_opt", metavar="GROUP", help="same as GROUP")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--topic", dest="topics", action="append", default=[],
                       metavar="TOPIC[:P,...]", help="a topic, or some of its partitions "
                                                    "(repeatable)")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has an offset for")
    how = p.add_argument_group("scenario (exactly one)")
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset")
    how.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    how.add_argument("--to-datetime", metavar="ISO", help="first offset at or after "
                                                         "YYYY-MM-DDTHH:mm:SS.sss (UTC)")
    how.add_argument("--by-duration", metavar="PnDTnHnMnS",
                     help="first offset at or after now minus this duration")
    how.add_argument("--shift-by", type=int, metavar="N",
                     help="committed offset + N (may be negative; clamped)")
    how.add_argument("--to-current", action="store_true",
                     help="the committed offset (log end where none)")
    how.add_argument("--from-file", metavar="CSV",
                     help="a plan saved with --export (topic,partition,offset lines)")
    p.add_argument("--export", action="store_true",
                   help="print the plan as CSV (topic,partition,offset) for --from-file")
    p.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")

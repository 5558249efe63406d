"""``kafka-consumer-groups.sh``: Kafka's ConsumerGroupCommand for ``--list`` (``--state``),
``--describe`` (offsets, ``--members [--verbose]``, ``--state``; ``--group`` repeatable or
``--all-groups``), ``--delete`` and ``--reset-offsets``.

Describe prints Kafka's columns: each group's table opens with an empty line, column widths
grow with the longest group, topic, consumer id and host (at least 15), ``-`` stands for a
missing value, and an Empty group adds "Consumer group 'g' has no active members." on stderr.
The data comes from :mod:`weir.cli.admin_groups` (DescribeGroups, OffsetFetch, ListOffsets),
as do ``--delete``'s lines and ``--reset-offsets``' plan and checks.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Sequence
from typing import Any

from weir.cli.kafka_tools import common
from weir.cli.kafka_tools.common import ToolError

PROG = "kafka-consumer-groups.sh"
ACTIONS = ("list", "describe", "delete", "reset-offsets")


def build_parser() -> argparse.ArgumentParser:
    p = common.parser(PROG, "List, describe, delete consumer groups and reset their "
                            "offsets.")
    p.add_argument("--list", action="store_true", help="List all consumer groups.")
    p.add_argument("--describe", action="store_true",
                   help="Describe the groups: offsets and lag (default), --members or --state")
    p.add_argument("--delete", action="store_true", help="Delete groups without members.")
    p.add_argument("--reset-offsets", action="store_true",
                   help="Reset the committed offsets of a group without active members.")
    p.add_argument("--group", dest="group_list", action="append", default=[],
                   metavar="GROUP", help="A consumer group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="Every consumer group")
    p.add_argument("--members", action="store_true", help="--describe: the members")
    p.add_argument("--verbose", action="store_true",
                   help="--describe --members: with their partitions")
    p.add_argument("--offsets", action="store_true",
                   help="--describe: offsets and lag (the default view)")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                   help="--list: with each group's state, only these states if given "
                        "(Stable,Empty,...); --describe: the groups' state")
    # --reset-offsets (the same options and checks as `weir group reset-offsets`)
    p.add_argument("--topic", dest="topics", action="append", default=[],
                   metavar="TOPIC[:P,...]", help="--reset-offsets: a topic or some of its "
                                                 "partitions (repeatable)")
    p.add_argument("--all-topics", action="store_true",
                   help="--reset-offsets: every partition the group has an offset for")
    p.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    p.add_argument("--to-latest", action="store_true", help="reset to the log end")
    p.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    p.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                   help="reset to the first offset at or after this time")
    p.add_argument("--by-duration", metavar="PnDTnHnMnS",
                   help="reset to the first offset at or after now minus this duration")
    p.add_argument("--shift-by", type=int, metavar="N", help="move the offset by N")
    p.add_argument("--to-current", action="store_true", help="reset to the committed offset")
    p.add_argument("--from-file", metavar="CSV", help="reset to the offsets of a CSV plan")
    p.add_argument("--export", action="store_true", help="print the plan as CSV")
    p.add_argument("--dry-run", action="store_true", help="only print the plan (default)")
    p.add_argument("--execute", action="store_true", help="commit the new offsets")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return common.run(PROG, "Error: ", _main, argv)


def _ns(args: argparse.Namespace, **extra: Any) -> argparse.Namespace:
    ns = common.admin_args(args)
    ns.__dict__.update({k: v for k, v in vars(args).items() if k not in vars(ns)})
    ns.__dict__.update(extra)
    return ns


def _main(argv: Sequence[str]) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    action = common.one_action(p, args, ACTIONS)
    if action == "list":
        return list_groups(args)
    groups = list(dict.fromkeys(args.group_list))
    if action == "reset-offsets":
        from weir.cli import admin_groups

        if len(groups) != 1 and not args.all_groups:
            p.error("--reset-offsets needs one --group")
        if args.all_groups:
            raise ToolError("--reset-offsets --all-groups is not supported: name the group",
                            name="INVALID_ARGUMENT")
        return admin_groups.group_reset_offsets(_ns(args, group=None, group_opt=groups[0]))
    if args.all_groups:
        groups = [g["group"] for g in _listing(args)]
    elif not groups:
        p.error(f"Option [{action}] takes one of these options: [all-groups], [group]")
    if action == "delete":
        from weir.cli import admin_groups

        return admin_groups.group_delete(_ns(args, groups=groups))
    return describe(args, groups)


def _listing(args: argparse.Namespace) -> list[dict[str, Any]]:
    """weir group list's rows (group, state), through its JSON document."""
    from weir.cli import admin_groups

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        admin_groups.group_list(_ns(args, json=True, state=args.state or None))
    return list(json.loads(out.getvalue()))


def list_groups(args: argparse.Namespace) -> int:
    rows = _listing(args)
    if args.state is None:
        for r in rows:
            print(r["group"])
        return 0
    width = max([15, *(len(r["group"]) for r in rows)])
    print(f"{'GROUP':<{width}} STATE")
    for r in rows:
        print(f"{r['group']:<{width}} {r['state']}")
    return 0


def _describe_doc(args: argparse.Namespace, group: str) -> dict[str, Any]:
    from weir.cli import admin_groups

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        admin_groups.group_describe(_ns(args, group=group, json=True, state=False,
                                        members=False))
    return dict(json.loads(out.getvalue()))


def _row(widths: Sequence[int], cells: Sequence[Any]) -> str:
    """Kafka's printf columns: each cell left-aligned in its width, the last one as is."""
    text = ["-" if c is None else str(c) for c in cells]
    return " ".join(f"{c:<{w}}" for c, w in zip(text[:-1], widths, strict=False)) \
        + " " + text[-1]


def describe(args: argparse.Namespace, groups: list[str]) -> int:
    for group in groups:
        doc = _describe_doc(args, group)
        state = doc["state"]
        if state == "Empty":
            print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
        elif state in ("PreparingRebalance", "CompletingRebalance"):
            print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
        if args.state is not None:
            brokers = common.admin(args).list_topics(timeout=args.timeout).brokers
            print(_state_table(doc, brokers))
        elif args.members:
            print(_members_table(doc, args.verbose))
        else:
            print(_offsets_table(doc))
    return 0


def _offsets_table(doc: dict[str, Any]) -> str:
    rows = [(doc["group"], r["topic"], r["partition"], r["current_offset"],
             r["log_end_offset"], r["lag"], r["member_id"], r["host"], r["client_id"])
            for r in doc["partitions"]]
    rows += [(doc["group"], None, None, None, None, None, m["member_id"], m["host"],
              m["client_id"]) for m in doc["members"] if not m["assignment"]]
    g, t, c, h = (max([15, *(len(str(r[i] or "-")) for r in rows)]) for i in (0, 1, 6, 7))
    widths = (g, t, 10, 15, 15, 15, c, h)
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID")
    return "\n" + "\n".join(_row(widths, r) for r in [header, *rows]) + "\n"


def _members_table(doc: dict[str, Any], verbose: bool) -> str:
    rows = []
    for m in doc["members"]:
        by_topic: dict[str, list[int]] = {}
        for a in m["assignment"]:
            by_topic.setdefault(a["topic"], []).append(a["partition"])
        assignment = ",".join(f"{t}({','.join(map(str, ps))})"
                              for t, ps in sorted(by_topic.items())) or "-"
        rows.append((doc["group"], m["member_id"], m["host"], m["client_id"],
                     len(m["assignment"]), assignment))
    widths = [max([15, *(len(str(r[i])) for r in rows)]) for i in range(4)] + [15]
    header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
    lines = [_row(widths, r if verbose else r[:5]) for r in [header, *rows]]
    return "\n" + "\n".join(lines) + "\n"


def _state_table(doc: dict[str, Any], brokers: dict[int, Any]) -> str:
    node = brokers.get(doc["coordinator"])
    coordinator = "-" if doc["coordinator"] is None else (
        f"{node.host}:{node.port} ({doc['coordinator']})" if node is not None
        else f"({doc['coordinator']})")
    row = (doc["group"], coordinator, doc["protocol"] or "", doc["state"],
           len(doc["members"]))
    widths = (max(15, len(doc["group"])), max(25, len(coordinator)), 20, 20)
    header = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    return "\n" + "\n".join(_row(widths, r) for r in (header, row)) + "\n"


if __name__ == "__main__":
    sys.exit(main())

"""What each console page shows, read through :class:`weir.console.admin.ConsoleAdmin`.

Every failure of a request is a value in the document (``error``: Kafka's error name or the
network fault), never an exception out of here: a page of a cluster in trouble shows what
could be read and says what could not.  The shaping of raw answers into rows is in
:mod:`weir.console.views` (pure, unit-tested).
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping
from typing import Any

from kio.index import load_request_schema

from weir.console import collect, views
from weir.console.admin import (
    BROKER_RESOURCE,
    EARLIEST,
    LATEST,
    TOPIC_RESOURCE,
    AdminError,
    ConsoleAdmin,
    error_text,
)
from weir.protocol import codec

MAX_GROUPS = 50
FAILURES = (AdminError, ConnectionError, TimeoutError, OSError)


def _problem(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def read_cluster(admin: ConsoleAdmin) -> dict[str, Any]:
    """The overview: brokers, controller id, topics with partitions (offsets, sizes), log
    dirs per broker, groups with lag.  Raises AdminError only when no broker answers
    Metadata (the page then keeps its last view with the error on top)."""
    md = await admin.metadata()
    brokers = [{"id": int(b.node_id), "host": b.host, "port": int(b.port), "rack": b.rack}
               for b in sorted(md.brokers, key=lambda b: int(b.node_id))]
    topics = collect.topic_rows(md)
    leaders = {(p["topic"], p["partition"]): p["leader"] for t in topics
               for p in t["partitions"]}
    # Each part on its own, all at once: a frozen broker costs one timeout, not one per part.
    starts, ends, log_dirs, (described, group_errors) = await asyncio.gather(
        admin.list_offsets(leaders, EARLIEST), admin.list_offsets(leaders, LATEST),
        _log_dirs(admin, [b["id"] for b in brokers]), describe_groups(admin))
    views.add_offsets_and_sizes(topics, starts, ends, log_dirs)
    groups = [group_lag(entry, ends) for entry in described]
    return {"brokers": brokers, "controller_id": int(md.controller_id),
            "cluster_id": md.cluster_id, "topics": topics, "groups": groups,
            "group_errors": group_errors, "log_dirs": log_dirs}


async def _log_dirs(admin: ConsoleAdmin, brokers: list[int]) -> dict[int, Any]:
    async def one(broker_id: int) -> Any:
        try:
            return views.log_dir_rows(await admin.describe_log_dirs(broker_id))
        except FAILURES as exc:
            return {"error": _problem(exc)}

    answers = await asyncio.gather(*(one(b) for b in brokers))
    return dict(zip(brokers, answers, strict=True))


async def describe_groups(admin: ConsoleAdmin) -> tuple[list[dict[str, Any]], list[str]]:
    """Every group (ListGroups of each broker), each described on its coordinator; a group
    that cannot be described keeps its listed state and an error."""
    listed, errors = await admin.list_groups()

    async def one(entry: dict[str, str]) -> dict[str, Any]:
        try:
            desc, committed = await admin.describe_group(entry["group"])
        except FAILURES as exc:
            return {**entry, "error": _problem(exc)}
        return {**entry, "desc": desc, "committed": committed}

    return list(await asyncio.gather(*(one(g) for g in listed[:MAX_GROUPS]))), errors


def group_lag(entry: dict[str, Any], ends: Mapping[tuple[str, int], int | str]
              ) -> dict[str, Any]:
    """A described group's row with lag against ``ends`` (log end offsets)."""
    if "desc" not in entry:
        return {"group": entry["group"], "state": entry.get("state"),
                "error": entry.get("error"), "members": 0, "partitions": [],
                "total_lag": None, "topics": []}
    return views.group_row(entry["desc"], entry["committed"], ends)


async def broker_detail(admin: ConsoleAdmin, broker_id: int) -> dict[str, Any]:
    """One broker's configs (every key with its source) and log dirs."""
    out: dict[str, Any] = {"id": broker_id}
    try:
        out["configs"] = await admin.describe_configs(BROKER_RESOURCE, str(broker_id),
                                                      broker_id)
    except FAILURES as exc:
        out["configs_error"] = _problem(exc)
    try:
        out["log_dirs"] = views.log_dir_rows(await admin.describe_log_dirs(broker_id))
    except FAILURES as exc:
        out["log_dirs"] = {"error": _problem(exc)}
    return out


async def topic_configs(admin: ConsoleAdmin, topic: str) -> dict[str, Any]:
    try:
        return {"configs": await admin.describe_configs(TOPIC_RESOURCE, topic)}
    except FAILURES as exc:
        return {"configs_error": _problem(exc)}


async def group_detail(admin: ConsoleAdmin, group: str,
                       ends: Mapping[tuple[str, int], int | str]) -> dict[str, Any]:
    """A group's state, members (client id, host, assignment) and lag per partition."""
    try:
        desc, committed = await admin.describe_group(group)
    except FAILURES as exc:
        return {"group": group, "error": _problem(exc)}
    if not desc.members and not committed and desc.group_state in ("Dead", ""):
        # DescribeGroups answers an unknown group as Dead without an error; Kafka's
        # ConsumerGroupCommand prints "Consumer group 'g' does not exist." for it.
        return {"group": group, "missing": True,
                "error": f"GROUP_ID_NOT_FOUND: consumer group {group!r} does not exist"}
    row = views.group_row(desc, committed, ends)
    row["member_rows"] = views.member_rows(desc)
    return row


async def security(admin: ConsoleAdmin) -> dict[str, Any]:
    """ACLs (DescribeAcls) and SCRAM users (DescribeUserScramCredentials)."""
    out: dict[str, Any] = {}
    try:
        response = await admin.describe_acls()
        err = error_text(response.error_code, response.error_message)
        if err:
            out["acls_error"] = err
        else:
            out["acls"] = views.acl_rows(response)
    except FAILURES as exc:
        out["acls_error"] = _problem(exc)
    try:
        response = await admin.describe_scram_users()
        err = error_text(response.error_code, response.error_message)
        if err:
            out["users_error"] = err
        else:
            out["users"] = views.scram_rows(response)
    except FAILURES as exc:
        out["users_error"] = _problem(exc)
    return out


async def reassignments(admin: ConsoleAdmin) -> dict[str, Any]:
    """Moves in progress (ListPartitionReassignments on the controller, KIP-455)."""
    request = codec.build(load_request_schema(46, 0), timeout=datetime.timedelta(seconds=5),
                          topics=None)
    try:
        response = await admin.to_controller(request)
    except FAILURES as exc:
        return {"reassignments_error": _problem(exc)}
    err = error_text(response.error_code, response.error_message)
    if err:
        return {"reassignments_error": err}
    return {"reassignments": [
        {"topic": t.name, "partition": int(p.partition_index),
         "replicas": [int(r) for r in p.replicas],
         "adding": [int(r) for r in p.adding_replicas],
         "removing": [int(r) for r in p.removing_replicas]}
        for t in response.topics for p in t.partitions]}


# -- the message browser ---------------------------------------------------------------------

MAX_RECORDS = 500
FETCH_BYTES = 1024 * 1024
MAX_FETCHES = 8


async def browse(admin: ConsoleAdmin, topic_row: dict[str, Any], partition: int | None,
                 start: str, value: int | None, limit: int) -> dict[str, Any]:
    """Records of a topic (one partition, or all): the newest ``limit`` of each, or from
    an offset, or from a timestamp (ListOffsets by time, KIP-79).  Reads are bounded: at
    most ``MAX_FETCHES`` Fetches of ``FETCH_BYTES`` per partition, ``limit`` <= 500."""
    limit = max(1, min(limit, MAX_RECORDS))
    parts = [p for p in topic_row["partitions"] if partition is None or p["partition"] == partition]
    if not parts:
        return {"error": f"UNKNOWN_TOPIC_OR_PARTITION: {topic_row['name']}-{partition}",
                "records": []}
    per_partition = limit
    positions: dict[int, int | str] = {}
    if start == "timestamp":
        found = await admin.list_offsets(
            {(topic_row["name"], p["partition"]): p["leader"] for p in parts}, int(value or 0))
        positions = {tp[1]: off for tp, off in found.items()}
    for p in parts:
        if start == "offset":
            positions[p["partition"]] = max(int(value or 0), 0)
        elif start == "newest":
            end, first = p.get("log_end_offset"), p.get("log_start_offset")
            if isinstance(end, int):
                positions[p["partition"]] = max(end - per_partition,
                                                first if isinstance(first, int) else 0)
            else:
                positions[p["partition"]] = f"no log end offset ({end})"

    async def one(p: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
        position = positions.get(p["partition"])
        if not isinstance(position, int):
            return [], f"partition {p['partition']}: {position}"
        if position < 0:  # by timestamp: no record at or after it
            return [], None
        return await _read_partition(admin, topic_row["name"], p, position, per_partition)

    results = await asyncio.gather(*(one(p) for p in parts))
    records = [r for rows, _ in results for r in rows]
    errors = [e for _, e in results if e]
    if start == "newest":  # the newest ``limit`` of the topic, newest first
        records.sort(key=lambda r: (r["timestamp"], r["offset"]), reverse=True)
    else:
        records.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]))
    return {"records": records[:limit], "errors": errors, "limit": limit}


async def _read_partition(admin: ConsoleAdmin, topic: str, p: dict[str, Any], position: int,
                          want: int) -> tuple[list[dict[str, Any]], str | None]:
    rows: list[dict[str, Any]] = []
    for _ in range(MAX_FETCHES):
        try:
            answer = await admin.fetch(p["leader"], topic, p["partition"], position, FETCH_BYTES)
        except FAILURES as exc:
            return rows, f"partition {p['partition']}: {_problem(exc)}"
        err = error_text(answer.error_code)
        if err:
            return rows, f"partition {p['partition']}: {err}"
        try:
            batch_rows, next_offset = views.decode_records(answer.records or b"", position,
                                                           p["partition"])
        except ValueError as exc:
            return rows, f"partition {p['partition']}: {exc}"
        rows.extend(batch_rows)
        if len(rows) >= want or next_offset <= position \
                or next_offset >= int(answer.high_watermark):
            break
        position = next_offset
    return rows[:want], None

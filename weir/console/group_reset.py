"""``POST /api/groups/{group}/reset-offsets``: kafka-consumer-groups.sh ``--reset-offsets``
for the console, planned by :mod:`weir.ops.offset_reset` (Kafka's rules and warnings).

Body: ``{"topic": str, "partitions": [int] (optional, default all), "scenario":
"to-earliest" | "to-latest" | "to-offset" | "shift-by" | "to-datetime" | "by-duration",
"value": ..., "execute": bool}``.  Without ``execute`` it is the tool's dry run: the plan
(current and new offset per partition, warnings), nothing committed.  Executing needs a
group without active members (Kafka's ConsumerGroupCommand refuses otherwise: "Assignments
can only be reset if the group is inactive").
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from weir.common import TopicPartition
from weir.console.actions import _bad, _failed, _json_body, _refused, _state
from weir.console.admin import EARLIEST, LATEST, AdminError
from weir.ops.offset_reset import NEEDS_TIMESTAMP, ResetError, plan_reset, target_time_ms

SCENARIOS = ("to-earliest", "to-latest", "to-offset", "shift-by", "to-datetime",
             "by-duration")
INACTIVE = ("Empty", "Dead")


def add_routes(app: web.Application) -> None:
    app.router.add_post("/api/groups/{group:.+}/reset-offsets", api_reset_offsets)


async def api_reset_offsets(request: web.Request) -> web.Response:
    refused = _refused(request)
    if refused is not None:
        return refused
    group = request.match_info["group"]
    try:
        body = await _json_body(request, ("topic", "scenario", "value", "partitions", "execute"))
    except web.HTTPBadRequest as exc:
        return _bad(exc.text or "bad body")
    topic, scenario, value = body.get("topic"), body.get("scenario"), body.get("value")
    wanted = body.get("partitions")
    if not isinstance(topic, str) or scenario not in SCENARIOS:
        return _bad(f"expected {{topic: str, scenario: one of {', '.join(SCENARIOS)}, "
                    "value, execute: bool}")
    if wanted is not None and (not isinstance(wanted, list)
                               or not all(isinstance(p, int) for p in wanted)):
        return _bad("partitions must be a list of partition numbers")
    state = _state(request)
    row = state.topic(topic)
    if row is None:
        return _bad(f"UNKNOWN_TOPIC_OR_PARTITION: no topic {topic!r}")
    leaders = {(topic, p["partition"]): p["leader"] for p in row["partitions"]
               if wanted is None or p["partition"] in wanted}
    admin = state.admin
    try:
        desc, committed = await admin.describe_group(group)
        starts = await admin.list_offsets(leaders, EARLIEST)
        ends = await admin.list_offsets(leaders, LATEST)
        by_time = None
        if scenario in NEEDS_TIMESTAMP:
            at = target_time_ms(scenario, str(value), int(time.time() * 1000))
            by_time = {TopicPartition(*tp): (v if isinstance(v, int) else None)
                       for tp, v in (await admin.list_offsets(leaders, at)).items()}
        plan = plan_reset(scenario, value if scenario not in ("to-offset", "shift-by")
                          else _int(value),
                          [TopicPartition(*tp) for tp in leaders],
                          {TopicPartition(*tp): v for tp, v in committed.items()},
                          _numeric(starts), _numeric(ends), by_time)
    except (ResetError, ValueError) as exc:
        return _bad(str(exc))
    except (AdminError, ConnectionError, TimeoutError) as exc:
        return _failed("reading the group's offsets", exc)
    rows = [{"topic": tp.topic, "partition": tp.partition,
             "current_offset": committed.get((tp.topic, tp.partition)), "new_offset": off}
            for tp, off in sorted(plan.offsets.items())]
    doc: dict[str, Any] = {"group": group, "state": desc.group_state, "dry_run": True,
                           "plan": rows, "warnings": plan.warnings}
    if not body.get("execute"):
        return web.json_response(doc)
    if desc.group_state not in INACTIVE:
        return web.json_response({**doc, "error": (
            f"Assignments can only be reset if the group '{group}' is inactive, but the "
            f"current state is {desc.group_state}.")}, status=409)
    try:
        results = await admin.commit_offsets(
            group, {(tp.topic, tp.partition): off for tp, off in plan.offsets.items()})
    except (AdminError, ConnectionError, TimeoutError) as exc:
        return _failed("OffsetCommit", exc)
    doc.update(dry_run=False, results={f"{t}-{p}": err for (t, p), err in results.items()})
    return web.json_response(doc)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"value must be an integer, got {value!r}")  # noqa: TRY004 - a 400
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"value must be an integer, got {value!r}") from None


def _numeric(found: dict[tuple[str, int], int | str]) -> dict[TopicPartition, int]:
    return {TopicPartition(*tp): v for tp, v in found.items() if isinstance(v, int)}

"""DeleteGroups (42): delete Empty groups and their offsets (tombstones)."""

from __future__ import annotations

from typing import Any

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx, request) -> Any:
    results = await ctx.broker.group_coordinator.delete_groups(list(request.groups_names))
    return ctx.respond(results=[{"group_id": g, "error_code": e} for g, e in results.items()])

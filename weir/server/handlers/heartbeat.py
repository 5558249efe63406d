"""Heartbeat (12): keep a member's session alive; tells it when to rejoin."""

from __future__ import annotations

from typing import Any

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx, request) -> Any:
    error = ctx.broker.group_coordinator.heartbeat(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        int(request.generation_id))
    return ctx.respond(error_code=error)

"""ListGroups (16): the groups this broker coordinates (v4: filtered by state)."""

from __future__ import annotations

from typing import Any

from weir.protocol.errors import ErrorCode

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx, request) -> Any:
    coordinator = ctx.broker.group_coordinator
    wanted = {s.lower() for s in getattr(request, "states_filter", ()) or ()}
    groups = [
        {"group_id": g.group_id, "protocol_type": g.protocol_type or "",
         "group_state": g.state.value}
        for g in coordinator.all_groups()
        if not wanted or g.state.value.lower() in wanted
    ]
    error = ErrorCode.coordinator_load_in_progress if coordinator.loading() else ErrorCode.none
    return ctx.respond(error_code=error, groups=groups)

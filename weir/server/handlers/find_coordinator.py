"""FindCoordinator (10): the broker leading the group's ``__consumer_offsets`` partition.

The first request creates the topic (COORDINATOR_NOT_AVAILABLE until it has leaders).
Transaction coordinators are not implemented.
"""

from __future__ import annotations

from typing import Any

from weir.protocol.errors import ErrorCode

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 4

GROUP_KEY_TYPE = 0


async def _lookup(ctx, key: str, key_type: int) -> dict[str, Any]:
    if key_type != GROUP_KEY_TYPE:
        return {"key": key, "error_code": ErrorCode.coordinator_not_available,
                "error_message": "transactions are not supported", "node_id": -1,
                "host": "", "port": -1}
    error, node, host, port = await ctx.broker.group_coordinator.find_coordinator(key)
    return {"key": key, "error_code": error, "node_id": node, "host": host, "port": port,
            "error_message": None if error == ErrorCode.none else error.name}


async def handle(ctx, request) -> Any:
    key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))
    if ctx.version >= 4:
        return ctx.respond(coordinators=[await _lookup(ctx, key, key_type)
                                         for key in request.coordinator_keys])
    entry = await _lookup(ctx, request.key, key_type)
    entry.pop("key")
    return ctx.respond(**entry)

"""Heartbeat (12): keep a member's session alive; tells it when to rejoin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.heartbeat.v4.request import HeartbeatRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> Response:
    if not authz.authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed)
    error = ctx.group_coordinator.heartbeat(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        int(request.generation_id))
    return ctx.respond(error_code=error)

"""SyncGroup (14): the leader hands out assignments; every member receives its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.sync_group.v5.request import SyncGroupRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> Response:
    if not authz.authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed,
                           protocol_type=None, protocol_name=None, assignment=b"")
    result = await ctx.group_coordinator.sync(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        int(request.generation_id), getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        {a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return ctx.respond(error_code=result.error, protocol_type=result.protocol_type,
                       protocol_name=result.protocol_name, assignment=result.assignment)

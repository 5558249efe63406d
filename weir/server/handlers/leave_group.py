"""LeaveGroup (13): members leave (one by member id up to v2, a batch with instance ids v3+)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.leave_group.v5.request import LeaveGroupRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> Response:
    coordinator = ctx.group_coordinator
    if not authz.authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed, members=[])
    if ctx.version < 3:
        _group_error, errors = coordinator.leave(request.group_id, [(request.member_id, None)])
        return ctx.respond(error_code=errors[0])
    members = [(m.member_id, m.group_instance_id) for m in request.members]
    group_error, errors = coordinator.leave(request.group_id, members)
    if group_error in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress,
                       ErrorCode.coordinator_not_available, ErrorCode.invalid_group_id):
        return ctx.respond(error_code=group_error, members=[])
    return ctx.respond(error_code=ErrorCode.none, members=[
        {"member_id": mid, "group_instance_id": iid, "error_code": err}
        for (mid, iid), err in zip(members, errors, strict=True)
    ])

"""DescribeGroups (15): state, protocol and members (with metadata when Stable)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.groups.state import GroupState
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 5

_NO_OPERATIONS = -2147483648


def _describe(ctx, group_id: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"group_id": group_id, "error_code": ErrorCode.none,
                             "group_state": GroupState.DEAD.value, "protocol_type": "",
                             "protocol_data": "", "members": [],
                             "authorized_operations": _NO_OPERATIONS}
    if not authz.authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        entry["error_code"] = ErrorCode.group_authorization_failed
        return entry
    try:
        group = ctx.group_coordinator.group(group_id)
    except KafkaError as exc:
        entry["error_code"] = exc.code
        return entry
    if group is None:
        return entry
    stable = group.state == GroupState.STABLE
    entry.update(group_state=group.state.value, protocol_type=group.protocol_type or "",
                 protocol_data=(group.protocol or "") if stable else "")
    entry["members"] = [
        {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
         "client_id": m.client_id, "client_host": m.client_host,
         "member_metadata": m.metadata(group.protocol) if stable else b"",
         "member_assignment": m.assignment if stable else b""}
        for m in group.members.values()
    ]
    return entry


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> Response:
    groups = [_describe(ctx, g) for g in request.groups]
    if getattr(request, "include_authorized_operations", False):  # KIP-430 (v3+)
        for entry in groups:
            if entry["error_code"] != ErrorCode.group_authorization_failed:
                entry["authorized_operations"] = authz.authorized_operations(
                    ctx, ResourceType.GROUP, entry["group_id"])
    return ctx.respond(groups=groups)

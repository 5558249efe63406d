"""DeleteGroups (42): delete Empty groups and their offsets (tombstones)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> Response:
    # Kafka's handleDeleteGroupsRequest: DELETE on each group.
    allowed, denied = authz.filter_authorized(ctx, AclOperation.DELETE, ResourceType.GROUP,
                                              list(request.groups_names))
    results = await ctx.group_coordinator.delete_groups(allowed) if allowed else {}
    results.update(dict.fromkeys(denied, ErrorCode.group_authorization_failed))
    return ctx.respond(results=[{"group_id": g, "error_code": e} for g, e in results.items()])

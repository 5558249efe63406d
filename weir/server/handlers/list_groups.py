"""ListGroups (16): the groups this broker coordinates (v4: filtered by state, v5: by type;
every group here is a "classic" group, as with Kafka's ZooKeeper-mode GroupCoordinator)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.list_groups.v5.request import ListGroupsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> Response:
    coordinator = ctx.group_coordinator
    wanted = {s.lower() for s in getattr(request, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
    classic = not types or "classic" in types
    # Kafka's handleListGroupsRequest: DESCRIBE on the cluster lists every group, otherwise
    # only the groups the principal may describe.
    every = authz.authorize_cluster(ctx, AclOperation.DESCRIBE, log_if_denied=False)
    groups = [
        {"group_id": g.group_id, "protocol_type": g.protocol_type or "",
         "group_state": g.state.value, "group_type": "classic"}
        for g in coordinator.all_groups()
        if classic and (not wanted or g.state.value.lower() in wanted) and (every or authz.authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id, log_if_denied=False))
    ]
    error = ErrorCode.coordinator_load_in_progress if coordinator.loading() else ErrorCode.none
    return ctx.respond(error_code=error, groups=groups)

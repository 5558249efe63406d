"""JoinGroup (11): join or rejoin a group; parked until the rebalance completes.

Version 4+ gets the KIP-394 round trip (MEMBER_ID_REQUIRED with a fresh member id), version
5+ static membership (``group.instance.id``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.groups.state import JoinRequest
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.join_group.v9.request import JoinGroupRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


def client_host(peer: str) -> str:
    return "/" + peer.rsplit(":", 1)[0]


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> Response:
    if not authz.authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed, generation_id=-1,
                           protocol_type=None, protocol_name=None if ctx.version >= 7 else "",
                           leader="", skip_assignment=False, member_id=request.member_id,
                           members=[])
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)
    req = JoinRequest(
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx.peer),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=(int(rebalance.total_seconds() * 1000) if rebalance is not None
                              else session_ms),
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=ctx.version >= 4,
    )
    result = await ctx.group_coordinator.join(request.group_id, req)
    return ctx.respond(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if ctx.version >= 7 else result.protocol_name or "",
        leader=result.leader,
        skip_assignment=False,
        member_id=result.member_id,
        members=[{"member_id": m, "group_instance_id": i, "metadata": md}
                 for m, i, md in result.members],
    )

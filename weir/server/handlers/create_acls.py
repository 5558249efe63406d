"""CreateAcls (30): add ACLs (ALTER on the cluster; Kafka's AclApis.handleCreateAcls)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation
from weir.server.handlers._acl_requests import binding_of, refusal

if TYPE_CHECKING:
    from kio.schema.create_acls.v3.request import CreateAclsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 30
MIN_VERSION = 0  # v0 from weir.protocol.legacy (LITERAL patterns only)
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: CreateAclsRequest) -> Response:
    creations = list(request.creations)
    refused = refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        code, message = refused
        return ctx.respond(results=[{"error_code": code, "error_message": message}
                                    for _ in creations])
    results = await ctx.authorizer.create_acls([binding_of(c) for c in creations])
    return ctx.respond(results=[
        {"error_code": code, "error_message": message if code != ErrorCode.none else None}
        for code, message in results])

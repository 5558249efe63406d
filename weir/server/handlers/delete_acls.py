"""DeleteAcls (31): remove the ACLs matching each filter (ALTER on the cluster)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation
from weir.server.handlers._acl_requests import filter_of, refusal

if TYPE_CHECKING:
    from kio.schema.delete_acls.v3.request import DeleteAclsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 31
MIN_VERSION = 0  # v0 from weir.protocol.legacy (LITERAL patterns only)
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: DeleteAclsRequest) -> Response:
    filters = list(request.filters)
    refused = refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        code, message = refused
        return ctx.respond(filter_results=[
            {"error_code": code, "error_message": message, "matching_acls": []}
            for _ in filters])
    results = await ctx.authorizer.delete_acls([filter_of(f) for f in filters])
    return ctx.respond(filter_results=[
        {"error_code": code, "error_message": message, "matching_acls": [
            {"error_code": err, "error_message": None if err == ErrorCode.none
             else "the ACL could not be deleted",
             "resource_type": int(b.pattern.resource_type),
             "resource_name": b.pattern.name, "pattern_type": int(b.pattern.pattern_type),
             "principal": b.entry.principal, "host": b.entry.host,
             "operation": int(b.entry.operation), "permission_type": int(b.entry.permission)}
            for b, err in deleted]}
        for code, message, deleted in results])

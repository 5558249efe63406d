"""DescribeAcls (29): the ACLs matching a filter (DESCRIBE on the cluster)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclError, AclOperation
from weir.server.handlers._acl_requests import filter_of, refusal

if TYPE_CHECKING:
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 29
MIN_VERSION = 0  # v0 from weir.protocol.legacy (LITERAL patterns only)
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: DescribeAclsRequest) -> Response:
    refused = refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        code, message = refused
        return ctx.respond(error_code=code, error_message=message, resources=[])
    flt = filter_of(request)
    try:
        flt.validate()
    except AclError as exc:
        return ctx.respond(error_code=ErrorCode.invalid_request, error_message=str(exc),
                           resources=[])
    by_pattern: dict = {}
    for binding in ctx.authorizer.describe_acls(flt):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    return ctx.respond(error_code=ErrorCode.none, error_message=None, resources=[
        {"resource_type": int(p.resource_type), "resource_name": p.name,
         "pattern_type": int(p.pattern_type),
         "acls": [{"principal": e.principal, "host": e.host, "operation": int(e.operation),
                   "permission_type": int(e.permission)} for e in entries]}
        for p, entries in by_pattern.items()])

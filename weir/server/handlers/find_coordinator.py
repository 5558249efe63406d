"""FindCoordinator (10): the broker leading the group's ``__consumer_offsets`` partition.

Key type 0: the broker leading the group's ``__consumer_offsets`` partition; key type 1:
the one leading the transactional id's ``__transaction_state`` partition. The first request
creates the topic (COORDINATOR_NOT_AVAILABLE until it has leaders).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2  # KIP-932, FindCoordinator v6+


async def _lookup(ctx, key: str, key_type: int) -> dict[str, Any]:
    # Kafka's handleFindCoordinatorRequest: DESCRIBE on the group or transactional id.
    rtype = (ResourceType.GROUP if key_type == GROUP_KEY_TYPE
             else ResourceType.TRANSACTIONAL_ID)
    if key_type in (0, 1) and not authz.authorize(ctx, AclOperation.DESCRIBE, rtype, key):
        error = authz.AUTHORIZATION_ERRORS[rtype]
        return {"key": key, "error_code": error, "error_message": error.name,
                "node_id": -1, "host": "", "port": -1}
    if key_type == SHARE_KEY_TYPE and ctx.version < 6:
        return {"key": key, "error_code": ErrorCode.invalid_request,
                "error_message": "share coordinators need FindCoordinator v6",
                "node_id": -1, "host": "", "port": -1}
    if key_type == SHARE_KEY_TYPE:
        # Kafka 3.9 has no share coordinator either (KIP-932 is not finished there).
        return {"key": key, "error_code": ErrorCode.coordinator_not_available,
                "error_message": "share groups are not supported", "node_id": -1,
                "host": "", "port": -1}
    if key_type == TRANSACTION_KEY_TYPE:
        error, node = await ctx.txn_coordinator.find_coordinator(key)
        host, port = "", -1
    elif key_type == GROUP_KEY_TYPE:
        error, node, host, port = await ctx.group_coordinator.find_coordinator(key)
    else:
        return {"key": key, "error_code": ErrorCode.invalid_request,
                "error_message": f"unknown coordinator key type {key_type}", "node_id": -1,
                "host": "", "port": -1}
    if error == ErrorCode.none:  # the coordinator's endpoint on this request's listener
        b = ctx.metadata.broker_on(node, ctx.listener)
        if b is None:
            error, node, host, port = ErrorCode.coordinator_not_available, -1, "", -1
        else:
            host, port = b.host, b.port
    return {"key": key, "error_code": error, "node_id": node, "host": host, "port": port,
            "error_message": None if error == ErrorCode.none else error.name}


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> Response:
    key_type = int(getattr(request, "key_type", GROUP_KEY_TYPE))
    if ctx.version >= 4:
        return ctx.respond(coordinators=[await _lookup(ctx, key, key_type)
                                         for key in request.coordinator_keys])
    entry = await _lookup(ctx, request.key, key_type)
    entry.pop("key")
    return ctx.respond(**entry)

"""EndTxn (26): commit or abort the producer's transaction (KIP-98). The answer comes once
PrepareCommit/PrepareAbort is durable in ``__transaction_state``; the markers follow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz
from weir.server.handlers._txn import fenced_for_version

if TYPE_CHECKING:
    from kio.schema.end_txn.v4.request import EndTxnRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: EndTxnRequest) -> Response:
    if not authz.authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                           request.transactional_id):
        return ctx.respond(error_code=ErrorCode.transactional_id_authorization_failed)
    error = await ctx.txn_coordinator.end_txn(
        request.transactional_id, int(request.producer_id), int(request.producer_epoch),
        bool(request.committed))
    return ctx.respond(error_code=fenced_for_version(error, ctx.version, 2))

"""ListTransactions (66, KIP-664; v1's duration filter is KIP-994): the transactional ids
this broker coordinates, filtered by state, producer id and age. Only ids the caller may
DESCRIBE are listed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> Response:
    error, unknown, found = ctx.txn_coordinator.list_transactions(
        {int(p) for p in request.producer_id_filters}, set(request.state_filters),
        int(getattr(request, "duration_filter", -1)))
    states = [{"transactional_id": txn_id, "producer_id": pid, "transaction_state": state}
              for txn_id, pid, state in found
              if authz.authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                 txn_id, log_if_denied=False)]
    return ctx.respond(error_code=error, unknown_state_filters=sorted(unknown),
                       transaction_states=states)

"""DescribeTransactions (65, KIP-664): the state of transactional ids this broker
coordinates (DESCRIBE on each transactional id)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz

if TYPE_CHECKING:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


def _as_schema(entry: dict[str, Any]) -> dict[str, Any]:
    start_ms = entry.pop("transaction_start_time_ms")
    entry["transaction_start_time"] = datetime.datetime.fromtimestamp(
        start_ms / 1000, datetime.UTC)
    entry["transaction_timeout"] = datetime.timedelta(
        milliseconds=entry.pop("transaction_timeout_ms"))
    return entry


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> Response:
    states = []
    for txn_id in request.transactional_ids:
        if not authz.authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                               txn_id):
            entry = ctx.txn_coordinator.describe("")
            entry.update(transactional_id=txn_id,
                         error_code=ErrorCode.transactional_id_authorization_failed)
        else:
            entry = ctx.txn_coordinator.describe(txn_id)
        states.append(_as_schema(entry))
    return ctx.respond(transaction_states=states)

"""AddOffsetsToTxn (25): the group's ``__consumer_offsets`` partition joins the producer's
transaction, before TxnOffsetCommit (KIP-98; WRITE on the transactional id, READ on the
group)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz
from weir.server.handlers._txn import fenced_for_version

if TYPE_CHECKING:
    from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> Response:
    if not authz.authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                           request.transactional_id):
        return ctx.respond(error_code=ErrorCode.transactional_id_authorization_failed)
    if not authz.authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ctx.respond(error_code=ErrorCode.group_authorization_failed)
    groups = ctx.group_coordinator
    tp = TopicPartition("__consumer_offsets", groups.partition_for(request.group_id))
    error = await ctx.txn_coordinator.add_partitions(
        request.transactional_id, int(request.producer_id), int(request.producer_epoch), {tp})
    return ctx.respond(error_code=fenced_for_version(error, ctx.version, 2))

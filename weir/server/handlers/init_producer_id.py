"""InitProducerId (22): producer ids for idempotent producers, and for transactional ones
through the transaction coordinator (epoch bump, fencing, KIP-360 recovery)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import authz
from weir.server.handlers._txn import fenced_for_version

if TYPE_CHECKING:
    from kio.schema.init_producer_id.v5.request import InitProducerIdRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

_MAX_EPOCH = 32767


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> Response:
    if request.transactional_id is None and not (
            authz.authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE, log_if_denied=False)
            or authz.authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)):
        # Kafka's handleInitProducerIdRequest: an idempotent producer needs
        # IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679).
        return ctx.respond(error_code=ErrorCode.cluster_authorization_failed,
                           producer_id=-1, producer_epoch=-1)
    pid = int(getattr(request, "producer_id", -1))
    epoch = int(getattr(request, "producer_epoch", -1))
    if (pid == -1) != (epoch == -1):
        return ctx.respond(error_code=ErrorCode.invalid_request, producer_id=-1,
                           producer_epoch=-1)
    if request.transactional_id is not None:
        if not authz.authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                               request.transactional_id):
            return ctx.respond(error_code=ErrorCode.transactional_id_authorization_failed,
                               producer_id=-1, producer_epoch=-1)
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        result = await ctx.txn_coordinator.init_producer_id(
            request.transactional_id, timeout_ms, pid, epoch)
        return ctx.respond(error_code=fenced_for_version(result.error, ctx.version, 4),
                           producer_id=result.producer_id,
                           producer_epoch=result.producer_epoch)
    try:
        if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
            # KIP-360: an idempotent producer may bump its own epoch to reset sequences.
            return ctx.respond(error_code=ErrorCode.none, producer_id=pid,
                               producer_epoch=epoch + 1)
        new_pid = await ctx.producer_ids.next_id()
    except KafkaError as exc:
        return ctx.respond(error_code=exc.code, producer_id=-1, producer_epoch=-1)
    return ctx.respond(error_code=ErrorCode.none, producer_id=new_pid, producer_epoch=0)

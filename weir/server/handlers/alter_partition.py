"""AlterPartition (56, v2-3): a leader asks the active controller to change an ISR (KIP-497)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode, KafkaError
from weir.server.handlers._controller_requests import cluster_action_refused

if TYPE_CHECKING:
    from kio.schema.alter_partition.v3.request import AlterPartitionRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 56
MIN_VERSION = 2
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: AlterPartitionRequest) -> Response:
    refused = cluster_action_refused(ctx)
    if refused is not None:
        return ctx.respond(error_code=refused, topics=[])
    controller = ctx.controller
    if controller is None or not controller.is_active:
        return ctx.respond(error_code=ErrorCode.not_controller, topics=[])
    try:
        return await controller.on_alter_partition(request)
    except KafkaError as exc:
        return ctx.respond(error_code=exc.code, topics=[])

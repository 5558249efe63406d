"""ControlledShutdown (7, v3): answered by the active controller."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode, KafkaError
from weir.server.handlers._controller_requests import cluster_action_refused

if TYPE_CHECKING:
    from weir.protocol.interbroker.controlled_shutdown.v3.request import ControlledShutdownRequest
    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 7
MIN_VERSION = 3
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: ControlledShutdownRequest) -> Response:
    refused = cluster_action_refused(ctx)
    if refused is not None:
        return ctx.respond(error_code=refused, remaining_partitions=[])
    controller = ctx.controller
    if controller is None or not controller.is_active:
        return ctx.respond(error_code=ErrorCode.not_controller, remaining_partitions=[])
    try:
        remaining = await controller.on_controlled_shutdown(int(request.broker_id),
                                                            int(request.broker_epoch))
    except KafkaError as exc:
        return ctx.respond(error_code=exc.code, remaining_partitions=[])
    return ctx.respond(error_code=ErrorCode.none, remaining_partitions=[
        {"topic_name": tp.topic, "partition_index": tp.partition} for tp in remaining
    ])

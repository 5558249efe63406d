"""Checks shared by the requests a controller sends to brokers (LeaderAndIsr, StopReplica,
UpdateMetadata): a request addressed to an older incarnation of this broker is refused."""

from __future__ import annotations

from weir.protocol.errors import ErrorCode


def stale_broker_epoch(ctx, request) -> ErrorCode | None:
    epoch = int(request.broker_epoch)
    if epoch != -1 and epoch < ctx.broker.broker_epoch:
        return ErrorCode.stale_broker_epoch
    return None

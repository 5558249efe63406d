"""Shared by the transaction handlers."""

from __future__ import annotations

from weir.protocol.errors import ErrorCode


def fenced_for_version(error: ErrorCode, version: int, first_version: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) reaches only clients whose request version knows it; older
    ones get INVALID_PRODUCER_EPOCH, as Kafka's KafkaApis does."""
    if error == ErrorCode.producer_fenced and version < first_version:
        return ErrorCode.invalid_producer_epoch
    return error

"""AlterConfigs (33): replace the whole override set of a topic or of a broker's dynamic
configs (the pre-KIP-339 API; keys not named go back to their defaults).  Validation, storage
and errors are IncrementalAlterConfigs'
(:func:`~weir.server.handlers.incremental_alter_configs.alter_resource`); BROKER_LOGGER is
refused with INVALID_REQUEST, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation
from weir.server import authz
from weir.server.handlers.incremental_alter_configs import (
    REPEATED,
    alter_resource,
    repeated_resources,
)

if TYPE_CHECKING:
    from kio.schema.alter_configs.v2.request import AlterConfigsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> Response:
    responses = []
    repeated = repeated_resources(request.resources)
    for res in request.resources:
        entries = [(c.name, c.value) for c in res.configs]
        code, message = (
            REPEATED if (int(res.resource_type), res.resource_name) in repeated else None
        ) or authz.config_refusal(
            ctx, int(res.resource_type), res.resource_name, AclOperation.ALTER_CONFIGS
        ) or await alter_resource(
            ctx.services, int(res.resource_type), res.resource_name,
            lambda current, effective, entries=entries: replacement(entries),
            bool(request.validate_only))
        responses.append({"error_code": code, "error_message": message,
                          "resource_type": res.resource_type,
                          "resource_name": res.resource_name})
    return ctx.respond(responses=responses)


def replacement(entries: list[tuple[str, str | None]]) -> dict[str, str]:
    """The new override set: every named key with a value (a null value is left out, as
    Kafka's ZkAdminManager.alterConfigs does)."""
    names = [name for name, _ in entries]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise KafkaError(ErrorCode.invalid_request,
                         f"Error due to duplicate config keys: {', '.join(dup)}")
    return {name: value for name, value in entries if value is not None}

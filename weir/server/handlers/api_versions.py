"""ApiVersions (18): generated from the handler registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.protocol import codec
from weir.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kio.schema.api_versions.v4.request import ApiVersionsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def build_response(response_cls: type, error: ErrorCode = ErrorCode.none) -> Any:
    from weir.server.handlers import REGISTRY

    keys = [
        {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
        for h in sorted(REGISTRY.values(), key=lambda h: h.api_key)
    ]
    return codec.build(response_cls, error_code=error, api_keys=keys)


async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> Response:
    return build_response(ctx.response_cls)

"""SaslHandshake (17, v0-v1): the client names its SASL mechanism (Kafka's
``SaslServerAuthenticator``).

After v1 the tokens travel in SaslAuthenticate requests (KIP-152); after v0 they follow as
bare size-prefixed frames until authentication completes (:mod:`weir.server.sasl_v0`), as
Kafka serves clients older than KIP-152.  On a listener without SASL the answer is
ILLEGAL_SASL_STATE; a mechanism the listener does not enable gets
UNSUPPORTED_SASL_MECHANISM with the enabled ones, and the connection closes.  On an
authenticated connection a handshake starts a re-authentication (KIP-368), which must use
the session's mechanism.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.protocol.errors import ErrorCode
from weir.security.session import Stage

if TYPE_CHECKING:
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: SaslHandshakeRequest) -> Response:
    security = ctx.security
    if security is None or not security.listener.sasl:
        return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    enabled = security.listener.mechanisms
    mechanism = str(request.mechanism)
    if mechanism not in enabled:
        security.fail(f"unsupported SASL mechanism {mechanism!r}")
        return ctx.respond(error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled)
    if security.stage is Stage.AUTHENTICATED:
        if ctx.version == 0:  # KIP-368 re-authentication exists only with SaslAuthenticate
            security.fail("re-authentication needs SaslHandshake v1")
            return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=enabled)
        problem = security.begin_reauthentication(mechanism)
        if problem is not None:
            security.fail(problem)
            return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=enabled)
    elif security.stage is Stage.HANDSHAKE:
        security.begin(mechanism)
        security.bare_tokens = ctx.version == 0
    else:
        security.fail("SaslHandshake out of order")
        return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=enabled)
    return ctx.respond(error_code=ErrorCode.none, mechanisms=enabled)

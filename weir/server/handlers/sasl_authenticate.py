"""SaslAuthenticate (36, v0-v2): the SASL tokens of the mechanism chosen by SaslHandshake.

PLAIN is one round against the listener's ``user_<name>`` login options; SCRAM-SHA-256/512
(RFC 5802/7677) is two rounds against the credentials in ZooKeeper (``/config/users``).
A failure answers SASL_AUTHENTICATION_FAILED with Kafka's message and closes the connection
after ``connection.failed.authentication.delay.ms`` (network.py).  v1+ carries the session
lifetime (``connections.max.reauth.ms``, KIP-368).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import TYPE_CHECKING, Any

from weir.protocol.errors import ErrorCode
from weir.security.plain import PlainError, authenticate_plain
from weir.security.scram import HASHES, ScramError, ScramServer
from weir.security.session import Stage

if TYPE_CHECKING:
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2

log = logging.getLogger(__name__)


def _failed(ctx, mechanism: str | None, reason: str) -> Any:
    ctx.security.fail(reason)
    log.info("authentication failed on listener %s from %s (%s): %s", ctx.listener, ctx.peer,
             mechanism, reason)
    # Kafka's message: the reason stays in the broker's log (it could tell which user exists).
    return ctx.respond(
        error_code=ErrorCode.sasl_authentication_failed,
        error_message=("Authentication failed during authentication due to invalid "
                       f"credentials with SASL mechanism {mechanism}"),
        auth_bytes=b"")


def _done(ctx, principal: str, auth_bytes: bytes) -> Any:
    security = ctx.security
    problem = security.succeed(principal)
    if problem is not None:
        return _failed(ctx, security.mechanism, problem)
    log.debug("authenticated %s on listener %s from %s", principal, ctx.listener, ctx.peer)
    return ctx.respond(error_code=ErrorCode.none, auth_bytes=auth_bytes,
                       session_lifetime=datetime.timedelta(
                           milliseconds=security.session_lifetime_ms))


async def handle(ctx: RequestContext, request: SaslAuthenticateRequest) -> Response:
    security = ctx.security
    if security is None or not security.listener.sasl or security.stage is not Stage.AUTHENTICATE:
        if security is not None and security.listener.sasl:
            security.fail("SaslAuthenticate before SaslHandshake")
        return ctx.respond(error_code=ErrorCode.illegal_sasl_state,
                           error_message="SaslAuthenticate without a SaslHandshake",
                           auth_bytes=b"")
    mechanism = security.mechanism
    token = bytes(request.auth_bytes)
    if mechanism == "PLAIN":
        try:
            user = authenticate_plain(token, security.listener.plain_users)
        except PlainError as exc:
            return _failed(ctx, mechanism, str(exc))
        return _done(ctx, f"User:{user}", b"")
    assert mechanism in HASHES
    server = security.exchange
    try:
        if server is None:
            server = ScramServer(mechanism)
            user = server.client_first(token)
            if server.token_auth:
                return _failed(ctx, mechanism, "delegation tokens are not supported")
            credential = await asyncio.to_thread(
                ctx.scram_credentials.credential, user, mechanism)
            if credential is None:
                return _failed(ctx, mechanism, f"no {mechanism} credential for user {user!r}")
            security.exchange = server
            return ctx.respond(error_code=ErrorCode.none, auth_bytes=server.server_first(
                credential))
        final = server.client_final(token)
    except ScramError as exc:
        return _failed(ctx, mechanism, str(exc))
    return _done(ctx, f"User:{server.username}", final)

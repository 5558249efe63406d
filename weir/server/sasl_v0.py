"""SASL tokens without Kafka headers, after a SaslHandshake v0 (the framing before KIP-152).

A client that names its mechanism with SaslHandshake v0 then sends each SASL token as a
bare size-prefixed frame and reads the server's token the same way, until authentication
completes; Kafka's ``SaslServerAuthenticator`` serves both framings
(``enableKafkaSaslAuthenticateHeaders``).  Older clients use it, and librdkafka takes the
broker's support of SaslHandshake v0 as the sign that SASL handshakes are supported at all.

Each bare token is answered by the SaslAuthenticate handler (the one set of mechanism rules):
it is wrapped as a SaslAuthenticate v0 request, and the handler's answer unwrapped to the
bare token; a failure closes the connection, as v0 has no way to say why.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from typing import Any

from weir.protocol import codec
from weir.security.session import SASL_AUTHENTICATE

__all__ = ["answer_bare_token"]

_SIZE = struct.Struct(">i")


async def answer_bare_token(token: bytes | memoryview,
                            dispatch: Callable[[bytes], Awaitable[Any]]) -> bytes | str:
    """The size-prefixed bare token to send back, or the reason to close the connection.
    ``dispatch`` runs a request frame through the broker's dispatcher and returns the
    framed response (size, correlation id, body)."""
    from weir.server.handlers import REGISTRY

    request_cls, response_cls = REGISTRY[SASL_AUTHENTICATE].schemas(0)
    body = codec.encode_body(codec.build(request_cls, auth_bytes=bytes(token)))
    header = codec.encode_request_header(SASL_AUTHENTICATE, 0, 0, None, False)
    framed = await dispatch(header + body)  # a frame as read: without its size
    if not isinstance(framed, bytes):
        return "no answer to a SASL token"
    response = codec.decode_body(response_cls, framed, 8)  # size, correlation id
    if response.error_code != 0:
        return response.error_message or "SASL authentication failed"
    auth = bytes(response.auth_bytes)
    return _SIZE.pack(len(auth)) + auth

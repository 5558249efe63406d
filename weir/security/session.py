"""One connection's authentication state, as Kafka's ``SaslServerAuthenticator`` keeps it.

On a SASL listener a connection may send only ApiVersions and SaslHandshake, then only
SaslAuthenticate, until authentication completes; anything else closes the connection
before its body is decoded.  A failed authentication is answered SASL_AUTHENTICATION_FAILED
and the connection closes after ``connection.failed.authentication.delay.ms``.  With
``connections.max.reauth.ms`` the session expires (KIP-368): the client re-authenticates
with SaslHandshake + SaslAuthenticate on the same connection, as the same principal, before
the session lifetime it was given ends; a request after that closes the connection.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any

from weir.security.listeners import ListenerSecurity

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
ANONYMOUS = "User:ANONYMOUS"


class Stage(enum.Enum):
    HANDSHAKE = "handshake"        # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # SaslAuthenticate expected
    AUTHENTICATED = "authenticated"
    FAILED = "failed"              # answered, closing after the delay


@dataclass
class ConnectionSecurity:
    listener: ListenerSecurity
    principal: str = ANONYMOUS
    stage: Stage = Stage.HANDSHAKE
    mechanism: str | None = None
    exchange: Any = None           # the mechanism's server state between two messages
    expires_at: float | None = None  # monotonic deadline of the session (KIP-368)
    reauthenticating: bool = False
    failure: str | None = None     # why the connection closes after the current response
    bare_tokens: bool = False      # SaslHandshake v0: tokens follow without Kafka headers

    def __post_init__(self) -> None:
        if not self.listener.sasl:
            self.stage = Stage.AUTHENTICATED

    @property
    def authenticated(self) -> bool:
        return self.stage is Stage.AUTHENTICATED

    def refusal(self, api_key: int, now: float | None = None) -> str | None:
        """Why a request with ``api_key`` may not be handled now (None: it may)."""
        if not self.listener.sasl:
            return None
        now = time.monotonic() if now is None else now
        if self.stage is Stage.AUTHENTICATED:
            if (self.expires_at is not None and now > self.expires_at
                    and api_key not in (SASL_HANDSHAKE, SASL_AUTHENTICATE)):
                return ("SASL session expired (connections.max.reauth.ms) without "
                        "re-authentication")
            return None
        if self.stage is Stage.FAILED:
            return "request after a failed authentication"
        if self.stage is Stage.HANDSHAKE and api_key in (API_VERSIONS, SASL_HANDSHAKE):
            return None
        if self.stage is Stage.AUTHENTICATE and api_key == SASL_AUTHENTICATE:
            return None
        return (f"request with API key {api_key} before SASL authentication completed "
                f"(expected {'SaslAuthenticate' if self.stage is Stage.AUTHENTICATE else 'ApiVersions or SaslHandshake'})")

    def max_frame(self, max_request_bytes: int) -> int:
        """Frames before authentication are bounded by ``sasl.server.max.receive.size``."""
        if self.listener.sasl and self.stage is not Stage.AUTHENTICATED:
            return min(max_request_bytes, self.listener.max_receive_size)
        return max_request_bytes

    # -- transitions (called by the SaslHandshake and SaslAuthenticate handlers) -----------

    def begin(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self.exchange = None
        self.stage = Stage.AUTHENTICATE

    def begin_reauthentication(self, mechanism: str) -> str | None:
        """KIP-368: a SaslHandshake on an authenticated connection; an error text or None."""
        if mechanism != self.mechanism:
            return (f"re-authentication must use the mechanism of the session "
                    f"({self.mechanism}), not {mechanism}")
        self.reauthenticating = True
        self.begin(mechanism)
        return None

    def succeed(self, principal: str, now: float | None = None) -> str | None:
        """Authentication completed as ``principal``; an error text when a re-authentication
        names another principal than the session's (Kafka refuses that)."""
        if self.reauthenticating and principal != self.principal:
            return (f"re-authentication as {principal} on a session of {self.principal} "
                    "is not allowed")
        self.principal = principal
        self.stage = Stage.AUTHENTICATED
        self.exchange = None
        self.bare_tokens = False
        self.reauthenticating = False
        lifetime = self.listener.max_reauth_ms
        now = time.monotonic() if now is None else now
        self.expires_at = now + lifetime / 1000 if lifetime > 0 else None
        return None

    def fail(self, reason: str) -> None:
        self.stage = Stage.FAILED
        self.exchange = None
        self.failure = reason

    @property
    def session_lifetime_ms(self) -> int:
        return max(0, self.listener.max_reauth_ms)

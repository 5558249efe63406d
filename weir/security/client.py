"""The broker's own client on a secured inter-broker listener.

:class:`InterBrokerSecurity` is what :class:`weir.protocol.client.BrokerConnection` is handed:
the TLS context for the connection, and :meth:`authenticate`, the SASL exchange run on a new
connection before its first request (SaslHandshake v1, then SaslAuthenticate v2 rounds).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from weir.security.plain import plain_message
from weir.security.scram import HASHES, ScramClient, ScramError


class AuthenticationError(ConnectionError):
    """The other side refused this client's SASL authentication."""


@dataclass(frozen=True)
class InterBrokerSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    async def authenticate(self, conn, timeout_s: float = 30.0) -> None:
        """Run the SASL exchange on ``conn`` (a connected BrokerConnection)."""
        if not self.sasl:
            return
        assert self.mechanism and self.username is not None and self.password is not None
        handshake = await conn.request(SaslHandshakeRequest(mechanism=self.mechanism),
                                       timeout_s=timeout_s)
        if handshake.error_code != ErrorCode.none:
            raise AuthenticationError(
                f"SaslHandshake for {self.mechanism} refused: {handshake.error_code.name} "
                f"(enabled: {', '.join(handshake.mechanisms)})")
        if self.mechanism in HASHES:
            client = ScramClient(self.mechanism, self.username, self.password)
            first = await self._round(conn, client.first(), timeout_s)
            try:
                final = client.final(first)
            except ScramError as exc:
                raise AuthenticationError(str(exc)) from exc
            try:
                client.verify(await self._round(conn, final, timeout_s))
            except ScramError as exc:
                raise AuthenticationError(str(exc)) from exc
        else:
            await self._round(conn, plain_message(self.username, self.password), timeout_s)

    @staticmethod
    async def _round(conn, token: bytes, timeout_s: float) -> bytes:
        response = await conn.request(SaslAuthenticateRequest(auth_bytes=token),
                                      timeout_s=timeout_s)
        if response.error_code != ErrorCode.none:
            raise AuthenticationError(
                f"SaslAuthenticate refused: {response.error_code.name}: "
                f"{response.error_message}")
        return bytes(response.auth_bytes)

"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer``: one message
``authzid NUL username NUL password``; the authorization id must be empty or the user name.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping


class PlainError(Exception):
    """A PLAIN authentication failed; the message is safe to send to the client."""


def parse_plain(token: bytes) -> tuple[str, str]:
    """The (username, password) of a PLAIN message (PlainError when malformed)."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlainError("Invalid SASL/PLAIN response: not UTF-8") from exc
    parts = text.split("\x00")
    if len(parts) != 3:
        raise PlainError("Invalid SASL/PLAIN response: expected 3 tokens")
    authzid, username, password = parts
    if not username:
        raise PlainError("Authentication failed: username not specified")
    if not password:
        raise PlainError("Authentication failed: password not specified")
    if authzid and authzid != username:
        raise PlainError("Authentication failed: Client requested an authorization id "
                         "that is different from username")
    return username, password


def authenticate_plain(token: bytes, users: Mapping[str, str]) -> str:
    """Check a PLAIN message against ``users`` (name → password); returns the user name."""
    username, password = parse_plain(token)
    expected = users.get(username)
    # Compare even for an unknown user so that timing does not tell which names exist.
    ok = hmac.compare_digest(password.encode("utf-8"), (expected or "\x00").encode("utf-8"))
    if expected is None or not ok:
        raise PlainError("Authentication failed: Invalid username or password")
    return username


def plain_message(username: str, password: str) -> bytes:
    return f"\x00{username}\x00{password}".encode()

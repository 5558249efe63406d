"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them.

Sans-I/O: :class:`ScramServer` and :class:`ScramClient` turn messages into messages.  The
server is two-step because the credential lookup (ZooKeeper) happens between reading the
client's first message and answering it.

Credentials are stored as Kafka's ``ScramCredentialUtils`` writes them:
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` — never the password.
Passwords are used as their UTF-8 bytes, without SASLprep, as Kafka's ``ScramFormatter`` does
(this is why Weir does not use a SCRAM library that applies SASLprep).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism: the iteration counts a credential may have.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096

# Kafka's ScramMessages: saslname is any value-char except ',' and '=' (escaped =2C, =3D).
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_CLIENT_FIRST = re.compile(
    r"^(?P<gs2>[ny]),(?:a=(?P<authzid>" + _SASLNAME + r"))?,"
    r"(?P<bare>n=(?P<user>" + _SASLNAME + r"),r=(?P<nonce>[\x21-\x2B\x2D-\x7E]+)"
    r"(?P<ext>(?:,[A-Za-z0-9]+=[^,]*)*))$", re.DOTALL)
_CLIENT_FINAL = re.compile(
    r"^(?P<without>c=(?P<cbind>[A-Za-z0-9+/=]+),r=(?P<nonce>[\x21-\x2B\x2D-\x7E]+)"
    r"(?:,[A-Za-z0-9]+=[^,]*)*?),p=(?P<proof>[A-Za-z0-9+/=]+)$", re.DOTALL)
_SERVER_FIRST = re.compile(
    r"^(?:m=[^,]*,)?r=(?P<nonce>[\x21-\x2B\x2D-\x7E]+),s=(?P<salt>[A-Za-z0-9+/=]+),"
    r"i=(?P<iterations>[0-9]+)(?:,.*)?$", re.DOTALL)


class ScramError(Exception):
    """A SCRAM exchange failed; the message is safe to send to the client."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise ScramError("invalid base64 in SCRAM message") from exc


def _hmac(algorithm: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, algorithm).digest()


def escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


def _algorithm(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ScramError(f"unsupported SCRAM mechanism {mechanism}") from None


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka_string(self) -> str:
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        """Parse a stored credential; ValueError when it is not one."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True),
                       int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from exc


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_algorithm(mechanism), password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    algorithm = _algorithm(mechanism)
    client_key = _hmac(algorithm, salted, b"Client Key")
    stored_key = hashlib.new(algorithm, client_key).digest()
    server_key = _hmac(algorithm, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """What AlterUserScramCredentials would store for ``password`` (a fresh salt)."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    salt = salt if salt is not None else secrets.token_bytes(32)
    salted = salted_password(mechanism, password.encode("utf-8"), salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def _nonce() -> str:
    return secrets.token_urlsafe(24)


class ScramServer:
    """The server side of one exchange: :meth:`client_first` → (look the user up) →
    :meth:`server_first` → :meth:`client_final` (returns the server-final message)."""

    def __init__(self, mechanism: str, server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.algorithm = _algorithm(mechanism)
        self._server_nonce = server_nonce or _nonce()
        self.username: str | None = None
        self.token_auth = False
        self._gs2 = b""
        self._client_first_bare = ""
        self._nonce = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None

    def client_first(self, message: bytes) -> str:
        """Parse the client-first message; returns the user name to look up."""
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScramError("SCRAM client-first message is not UTF-8") from exc
        match = _CLIENT_FIRST.match(text)
        if match is None:
            if text.startswith("p="):
                raise ScramError("channel binding is not supported")
            raise ScramError("invalid SCRAM client-first message")
        user = unescape_username(match["user"])
        authzid = match["authzid"]
        if authzid is not None and unescape_username(authzid) != user:
            raise ScramError("authorization id must match the user name")
        extensions = dict(item.split("=", 1) for item in match["ext"].split(",")[1:])
        self.token_auth = extensions.get("tokenauth", "").lower() == "true"
        self._gs2 = text[: match.start("bare")].encode("utf-8")
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + self._server_nonce
        self.username = user
        return user

    def server_first(self, credential: ScramCredential) -> bytes:
        self._credential = credential
        self._server_first = (f"r={self._nonce},s={_b64(credential.salt)},"
                              f"i={credential.iterations}")
        return self._server_first.encode("ascii")

    def client_final(self, message: bytes) -> bytes:
        """Check the client's proof; returns the server-final message (ScramError: refused)."""
        assert self._credential is not None, "server_first first"
        match = _CLIENT_FINAL.match(message.decode("utf-8", "replace"))
        if match is None:
            raise ScramError("invalid SCRAM client-final message")
        # Kafka's ScramSaslServer since 3.8.1 checks ``endsWith``, not ``equals``: librdkafka
        # before 2.6.1 (Debian's kcat among its users) sends its own nonce once more in front
        # of the combined one.  The proof below still covers the message as the client sent it.
        if not match["nonce"].endswith(self._nonce):
            raise ScramError("invalid nonce in SCRAM client-final message")
        if _unb64(match["cbind"]) != self._gs2:
            raise ScramError("invalid channel binding in SCRAM client-final message")
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, match["without"])).encode("utf-8")
        cred = self._credential
        signature = _hmac(self.algorithm, cred.stored_key, auth_message)
        proof = _unb64(match["proof"])
        if len(proof) != len(signature):
            raise ScramError("invalid client proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.algorithm, client_key).digest(),
                                   cred.stored_key):
            raise ScramError("invalid credentials")
        return ("v=" + _b64(_hmac(self.algorithm, cred.server_key, auth_message))).encode()


class ScramClient:
    """The client side (the broker's inter-broker connections, tests)."""

    def __init__(self, mechanism: str, username: str, password: str,
                 client_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.algorithm = _algorithm(mechanism)
        self.username = username
        self.password = password
        self._nonce = client_nonce or _nonce()
        self._bare = f"n={escape_username(username)},r={self._nonce}"
        self._auth_message = b""
        self._server_key = b""

    def first(self) -> bytes:
        return ("n,," + self._bare).encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        match = _SERVER_FIRST.match(text)
        if match is None:
            raise ScramError(f"invalid SCRAM server-first message {text[:80]!r}")
        nonce = match["nonce"]
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise ScramError("server nonce does not extend the client nonce")
        iterations = int(match["iterations"])
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ScramError(f"server asked for {iterations} iterations")
        salt = _unb64(match["salt"])
        salted = salted_password(self.mechanism, self.password.encode("utf-8"), salt,
                                 iterations)
        without = f"c={_b64(b'n,,')},r={nonce}"
        self._auth_message = f"{self._bare},{text},{without}".encode()
        client_key = _hmac(self.algorithm, salted, b"Client Key")
        stored_key = hashlib.new(self.algorithm, client_key).digest()
        signature = _hmac(self.algorithm, stored_key, self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_key = _hmac(self.algorithm, salted, b"Server Key")
        return f"{without},p={_b64(proof)}".encode("ascii")

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise ScramError(f"server refused: {text[2:]}")
        expected = "v=" + _b64(_hmac(self.algorithm, self._server_key, self._auth_message))
        if not hmac.compare_digest(text.encode(), expected.encode()):
            raise ScramError("invalid server signature")

"""TLS with Python's ``ssl`` module, configured from Kafka's PEM keys (KIP-651).

- ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (a PEM file holding the private
  key and the certificate chain) or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``
  (the PEM text itself); ``ssl.key.password`` for an encrypted key.
- ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or
  ``ssl.truststore.certificates``.
- ``ssl.client.auth``: none / requested / required.
- ``ssl.enabled.protocols``: TLSv1.2 and TLSv1.3 only (older versions are refused).
- The principal of a client certificate is its subject's distinguished name in RFC 2253
  form (``User:CN=alice,O=acme``), or what ``ssl.principal.mapping.rules`` maps it to
  (Kafka's ``SslPrincipalMapper``, KIP-371).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from weir.config.keys import default_value

PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """An unusable TLS setting; the message names the key."""


@dataclass(frozen=True)
class TlsSettings:
    """The ``ssl.*`` values of one listener (or of the inter-broker client); the defaults are
    the key table's (Kafka's), :meth:`from_lookup` reads one listener's view of the config."""

    keystore_type: str = default_value("ssl.keystore.type")
    keystore_location: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    key_password: str | None = None
    truststore_type: str = default_value("ssl.truststore.type")
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = default_value("ssl.client.auth")
    enabled_protocols: tuple[str, ...] = tuple(default_value("ssl.enabled.protocols"))
    endpoint_identification_algorithm: str = default_value(
        "ssl.endpoint.identification.algorithm")
    principal_mapping_rules: str = default_value("ssl.principal.mapping.rules")

    @classmethod
    def from_lookup(cls, get: Callable[[str], object]) -> TlsSettings:
        def text(key: str) -> str | None:
            value = get(key)
            return None if value in (None, "") else str(value)

        protocols = get("ssl.enabled.protocols") or list(cls.enabled_protocols)
        if isinstance(protocols, str):
            protocols = [p.strip() for p in protocols.split(",") if p.strip()]
        return cls(
            keystore_type=(text("ssl.keystore.type") or cls.keystore_type).upper(),
            keystore_location=text("ssl.keystore.location"),
            keystore_certificate_chain=text("ssl.keystore.certificate.chain"),
            keystore_key=text("ssl.keystore.key"),
            key_password=text("ssl.key.password"),
            truststore_type=(text("ssl.truststore.type") or cls.truststore_type).upper(),
            truststore_location=text("ssl.truststore.location"),
            truststore_certificates=text("ssl.truststore.certificates"),
            client_auth=(text("ssl.client.auth") or cls.client_auth).lower(),
            enabled_protocols=tuple(protocols),
            endpoint_identification_algorithm=text("ssl.endpoint.identification.algorithm")
            or "",
            principal_mapping_rules=(text("ssl.principal.mapping.rules")
                                     or cls.principal_mapping_rules),
        )

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_certificate_chain)


def _versions(settings: TlsSettings) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    unknown = [p for p in settings.enabled_protocols if p not in PROTOCOLS]
    if unknown or not settings.enabled_protocols:
        raise TlsConfigError(
            f"Invalid value {','.join(settings.enabled_protocols)!r} for configuration "
            "ssl.enabled.protocols: must be TLSv1.2 and/or TLSv1.3")
    chosen = sorted(PROTOCOLS[p] for p in settings.enabled_protocols)
    return chosen[0], chosen[-1]


def _load_keystore(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    if settings.keystore_type != "PEM":
        raise TlsConfigError(f"Invalid value {settings.keystore_type!r} for configuration "
                             "ssl.keystore.type: only PEM is supported")
    password = settings.key_password
    try:
        if settings.keystore_location:
            ctx.load_cert_chain(settings.keystore_location, password=password)
            return
        if not (settings.keystore_certificate_chain and settings.keystore_key):
            raise TlsConfigError("ssl.keystore.certificate.chain and ssl.keystore.key must "
                                 "be set together")
        # The ssl module loads a chain only from files: a private temporary file, removed
        # at once.
        fd, path = tempfile.mkstemp(prefix="weir-keystore-", suffix=".pem")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(settings.keystore_key.strip() + "\n")
                f.write(settings.keystore_certificate_chain.strip() + "\n")
            ctx.load_cert_chain(path, password=password)
        finally:
            os.unlink(path)
    except (ssl.SSLError, OSError) as exc:
        key = "ssl.keystore.location" if settings.keystore_location else \
            "ssl.keystore.certificate.chain"
        raise TlsConfigError(f"Invalid configuration {key}: cannot load the key and "
                             f"certificate chain: {exc}") from exc


def _load_truststore(ctx: ssl.SSLContext, settings: TlsSettings) -> bool:
    if settings.truststore_type != "PEM":
        raise TlsConfigError(f"Invalid value {settings.truststore_type!r} for configuration "
                             "ssl.truststore.type: only PEM is supported")
    try:
        if settings.truststore_location:
            ctx.load_verify_locations(cafile=settings.truststore_location)
            return True
        if settings.truststore_certificates:
            ctx.load_verify_locations(cadata=settings.truststore_certificates)
            return True
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"Invalid configuration ssl.truststore.*: cannot load the "
                             f"trusted certificates: {exc}") from exc
    return False


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The SSLContext of an SSL or SASL_SSL listener."""
    if not settings.has_keystore:
        raise TlsConfigError("Missing configuration ssl.keystore.location (or "
                             "ssl.keystore.certificate.chain and ssl.keystore.key) for an SSL "
                             "listener")
    if settings.client_auth not in CLIENT_AUTH:
        raise TlsConfigError(f"Invalid value {settings.client_auth!r} for configuration "
                             "ssl.client.auth: must be one of none, requested, required")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version, ctx.maximum_version = _versions(settings)
    _load_keystore(ctx, settings)
    trusted = _load_truststore(ctx, settings)
    if settings.client_auth != "none" and not trusted:
        raise TlsConfigError(f"ssl.client.auth={settings.client_auth} needs a truststore "
                             "(ssl.truststore.location or ssl.truststore.certificates)")
    ctx.verify_mode = CLIENT_AUTH[settings.client_auth]
    SslPrincipalMapper(settings.principal_mapping_rules)  # fail at startup on bad rules
    return ctx


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """The SSLContext of the broker's own client on an SSL or SASL_SSL inter-broker listener
    (its keystore is presented when the other broker asks for a certificate)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version, ctx.maximum_version = _versions(settings)
    if not _load_truststore(ctx, settings):
        ctx.load_default_certs()
    if settings.has_keystore:
        _load_keystore(ctx, settings)
    ctx.check_hostname = settings.endpoint_identification_algorithm.lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


# -- principals ----------------------------------------------------------------------------

_RULE = re.compile(
    r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


class SslPrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``: ``RULE:pattern/replacement/[LU]`` entries
    and ``DEFAULT``, tried in order; the first whose pattern matches the whole DN wins
    (``L``/``U``: lower/upper case the result).  No match: the DN itself."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[tuple[re.Pattern[str], str, str] | None] = []
        text = rules.strip() or "DEFAULT"
        pos = 0
        while pos < len(text):
            match = _RULE.match(text, pos)
            if match is None or match.end() == pos:
                raise TlsConfigError(f"Invalid value {rules!r} for configuration "
                                     "ssl.principal.mapping.rules: cannot parse the rule at "
                                     f"{text[pos:pos + 40]!r}")
            pos = match.end()
            if match.group(1):
                self.rules.append(None)
                continue
            try:
                pattern = re.compile(match.group(2))
            except re.error as exc:
                raise TlsConfigError(f"Invalid value {rules!r} for configuration "
                                     f"ssl.principal.mapping.rules: {exc}") from exc
            # Java's $1 group references become Python's \g<1>.
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(3))
            self.rules.append((pattern, replacement, match.group(4)))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            if pattern.fullmatch(dn):
                result = pattern.sub(replacement, dn, count=1)
                return result.lower() if case == "L" else result.upper() if case == "U" \
                    else result
        return dn


def certificate_dn(der: bytes) -> str:
    """The subject of a DER certificate as RFC 2253 text (``CN=a,O=b``), Java's
    ``X500Principal.getName()``."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def ssl_principal(ssl_object: ssl.SSLObject | None, mapper: SslPrincipalMapper) -> str:
    """``User:<mapped DN>`` of a verified peer certificate, else ``User:ANONYMOUS``."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return "User:ANONYMOUS"
    return "User:" + mapper.name(certificate_dn(der))

"""Each listener's security settings, from Kafka's keys.

A listener ``NAME://host:port`` has the security protocol ``listener.security.protocol.map``
gives its name (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).  Its settings are read with
Kafka's listener prefix first: ``listener.name.<name lower-cased>.<key>``, then ``<key>``;
a SASL login module's options from ``listener.name.<name>.<mechanism>.sasl.jaas.config``
(then ``sasl.jaas.config``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from weir.config.security_protocols import SecurityConfigError
from weir.security import jaas, tls
from weir.security.client import InterBrokerSecurity

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

Lookup = Callable[[str], Any]
log = logging.getLogger(__name__)


def prefixed(listener: str, key: str) -> str:
    return f"listener.name.{listener.lower()}.{key}"


def jaas_key(listener: str, mechanism: str) -> str:
    return prefixed(listener, f"{mechanism.lower()}.sasl.jaas.config")


def _jaas(get: Lookup, listener: str, mechanism: str) -> jaas.JaasConfig | None:
    """The login module of ``mechanism`` on ``listener``: Kafka's
    ``listener.name.<l>.<mechanism>.sasl.jaas.config``, then ``sasl.jaas.config``, then the
    static JAAS file (sections ``<l>.KafkaServer``, then ``KafkaServer``)."""
    expected = jaas.PLAIN_MODULE if mechanism == "PLAIN" else jaas.SCRAM_MODULE
    for key in (jaas_key(listener, mechanism), "sasl.jaas.config"):
        text = get(key)
        if text:
            try:
                parsed = jaas.parse_jaas_config(str(text))
            except ValueError as exc:
                raise SecurityConfigError(f"Invalid value for configuration {key}: {exc}") \
                    from exc
            if key != "sasl.jaas.config" or parsed.module == expected:
                return parsed
    sections = static_jaas_file()
    for section in (f"{listener.lower()}.KafkaServer", "KafkaServer"):
        for entry in sections.get(section, []):
            if entry.module == expected:
                return entry
    return None


JAAS_FILE_PROPERTY = "java.security.auth.login.config"


def static_jaas_file(environ: dict[str, str] | None = None) -> dict[str, list[jaas.JaasConfig]]:
    """Kafka's static JAAS file: the path is the JVM property
    ``-Djava.security.auth.login.config=<path>`` in ``KAFKA_OPTS``, as kafka-server-start.sh
    passes it (no such option: no file)."""
    opts = (os.environ if environ is None else environ).get("KAFKA_OPTS", "")
    prefix = f"-D{JAAS_FILE_PROPERTY}="
    paths = [item[len(prefix):] for item in shlex.split(opts) if item.startswith(prefix)]
    if not paths:
        return {}
    try:
        with open(paths[-1]) as f:
            return jaas.parse_jaas_file(f.read())
    except (OSError, ValueError) as exc:
        raise SecurityConfigError(f"Invalid JAAS file {paths[-1]} ({JAAS_FILE_PROPERTY} in "
                                  f"KAFKA_OPTS): {exc}") from exc


@dataclass
class ListenerSecurity:
    """What the socket server of one listener needs to secure its connections."""

    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    principal_mapper: tls.SslPrincipalMapper = field(
        default_factory=tls.SslPrincipalMapper)
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = field(default_factory=dict)
    failed_authentication_delay_ms: int = 100
    max_reauth_ms: int = 0
    max_receive_size: int = 524288

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol.endswith("SSL")

    @classmethod
    def plaintext(cls, name: str = "PLAINTEXT") -> ListenerSecurity:
        return cls(name, "PLAINTEXT")


def _mechanisms(get: Lookup, key: str = "sasl.enabled.mechanisms") -> tuple[str, ...]:
    value = get(key) or []
    items = value if isinstance(value, list) else str(value).split(",")
    names = tuple(m.strip().upper() for m in items if m.strip())
    unknown = [m for m in names if m not in MECHANISMS]
    if unknown:
        raise SecurityConfigError(
            f"Invalid value {','.join(names)!r} for configuration {key}: "
            f"{', '.join(unknown)} not supported (supported: {', '.join(MECHANISMS)})")
    return names


def listener_security(name: str, protocol: str, get: Lookup) -> ListenerSecurity:
    """Build a listener's settings; ``get(key)`` returns a broker config value (None when
    unset) for plain and ``listener.name.``-prefixed keys alike."""

    def value(key: str) -> Any:
        found = get(prefixed(name, key))
        return found if found is not None else get(key)

    sec = ListenerSecurity(
        name, protocol,
        failed_authentication_delay_ms=int(get("connection.failed.authentication.delay.ms")
                                           or 0),
        max_reauth_ms=int(value("connections.max.reauth.ms") or 0),
        max_receive_size=int(value("sasl.server.max.receive.size") or 524288),
    )
    if sec.uses_tls:
        try:
            settings = tls.TlsSettings.from_lookup(value)
            if sec.sasl and get(prefixed(name, "ssl.client.auth")) is None:
                # Kafka's ChannelBuilders: on SASL_SSL only the listener-prefixed
                # ssl.client.auth asks for client certificates (the plain key is for SSL).
                if settings.client_auth != "none":
                    log.warning("ssl.client.auth applies to SSL listeners only; use "
                                "%s to ask for certificates on %s",
                                prefixed(name, "ssl.client.auth"), name)
                settings = dataclasses.replace(settings, client_auth="none")
            sec.ssl_context = tls.server_context(settings)
            sec.principal_mapper = tls.SslPrincipalMapper(settings.principal_mapping_rules)
        except tls.TlsConfigError as exc:
            raise SecurityConfigError(f"listener {name}: {exc}") from exc
    if sec.sasl:
        mech_key = prefixed(name, "sasl.enabled.mechanisms")
        sec.mechanisms = _mechanisms(get, mech_key if get(mech_key) else
                                     "sasl.enabled.mechanisms")
        if not sec.mechanisms:
            raise SecurityConfigError(f"listener {name} ({protocol}): "
                                      "sasl.enabled.mechanisms is empty")
        if "PLAIN" in sec.mechanisms:
            login = _jaas(get, name, "PLAIN")
            if login is None or not login.plain_users():
                raise SecurityConfigError(
                    f"listener {name} enables PLAIN but {jaas_key(name, 'PLAIN')} names no "
                    'users (user_<name>="<password>" options of PlainLoginModule)')
            sec.plain_users = login.plain_users()
    return sec


def inter_broker_client(listener: str, protocol: str, get: Lookup) -> InterBrokerSecurity:
    """The inter-broker client's settings: the listener's TLS truststore (and keystore, for
    ``ssl.client.auth``), ``sasl.mechanism.inter.broker.protocol`` and the ``username`` and
    ``password`` of that mechanism's login module on the listener."""

    def value(key: str) -> Any:
        found = get(prefixed(listener, key))
        return found if found is not None else get(key)

    context = None
    if protocol.endswith("SSL"):
        try:
            context = tls.client_context(tls.TlsSettings.from_lookup(value))
        except tls.TlsConfigError as exc:
            raise SecurityConfigError(f"inter-broker listener {listener}: {exc}") from exc
    if not protocol.startswith("SASL_"):
        return InterBrokerSecurity(protocol, context)
    mechanism = str(get("sasl.mechanism.inter.broker.protocol") or "").upper()
    if mechanism not in MECHANISMS:
        raise SecurityConfigError(
            f"Invalid value {mechanism!r} for configuration "
            f"sasl.mechanism.inter.broker.protocol: must be one of {', '.join(MECHANISMS)}")
    login = _jaas(get, listener, mechanism)
    if login is None or not login.username or login.password is None:
        raise SecurityConfigError(
            f"{jaas_key(listener, mechanism)} must give the broker's own username and "
            "password for inter-broker SASL")
    return InterBrokerSecurity(protocol, context, mechanism, login.username, login.password)

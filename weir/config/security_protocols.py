"""Kafka's security protocols and ``listener.security.protocol.map`` (Kafka's
``SecurityProtocol`` and ``KafkaConfig.listenerSecurityProtocolMap``): parsed here, below
both the broker config's listener rules (:mod:`weir.config.broker`) and the listeners'
TLS/SASL settings (:mod:`weir.security.listeners`), which share them."""

from __future__ import annotations

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class SecurityConfigError(ValueError):
    """An unusable security setting; the message names the key."""


def parse_protocol_map(text: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...`` (names upper-cased)."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in SECURITY_PROTOCOLS:
            raise SecurityConfigError(
                f"Invalid value {text!r} for configuration listener.security.protocol.map: "
                f"{item!r} is not NAME:PROTOCOL with PROTOCOL one of "
                + ", ".join(SECURITY_PROTOCOLS))
        out[name.strip().upper()] = protocol
    return out

"""The broker's listeners (Kafka's ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map``, ``inter.broker.listener.name``).

One :class:`~weir.server.network.SocketServer` per listener, each with its security
(``weir.security.listeners``); the registration in ``/brokers/ids/<id>`` lists every
advertised endpoint with its security protocol; the broker's own client (replica fetchers,
AlterPartition, the controller's channel, controlled shutdown) connects to the other brokers'
inter-broker listener with its TLS and SASL settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from weir.config import BrokerConfig, ConfigError, parse_listener
from weir.coordination.codecs import BrokerInfo
from weir.security.client import InterBrokerSecurity
from weir.security.listeners import (
    SecurityConfigError,
    inter_broker_client,
    listener_security,
)
from weir.server.network import ConnectionLimits, SocketServer

if TYPE_CHECKING:
    from weir.server.context import BrokerServices


def socket_servers(services: BrokerServices, config: BrokerConfig) -> list[SocketServer]:
    """One server per listener, in the order of ``listeners`` (ConfigError: a security
    setting is unusable; the message names the key)."""
    limits = ConnectionLimits.from_config(config)
    servers = []
    for lst in config.listeners_parsed:
        try:
            security = listener_security(lst.name, config.listener_protocols[lst.name],
                                         config.security_value)
        except (SecurityConfigError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        host = "" if lst.host in ("0.0.0.0", "::") else lst.host
        servers.append(SocketServer(services, host, lst.port, limits, security))
    return servers


def check_security(config: BrokerConfig) -> None:
    """Build every listener's security and the inter-broker client's once, so that a bad
    setting stops the start with a ConfigError naming the key."""
    for lst in config.listeners_parsed:
        try:
            listener_security(lst.name, config.listener_protocols[lst.name],
                              config.security_value)
        except (SecurityConfigError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
    inter_broker_security(config)


def inter_broker_security(config: BrokerConfig) -> InterBrokerSecurity:
    name = config.inter_broker_listener_name
    try:
        return inter_broker_client(name, config.listener_protocols[name],
                                   config.security_value)
    except (SecurityConfigError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def registration(config: BrokerConfig, servers: list[SocketServer], broker_id: int
                 ) -> BrokerInfo:
    """This broker's ``/brokers/ids/<id>`` content: every advertised listener (port 0: the
    port its server bound), the protocol map, host/port of the inter-broker listener."""
    bound = {s.security.name: s.port for s in servers}
    endpoints = []
    protocols = []
    for name in _advertised_names(config):
        host, port = config.advertised_endpoint(name, bound.get(name, 0))
        shown = f"[{host}]" if ":" in host else host
        endpoints.append(f"{name}://{shown}:{port}")
        protocols.append((name, config.listener_protocols[name]))
    host, port = config.advertised_endpoint(config.inter_broker_listener_name,
                                            bound.get(config.inter_broker_listener_name, 0))
    return BrokerInfo(id=broker_id, host=host, port=port, rack=config.get("broker.rack"),
                      epoch=-1, endpoints=endpoints, security_protocols=tuple(protocols))


def _advertised_names(config: BrokerConfig) -> list[str]:
    advertised = config.get("advertised.listeners") or config.get("listeners")
    return [parse_listener(uri).name for uri in advertised]

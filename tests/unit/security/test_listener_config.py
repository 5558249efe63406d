"""Kafka's listener rules in BrokerConfig: protocols, unique names and ports, the
inter-broker listener; per-listener keys are not reported as unknown."""

from __future__ import annotations

import pytest

from weir.config import BrokerConfig, ConfigError

BASE = {"broker.id": "1", "zookeeper.connect": "zk:2181", "log.dirs": "/tmp/x"}


def make(**props: str) -> BrokerConfig:
    return BrokerConfig({**BASE, **{k.replace("__", "."): v for k, v in props.items()}})


def test_several_listeners_and_the_inter_broker_one():
    c = make(listeners="PLAINTEXT://:9092,INTERNAL://127.0.0.1:9093",
             listener__security__protocol__map="PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
             inter__broker__listener__name="internal")
    assert c.listener_protocols["INTERNAL"] == "SASL_SSL"
    assert c.inter_broker_listener_name == "INTERNAL"
    assert c.advertised_endpoint("INTERNAL", 0) == ("127.0.0.1", 9093)
    assert make(listeners="SSL://127.0.0.1:1,PLAINTEXT://127.0.0.1:2") \
        .inter_broker_listener_name == "PLAINTEXT"
    assert make(listeners="SSL://127.0.0.1:1",
                security__inter__broker__protocol="SSL").inter_broker_listener_name == "SSL"


@pytest.mark.parametrize(("props", "key"), [
    ({"listeners": "CUSTOM://:1"}, "listeners"),
    ({"listeners": "SSL://:1,SSL://:2"}, "listeners"),
    ({"listeners": "SSL://:1,PLAINTEXT://:1"}, "listeners"),
    ({"listeners": "SSL://:1"}, "security.inter.broker.protocol"),
    ({"listeners": "SSL://:1", "inter.broker.listener.name": "OTHER"},
     "inter.broker.listener.name"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "inter.broker.listener.name"),
    ({"listener.security.protocol.map": "PLAINTEXT:NOPE"}, "listener.security.protocol.map"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms"),
    ({"ssl.enabled.protocols": "TLSv1"}, "ssl.enabled.protocols"),
])
def test_invalid_listener_settings_name_the_key(props, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig({**BASE, **props})


def test_listener_prefixed_keys_are_known():
    c = make(**{"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "x",
                "listener.name.ssl.ssl.client.auth": "required"})
    assert c.unknown == []
    assert c.security_value("listener.name.ssl.ssl.client.auth") == "required"
    assert c.security_value("ssl.client.auth") == "none"

"""TLS contexts from Kafka's PEM keys, client certificate principals and Kafka's
ssl.principal.mapping.rules, through a real socket server."""

from __future__ import annotations

import asyncio
import ssl
import struct

import pytest

from weir.security import tls
from weir.security.certs import CertificateAuthority
from weir.security.listeners import listener_security
from weir.security.tls import SslPrincipalMapper, TlsConfigError, TlsSettings
from weir.server.network import SocketServer


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority.create()
    ca.write(d / "ca.key", d / "ca.pem")
    server = ca.issue("broker", hosts=("127.0.0.1", "localhost"))
    server.write_keystore(d / "server.pem")
    client = ca.issue("alice", org="Acme", server=False)
    client.write(d / "client.key", d / "client.pem")
    return d, server


@pytest.mark.parametrize(("rules", "dn", "expected"), [
    ("DEFAULT", "CN=alice,O=Acme", "CN=alice,O=Acme"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=svc,OU=ServiceUsers,O=Acme", "svc"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=bob,O=Acme", "CN=bob,O=Acme"),
    ("RULE:^CN=(.*?),O=(.*?)$/$1@$2/L", "CN=Alice,O=ACME", "alice@acme"),
    ("RULE:^CN=(.*?),O=(.*?)$/$1@$2/U", "CN=Alice,O=ACME", "ALICE@ACME"),
    ("RULE:^CN=([^,]*).*$/$1/", "CN=x,O=y", "x"),
    ("RULE:^O=(.*)$/$1/", "CN=x,O=y", "CN=x,O=y"),  # no rule matches: the DN
])
def test_principal_mapping_rules(rules, dn, expected):
    assert SslPrincipalMapper(rules).name(dn) == expected


@pytest.mark.parametrize("rules", ["RULE:abc", "NOPE", "RULE:(/x/", "RULE:a/b/Q"])
def test_bad_mapping_rules_name_the_key(rules):
    with pytest.raises(TlsConfigError, match="ssl.principal.mapping.rules"):
        SslPrincipalMapper(rules)


def test_server_context_errors_name_the_key(pki):
    d, _server = pki
    with pytest.raises(TlsConfigError, match="ssl.keystore.location"):
        tls.server_context(TlsSettings())
    with pytest.raises(TlsConfigError, match="truststore"):
        tls.server_context(TlsSettings(keystore_location=str(d / "server.pem"),
                                       client_auth="required"))
    with pytest.raises(TlsConfigError, match="ssl.enabled.protocols"):
        tls.server_context(TlsSettings(keystore_location=str(d / "server.pem"),
                                       enabled_protocols=("TLSv1.1",)))
    with pytest.raises(TlsConfigError, match="ssl.keystore.type"):
        tls.server_context(TlsSettings(keystore_type="JKS",
                                       keystore_location=str(d / "server.pem")))
    with pytest.raises(TlsConfigError, match="ssl.keystore.location"):
        tls.server_context(TlsSettings(keystore_location=str(d / "ca.pem")))  # no key


def test_keystore_as_pem_text(pki):
    _d, server = pki
    ctx = tls.server_context(TlsSettings(keystore_certificate_chain=server.cert_pem,
                                         keystore_key=server.key_pem))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2


class _Broker:
    pass


async def _principal_seen(d, listener_props: dict, client_cert: bool) -> str:
    props = {"ssl.keystore.location": str(d / "server.pem"),
             "ssl.truststore.location": str(d / "ca.pem"), **listener_props}
    security = listener_security("SSL", "SSL", props.get)
    server = SocketServer(_Broker(), "127.0.0.1", 0, security=security)
    seen: list[str] = []

    async def dispatch(frame, peer, conn_security=None):
        seen.append(conn_security.principal)

    server.dispatcher.dispatch = dispatch
    await server.start()
    try:
        ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
        if client_cert:
            ctx.load_cert_chain(str(d / "client.pem"), str(d / "client.key"))
        _reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx)
        frame = struct.pack(">hhi", 18, 0, 1) + b"\x00\x00"
        writer.write(struct.pack(">i", len(frame)) + frame)
        await writer.drain()
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.02)
        writer.close()
        return seen[0]
    finally:
        await server.stop()


def test_ssl_principal_is_the_certificate_dn_or_mapped(pki):
    d, _ = pki
    assert asyncio.run(_principal_seen(d, {"ssl.client.auth": "required"}, True)) \
        == "User:CN=alice,O=Acme"
    assert asyncio.run(_principal_seen(
        d, {"ssl.client.auth": "requested",
            "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/"},
        True)) == "User:alice"
    assert asyncio.run(_principal_seen(d, {"ssl.client.auth": "requested"}, False)) \
        == "User:ANONYMOUS"
    assert asyncio.run(_principal_seen(d, {}, True)) == "User:ANONYMOUS"  # none asked

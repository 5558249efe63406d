"""The SASL pieces without sockets: a connection's authentication state (Kafka's
SaslServerAuthenticator rules), PLAIN, JAAS options and the listeners' settings."""

from __future__ import annotations

import pytest

from weir.config.security_protocols import parse_protocol_map
from weir.security.jaas import client_jaas_config, parse_jaas_config
from weir.security.listeners import (
    ListenerSecurity,
    SecurityConfigError,
    inter_broker_client,
    listener_security,
)
from weir.security.plain import PlainError, authenticate_plain
from weir.security.session import ConnectionSecurity, Stage

SASL = ListenerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT", mechanisms=("SCRAM-SHA-256",),
                        max_reauth_ms=1000, max_receive_size=100)


def test_plaintext_connection_is_anonymous_and_unrestricted():
    conn = ConnectionSecurity(ListenerSecurity.plaintext())
    assert conn.authenticated and conn.principal == "User:ANONYMOUS"
    assert conn.refusal(0) is None and conn.max_frame(1000) == 1000


def test_only_handshake_apis_before_authentication():
    conn = ConnectionSecurity(SASL)
    assert conn.refusal(18) is None and conn.refusal(17) is None
    assert conn.refusal(3) is not None and conn.refusal(36) is not None
    assert conn.max_frame(10**6) == 100
    conn.begin("SCRAM-SHA-256")
    assert conn.stage is Stage.AUTHENTICATE
    assert conn.refusal(36) is None and conn.refusal(18) is not None
    assert conn.succeed("User:alice", now=10.0) is None
    assert conn.refusal(3, now=10.5) is None and conn.max_frame(10**6) == 10**6
    assert conn.refusal(3, now=11.5) is not None  # the session ended (KIP-368)
    assert conn.refusal(17, now=11.5) is None


def test_reauthentication_keeps_mechanism_and_principal():
    conn = ConnectionSecurity(SASL)
    conn.begin("SCRAM-SHA-256")
    conn.succeed("User:alice", now=0.0)
    assert conn.begin_reauthentication("SCRAM-SHA-512") is not None
    assert conn.begin_reauthentication("SCRAM-SHA-256") is None
    assert conn.succeed("User:bob", now=0.5) is not None
    conn.fail("x")
    assert conn.refusal(18) is not None


def test_plain():
    users = {"alice": "pw"}
    assert authenticate_plain(b"\0alice\0pw", users) == "alice"
    assert authenticate_plain(b"alice\0alice\0pw", users) == "alice"
    for token in (b"\0alice\0bad", b"\0bob\0pw", b"bob\0alice\0pw", b"\0alice", b"\xff",
                  b"\0\0pw", b"\0alice\0"):
        with pytest.raises(PlainError):
            authenticate_plain(token, users)


def test_jaas():
    parsed = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="a \\"q\\" b" user_admin="x" user_bob=y;')
    assert parsed.username == "admin" and parsed.password == 'a "q" b'
    assert parsed.plain_users() == {"admin": "x", "bob": "y"}
    assert parse_jaas_config(client_jaas_config("SCRAM-SHA-512", "u", 'p"w')).password == 'p"w'
    for text in ("", "Module optional a=b;", "Module required a=b", "Module required =x;"):
        with pytest.raises(ValueError):
            parse_jaas_config(text)


def test_protocol_map():
    assert parse_protocol_map("internal:sasl_ssl,EXTERNAL:SSL") == {
        "INTERNAL": "SASL_SSL", "EXTERNAL": "SSL"}
    with pytest.raises(SecurityConfigError, match="listener.security.protocol.map"):
        parse_protocol_map("A:TLS")


def test_listener_settings_errors_name_the_key():
    with pytest.raises(SecurityConfigError, match="plain.sasl.jaas.config"):
        listener_security("SASL_PLAINTEXT", "SASL_PLAINTEXT",
                          {"sasl.enabled.mechanisms": ["PLAIN"]}.get)
    with pytest.raises(SecurityConfigError, match="sasl.enabled.mechanisms"):
        listener_security("SASL_PLAINTEXT", "SASL_PLAINTEXT",
                          {"sasl.enabled.mechanisms": ["GSSAPI"]}.get)
    with pytest.raises(SecurityConfigError, match="ssl.keystore.location"):
        listener_security("SSL", "SSL", {}.get)
    with pytest.raises(SecurityConfigError, match="sasl.jaas.config"):
        inter_broker_client("SASL_PLAINTEXT", "SASL_PLAINTEXT",
                            {"sasl.mechanism.inter.broker.protocol": "PLAIN"}.get)


def test_listener_prefixed_settings_win():
    props = {
        "sasl.enabled.mechanisms": ["SCRAM-SHA-256"],
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";',
        "connections.max.reauth.ms": 5,
        "listener.name.internal.connections.max.reauth.ms": "7",
    }
    sec = listener_security("INTERNAL", "SASL_PLAINTEXT", props.get)
    assert sec.mechanisms == ("PLAIN",) and sec.plain_users == {"a": "b"}
    assert sec.max_reauth_ms == 7
    client = inter_broker_client(
        "INTERNAL", "SASL_PLAINTEXT",
        {**props, "sasl.mechanism.inter.broker.protocol": "PLAIN",
         "listener.name.internal.plain.sasl.jaas.config":
             'org.apache.kafka.common.security.plain.PlainLoginModule required '
             'username="a" password="b" user_a="b";'}.get)
    assert (client.mechanism, client.username, client.password) == ("PLAIN", "a", "b")


def test_sasl_ssl_asks_for_certificates_only_with_the_listener_prefix(tmp_path):
    import ssl

    from weir.security.certs import CertificateAuthority

    ca = CertificateAuthority.create()
    ca.write(tmp_path / "ca.key", tmp_path / "ca.pem")
    ca.issue("b", hosts=("127.0.0.1",)).write_keystore(tmp_path / "b.pem")
    props = {"ssl.keystore.location": str(tmp_path / "b.pem"),
             "ssl.truststore.location": str(tmp_path / "ca.pem"),
             "ssl.client.auth": "required", "sasl.enabled.mechanisms": ["SCRAM-SHA-256"]}
    assert listener_security("SSL", "SSL", props.get).ssl_context.verify_mode \
        == ssl.CERT_REQUIRED
    assert listener_security("SASL_SSL", "SASL_SSL", props.get).ssl_context.verify_mode \
        == ssl.CERT_NONE
    props["listener.name.sasl_ssl.ssl.client.auth"] = "requested"
    assert listener_security("SASL_SSL", "SASL_SSL", props.get).ssl_context.verify_mode \
        == ssl.CERT_OPTIONAL


JAAS_FILE = """
// Kafka's static JAAS file, as kafka-server-start.sh reads it
KafkaServer {
   org.apache.kafka.common.security.plain.PlainLoginModule required
   username="admin"
   password="admin;sec//ret"
   user_admin="admin;sec//ret"
   user_alice="alice-secret";
   org.apache.kafka.common.security.scram.ScramLoginModule required
   username="broker" password="b";
};
/* the listener's own section wins */
sasl_ssl.KafkaServer {
   org.apache.kafka.common.security.plain.PlainLoginModule required user_x="y";
};
"""


def test_jaas_file_sections():
    from weir.security.jaas import parse_jaas_file

    sections = parse_jaas_file(JAAS_FILE)
    assert set(sections) == {"KafkaServer", "sasl_ssl.KafkaServer"}
    plain, scram = sections["KafkaServer"]
    assert plain.plain_users() == {"admin": "admin;sec//ret", "alice": "alice-secret"}
    assert (scram.username, scram.password) == ("broker", "b")
    for bad in ("KafkaServer { x };", "KafkaServer { Module required a=b; }", "junk"):
        with pytest.raises(ValueError):
            parse_jaas_file(bad)


def test_static_jaas_file_from_kafka_opts(tmp_path, monkeypatch):
    from weir.security.listeners import static_jaas_file

    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(JAAS_FILE)
    assert static_jaas_file({}) == {}
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx1G -Djava.security.auth.login.config={path}")
    props = {"sasl.enabled.mechanisms": ["PLAIN"], "sasl.mechanism.inter.broker.protocol":
             "SCRAM-SHA-512"}
    assert listener_security("SASL_PLAINTEXT", "SASL_PLAINTEXT", props.get).plain_users == {
        "admin": "admin;sec//ret", "alice": "alice-secret"}
    assert listener_security("SASL_SSL", "SASL_PLAINTEXT", props.get).plain_users == {
        "x": "y"}
    client = inter_broker_client("SASL_PLAINTEXT", "SASL_PLAINTEXT", props.get)
    assert (client.username, client.password) == ("broker", "b")
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={tmp_path}/none")
    with pytest.raises(SecurityConfigError, match="java.security.auth.login.config"):
        listener_security("SASL_PLAINTEXT", "SASL_PLAINTEXT", props.get)

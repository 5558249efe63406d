"""A two-broker cluster with every kind of listener, for the TLS and SASL tests.

Each broker listens on PLAINTEXT (first: ``cluster.bootstrap``), SSL with client
certificates required, SASL_PLAINTEXT and SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512);
the brokers replicate over SASL_SSL as user ``broker`` (SCRAM-SHA-512).  Certificates come
from a CA made for the module; SCRAM users are written to ZooKeeper before the brokers start.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import struct
from dataclasses import dataclass
from pathlib import Path

from weir.ops.cluster import LOOPBACK, LocalCluster, free_port
from weir.protocol import codec
from weir.security.certs import CertificateAuthority
from weir.security.credentials import ScramCredentialStore
from weir.security.jaas import client_jaas_config
from weir.security.scram import make_credential
from weir.server.handlers import REGISTRY

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
USERS = {"broker": "broker-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_USERS = {"alice": "alice-plain", "carl": "carl-plain"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass
class Material:
    dir: Path
    ca: Path
    client_key: Path
    client_cert: Path
    expired_key: Path
    expired_cert: Path
    untrusted_key: Path
    untrusted_cert: Path


def make_material(directory: Path) -> tuple[CertificateAuthority, Material]:
    ca = CertificateAuthority.create("Weir test CA")
    ca.write(directory / "ca.key", directory / "ca.pem")
    names = {}
    now = datetime.datetime.now(datetime.UTC)
    issued = {
        "client": ca.issue("alice", org="Acme", server=False),
        "expired": ca.issue("old", org="Acme", server=False, days=1,
                            not_before=now - datetime.timedelta(days=10)),
        "untrusted": CertificateAuthority.create("Other CA").issue("mallory", server=False),
    }
    for name, cert in issued.items():
        names[name] = (directory / f"{name}.key", directory / f"{name}.pem")
        cert.write(*names[name])
    return ca, Material(directory, directory / "ca.pem", *names["client"], *names["expired"],
                        *names["untrusted"])


class _Users:
    """LocalCluster's security hook: SCRAM users in ZooKeeper before the brokers start."""

    def broker_keys(self, broker_id: int, port: int) -> dict[str, str]:
        return {}

    def create_users(self, zk) -> None:
        store = ScramCredentialStore(zk)
        for user, password in USERS.items():
            store.alter(user, {m: make_credential(m, password)
                               for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}, set())

    def write_client_properties(self, bootstrap: str) -> str:
        return ""


def broker_settings(ca: CertificateAuthority, directory: Path, broker_id: int,
                    extra: dict[str, str] | None = None) -> tuple[dict[str, str], dict]:
    ports = {name: free_port() for name in LISTENERS}
    keystore = directory / f"broker-{broker_id}.keystore.pem"
    ca.issue(f"broker-{broker_id}", hosts=(LOOPBACK, "localhost")).write_keystore(keystore)
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
             + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";")
    settings = {
        "listeners": ",".join(f"{n}://{LOOPBACK}:{p}" for n, p in ports.items()),
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            client_jaas_config("SCRAM-SHA-512", "broker", USERS["broker"]),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(directory / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        "connection.failed.authentication.delay.ms": "200",
        "listener.name.sasl_plaintext.connections.max.reauth.ms": "4000",
        **(extra or {}),
    }
    return settings, ports


def start_cluster(directory: Path, brokers: int = 2):
    """(cluster, material, ports per broker id); the caller stops the cluster."""
    certs = directory / "certs"
    certs.mkdir()
    ca, material = make_material(certs)
    overrides, ports = {}, {}
    for broker_id in range(1, brokers + 1):
        overrides[broker_id], ports[broker_id] = broker_settings(ca, certs, broker_id)
    cluster = LocalCluster(directory / "cluster", brokers=brokers, port_base=0,
                           broker_overrides=overrides,
                           overrides={"offsets.topic.replication.factor": str(brokers)})
    cluster.secure = _Users()
    return cluster, material, ports


def client_tls(material: Material, cert: bool = True) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(material.ca))
    if cert:
        ctx.load_cert_chain(str(material.client_cert), str(material.client_key))
    return ctx


class RawConnection:
    """A blocking Kafka-protocol connection for requests no client library sends."""

    def __init__(self, port: int, context: ssl.SSLContext | None = None,
                 timeout_s: float = 15) -> None:
        sock = socket.create_connection((LOOPBACK, port), timeout=timeout_s)
        self.sock = context.wrap_socket(sock, server_hostname=LOOPBACK) if context else sock
        self._correlation = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self, api_key: int, version: int, **fields) -> bytes:
        request_cls, _ = REGISTRY[api_key].schemas(version)
        self._correlation += 1
        body = codec.encode_body(codec.build(request_cls, **fields))
        header = codec.encode_request_header(api_key, version, self._correlation, "test",
                                             bool(request_cls.__flexible__))
        return struct.pack(">i", len(header) + len(body)) + header + body

    def request(self, api_key: int, version: int, **fields):
        self.sock.sendall(self.frame(api_key, version, **fields))
        return self.read_response(api_key, version)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def read_response(self, api_key: int, version: int):
        _, response_cls = REGISTRY[api_key].schemas(version)
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        start = codec.skip_tagged_fields(frame, 4) if codec.response_header_flexible(
            api_key, response_cls) else 4
        return codec.decode_body(response_cls, frame, start)

    def closed_by_peer(self) -> bool:
        """True once the broker has closed the connection (waits up to the timeout)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, ssl.SSLError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()

"""``weir up --secure``: one command to a secured local cluster.

- A local CA and one certificate per broker (``DIR/security/``, keys mode 0600), valid for
  127.0.0.1 and localhost.
- Every broker listens on one SASL_SSL listener, used by clients and between brokers
  (``security.inter.broker.protocol=SASL_SSL``), SCRAM-SHA-256 and SCRAM-SHA-512 enabled,
  the brokers authenticating to each other as ``broker`` with SCRAM-SHA-512.
- SCRAM users ``admin`` and ``broker`` with random passwords, written to ZooKeeper before
  the brokers start (as ``kafka-configs.sh --zookeeper`` does in Kafka's ZooKeeper mode).
- ACLs on: ``authorizer.class.name=kafka.security.authorizer.AclAuthorizer`` with
  ``super.users=User:admin;User:broker``.
- ``DIR/client.properties``: the admin's client settings in Kafka's client format.

The settings are written only into new ``server.properties`` files: a restart keeps them,
the CA, the certificates and the passwords.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from weir.config import format_property
from weir.security.certs import CertificateAuthority
from weir.security.credentials import ScramCredentialStore
from weir.security.jaas import client_jaas_config
from weir.security.scram import make_credential

ADMIN_USER = "admin"
BROKER_USER = "broker"
MECHANISM = "SCRAM-SHA-512"
LISTENER = "SASL_SSL"
HOSTS = ("127.0.0.1", "localhost")
# Keys of client.properties that librdkafka (confluent-kafka, kcat) does not know: drop them
# when passing the file to it; Java clients read them.
JAVA_ONLY_KEYS = ("sasl.jaas.config", "ssl.truststore.type", "ssl.truststore.location")


class SecureCluster:
    """The security material of one ``weir up --secure`` data directory."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.dir = self.data_dir / "security"

    @property
    def ca_path(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def client_properties_path(self) -> Path:
        return self.data_dir / "client.properties"

    def _ca(self) -> CertificateAuthority:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = self.dir / "ca.key"
        if key.exists() and self.ca_path.exists():
            return CertificateAuthority.load(key, self.ca_path)
        ca = CertificateAuthority.create()
        ca.write(key, self.ca_path)
        return ca

    def passwords(self) -> dict[str, str]:
        """The users' passwords (created once, kept in ``security/users.json``, 0600)."""
        path = self.dir / "users.json"
        if path.exists():
            return json.loads(path.read_text())
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        users = {ADMIN_USER: secrets.token_urlsafe(18), BROKER_USER: secrets.token_urlsafe(18)}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(users, f)
        return users

    def broker_keys(self, broker_id: int, port: int) -> dict[str, str]:
        """The settings of a new broker's ``server.properties`` (its certificate issued now)."""
        keystore = self.dir / f"broker-{broker_id}.keystore.pem"
        if not keystore.exists():
            self._ca().issue(f"broker-{broker_id}", hosts=HOSTS).write_keystore(keystore)
        broker_password = self.passwords()[BROKER_USER]
        prefix = f"listener.name.{LISTENER.lower()}"
        return {
            "listeners": f"{LISTENER}://{HOSTS[0]}:{port}",
            "security.inter.broker.protocol": LISTENER,
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"{prefix}.{MECHANISM.lower()}.sasl.jaas.config":
                client_jaas_config(MECHANISM, BROKER_USER, broker_password),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_path),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{ADMIN_USER};User:{BROKER_USER}",
        }

    def create_users(self, zk: Any) -> None:
        """The SCRAM credentials of ``admin`` and ``broker`` in ZooKeeper (kept if there)."""
        store = ScramCredentialStore(zk)
        for user, password in self.passwords().items():
            if store.credential(user, MECHANISM) is None:
                store.alter(user, {m: make_credential(m, password)
                                   for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}, set())

    def client_settings(self, bootstrap: str) -> dict[str, str]:
        password = self.passwords()[ADMIN_USER]
        return {
            "bootstrap.servers": bootstrap,
            "security.protocol": LISTENER,
            "sasl.mechanism": MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": password,
            "ssl.ca.location": str(self.ca_path),
            "sasl.jaas.config": client_jaas_config(MECHANISM, ADMIN_USER, password),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_path),
        }

    def write_client_properties(self, bootstrap: str) -> str:
        """Write ``DIR/client.properties`` (0600: it holds the admin password); its text."""
        text = ("# Client settings for this weir up --secure cluster (user admin, a super "
                "user).\n# librdkafka (confluent-kafka, kcat) does not know "
                + ", ".join(JAVA_ONLY_KEYS) + ": drop them for it.\n"
                + "".join(format_property(k, v) + "\n"
                          for k, v in self.client_settings(bootstrap).items()))
        fd = os.open(self.client_properties_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return text


def librdkafka_settings(path: str | os.PathLike[str]) -> dict[str, str]:
    """A ``client.properties`` as confluent-kafka configuration (Java-only keys dropped)."""
    from weir.config import read_properties

    return {k: v for k, v in read_properties(path).items() if k not in JAVA_ONLY_KEYS}

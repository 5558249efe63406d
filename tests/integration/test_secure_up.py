"""``weir up --secure`` as a user runs it: one command to a cluster with SASL_SSL, SCRAM
users and ACLs; client.properties works as written; ``weir user`` manages SCRAM users."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from tests.conftest import wait_for
from tests.integration.clients import consume_assigned, produce
from weir.config import read_properties
from weir.ops.secure import librdkafka_settings

pytestmark = pytest.mark.integration

WEIR = [sys.executable, "-m", "weir"]


def run(*args: str, stdin: str | None = None, timeout: float = 120
        ) -> subprocess.CompletedProcess:
    return subprocess.run([*WEIR, *args], capture_output=True, text=True, timeout=timeout,
                          input=stdin, check=False)


@pytest.fixture(scope="module")
def secure_dir(tmp_path_factory):
    data = tmp_path_factory.mktemp("secure") / "data"
    up = run("up", "--secure", "--brokers", "2", "--port-base", "0", "--detach",
             "--data-dir", str(data))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield data, up.stdout
    finally:
        run("down", "--data-dir", str(data))


def test_client_properties_reach_a_secured_cluster(secure_dir):
    data, stdout = secure_dir
    props = read_properties(data / "client.properties")
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512" and props["sasl.username"] == "admin"
    assert props["sasl.password"] not in stdout  # only in the file, whose path is printed
    assert f"(user admin; the password is in the file, mode 0600): {data / 'client.properties'}" \
        in stdout
    assert "ScramLoginModule required" in props["sasl.jaas.config"]
    assert (data / "client.properties").stat().st_mode & 0o077 == 0
    doc = json.loads((data / "cluster.json").read_text())
    assert doc["bootstrap"] == props["bootstrap.servers"]
    for broker in doc["brokers"]:
        config = read_properties(broker["config"])
        assert Path(broker["config"]).parent.stat().st_mode & 0o077 == 0  # holds a password
        assert config["listeners"] == f"SASL_SSL://127.0.0.1:{broker['port']}"
        assert config["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
        assert "User:admin" in config["super.users"]

    topic = f"s-{uuid.uuid4().hex[:8]}"
    def created() -> bool:  # retried while a just-started broker knows too few brokers
        result = run("topic", "create", topic, "--partitions", "1", "--replication-factor",
                     "2", "--config", "min.insync.replicas=2", "--data-dir", str(data))
        assert result.returncode == 0 or "INVALID_REPLICATION_FACTOR" in result.stderr, \
            result.stderr
        return result.returncode == 0

    wait_for(created, 60, interval_s=0.5, what="topic created")
    conf = librdkafka_settings(data / "client.properties")
    bootstrap = conf.pop("bootstrap.servers")
    produce(bootstrap, topic, [b"secret-1", b"secret-2"], acks="all", **conf)
    got = consume_assigned(bootstrap, topic, [0], 2, **conf)
    assert [m.value() for m in got] == [b"secret-1", b"secret-2"]

    # Without the credentials nothing gets through.
    with pytest.raises((KafkaException, AssertionError)):
        produce(bootstrap, topic, [b"x"], timeout_s=5, **{**conf, "sasl.password": "wrong"})
    with pytest.raises((KafkaException, AssertionError)):
        produce(bootstrap, topic, [b"x"], timeout_s=5, **{**conf, "security.protocol": "SSL"})


def test_weir_user_and_acls_on(secure_dir):
    data, _ = secure_dir
    added = run("user", "add", "eve", "--password-stdin", "--data-dir", str(data),
                stdin="eve-password\n")
    assert added.returncode == 0, added.stderr
    listed = run("user", "list", "--json", "--data-dir", str(data))
    assert listed.returncode == 0, listed.stderr
    users = {u["user"]: u["credentials"] for u in json.loads(listed.stdout)}
    assert {"admin", "broker", "eve"} <= set(users)
    assert {c["mechanism"] for c in users["eve"]} == {"SCRAM-SHA-256", "SCRAM-SHA-512"}

    # eve authenticates, but with ACLs on and no ACL for her, she may not write.
    conf = librdkafka_settings(data / "client.properties")
    bootstrap = conf.pop("bootstrap.servers")
    eve = {**conf, "sasl.username": "eve", "sasl.password": "eve-password"}
    with pytest.raises((KafkaException, AssertionError), match="AUTHORIZATION|not delivered"):
        produce(bootstrap, f"eve-{uuid.uuid4().hex[:6]}", [b"x"], timeout_s=10, **eve)

    removed = run("user", "remove", "eve", "--data-dir", str(data))
    assert removed.returncode == 0, removed.stderr
    missing = run("user", "list", "eve", "--data-dir", str(data))
    assert missing.returncode == 1 and "RESOURCE_NOT_FOUND" in missing.stderr


def test_a_wrong_password_or_no_client_settings_is_said_so(secure_dir, tmp_path):
    """librdkafka knows within milliseconds that SASL failed, but tells no request: the
    command asks once, polls the failure, and names it (it said "Broker transport failure"
    after --timeout, and `group list` printed an empty table with exit code 0)."""
    import time

    data, _ = secure_dir
    bootstrap = json.loads((data / "cluster.json").read_text())["bootstrap"]
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("".join(
        "sasl.password=not-the-password\n" if line.startswith("sasl.password=") else line
        for line in (data / "client.properties").read_text().splitlines(keepends=True)))
    for args in (["topic", "list"], ["group", "list"], ["topic", "create", "never"],
                 ["produce", "--topic", "never"], ["consume", "--topic", "never"]):
        began = time.monotonic()
        done = run(*args, "--bootstrap-server", bootstrap, "--command-config", str(wrong),
                   "--timeout", "20", stdin="a\n")
        assert time.monotonic() - began < 15, args
        assert done.returncode == 1 and done.stdout == "", (args, done.stdout)
        assert done.stderr.startswith("weir: SASL_AUTHENTICATION_FAILED: "), done.stderr
        assert "invalid credentials" in done.stderr and done.stderr.count("\n") == 1
    done = run("topic", "list", "--bootstrap-server", bootstrap, "--timeout", "2")
    assert done.returncode == 1
    assert done.stderr.startswith("weir: cannot reach the cluster: NETWORK_EXCEPTION: ")
    assert "a TLS or SASL listener needs --command-config" in done.stderr

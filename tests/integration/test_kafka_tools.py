"""kafka-topics.sh, kafka-configs.sh, kafka-acls.sh and kafka-consumer-groups.sh (the console
scripts of weir/cli/kafka_tools/) against a real broker with Kafka's ACL authorizer on
(everyone allowed where no ACL names a resource): Kafka 3.x's flags, its output lines, exit
codes, and one error line."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.clients import create_topic, produce
from tests.integration.conftest import serve_cluster

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
TOPIC_LINE = re.compile(r"Topic: (\S+)\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: (\d+)"
                        r"\tReplicationFactor: (\d+)\tConfigs: (\S*)")
PARTITION_LINE = re.compile(r"\tTopic: (\S+)\tPartition: (\d+)\tLeader: (\d+|none)"
                            r"\tReplicas: ([\d,]*)\tIsr: ([\d,]*)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from serve_cluster(tmp_path_factory, 1, {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})


def tool(cluster, name: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    script = BIN / name
    if not script.exists():
        pytest.fail(f"{script} is missing: reinstall (pip install -e .) for the console scripts")
    return subprocess.run([str(script), "--bootstrap-server", cluster.bootstrap, *args],
                          input=stdin, capture_output=True, text=True, timeout=60,
                          check=False)


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done


def failed(done: subprocess.CompletedProcess, prefix: str, name: str) -> str:
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(prefix) and name in lines[0], lines[0]
    return lines[0]


def test_kafka_topics(cluster) -> None:
    out = ok(tool(cluster, "kafka-topics.sh", "--create", "--topic", "kt.orders",
                  "--partitions", "2", "--replication-factor", "1",
                  "--config", "retention.ms=86400000")).stdout.splitlines()
    assert out[0].startswith("WARNING: Due to limitations in metric names")
    assert out[1] == "Created topic kt.orders."
    assert "kt.orders" in ok(tool(cluster, "kafka-topics.sh", "--list")).stdout.splitlines()
    lines = ok(tool(cluster, "kafka-topics.sh", "--describe", "--topic", "kt.orders")
               ).stdout.splitlines()
    assert TOPIC_LINE.fullmatch(lines[0]).groups() == ("kt.orders", "2", "1",
                                                       "retention.ms=86400000")
    assert [PARTITION_LINE.fullmatch(line).groups() for line in lines[1:]] == [
        ("kt.orders", "0", "1", "1", "1"), ("kt.orders", "1", "1", "1", "1")]
    assert ok(tool(cluster, "kafka-topics.sh", "--alter", "--topic", "kt.orders",
                   "--partitions", "3")).stdout == ""
    lines = ok(tool(cluster, "kafka-topics.sh", "--describe", "--topic", "kt.orders")
               ).stdout.splitlines()
    assert TOPIC_LINE.fullmatch(lines[0]).group(2) == "3" and len(lines) == 4
    assert ok(tool(cluster, "kafka-topics.sh", "--describe",
                   "--under-replicated-partitions")).stdout == ""
    failed(tool(cluster, "kafka-topics.sh", "--create", "--topic", "kt.orders"),
           "Error while executing topic command : ", "TOPIC_ALREADY_EXISTS")
    ok(tool(cluster, "kafka-topics.sh", "--create", "--topic", "kt.orders",
            "--if-not-exists"))
    assert ok(tool(cluster, "kafka-topics.sh", "--delete", "--topic", "kt.orders")
              ).stdout == ""
    failed(tool(cluster, "kafka-topics.sh", "--describe", "--topic", "kt.orders"),
           "Error while executing topic command : ",
           "Topic 'kt.orders' does not exist as expected")
    ok(tool(cluster, "kafka-topics.sh", "--delete", "--topic", "kt.orders", "--if-exists"))
    failed(tool(cluster, "kafka-topics.sh", "--list", "--delete"), "kafka-topics.sh: ",
           "Command must include exactly one action")


def test_kafka_configs(cluster) -> None:
    create_topic(cluster.bootstrap, "kc")
    assert ok(tool(cluster, "kafka-configs.sh", "--alter", "--entity-type", "topics",
                   "--entity-name", "kc", "--add-config",
                   "retention.ms=1000,cleanup.policy=[compact,delete]")).stdout == \
        "Completed updating config for topic kc.\n"
    lines = ok(tool(cluster, "kafka-configs.sh", "--describe", "--topic", "kc")
               ).stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic kc are:"
    assert lines[1].startswith("  cleanup.policy=compact,delete sensitive=false synonyms="
                               "{DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, ")
    assert lines[2].startswith("  retention.ms=1000 sensitive=false synonyms="
                               "{DYNAMIC_TOPIC_CONFIG:retention.ms=1000")
    ok(tool(cluster, "kafka-configs.sh", "--alter", "--topic", "kc", "--delete-config",
            "retention.ms,cleanup.policy"))
    assert ok(tool(cluster, "kafka-configs.sh", "--describe", "--topic", "kc")
              ).stdout == "Dynamic configs for topic kc are:\n"
    assert ok(tool(cluster, "kafka-configs.sh", "--alter", "--entity-type", "brokers",
                   "--entity-default", "--add-config", "log.cleaner.threads=2")).stdout == \
        "Completed updating default config for brokers in the cluster.\n"
    assert ok(tool(cluster, "kafka-configs.sh", "--describe", "--broker-defaults")
              ).stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        ("  log.cleaner.threads=2 sensitive=false synonyms="
        "{DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}")]
    started = time.monotonic()
    failed(tool(cluster, "kafka-configs.sh", "--alter", "--broker", "99", "--add-config",
                "log.cleaner.threads=2"),
           "Error while executing config command : ", "BROKER_NOT_AVAILABLE")
    assert time.monotonic() - started < 10


def test_kafka_acls(cluster) -> None:
    topic = "ResourcePattern(resourceType=TOPIC, name=ka, patternType=LITERAL)"
    out = ok(tool(cluster, "kafka-acls.sh", "--add", "--allow-principal", "User:alice",
                  "--operation", "Read", "--topic", "ka")).stdout
    assert out.startswith(f"Adding ACLs for resource `{topic}`: \n \t(principal=User:alice, "
                          "host=*, operation=READ, permissionType=ALLOW)\n")
    ok(tool(cluster, "kafka-acls.sh", "--add", "--consumer", "--topic", "ka", "--group",
            "kg", "--allow-principal", "User:bob"))
    out = ok(tool(cluster, "kafka-acls.sh", "--list", "--topic", "ka")).stdout
    assert out == (f"Current ACLs for resource `{topic}`:\n"
                   "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
                   "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
                   "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)\n\n")
    ok(tool(cluster, "kafka-acls.sh", "--remove", "--topic", "ka", "--group", "kg", "--force"))
    assert ok(tool(cluster, "kafka-acls.sh", "--list", "--topic", "ka")).stdout == ""
    failed(tool(cluster, "kafka-acls.sh", "--add", "--topic", "ka", "--operation", "Read"),
           "Error while executing ACL command: ", "--allow-principal")


def test_kafka_consumer_groups(cluster) -> None:
    create_topic(cluster.bootstrap, "kg-t")
    produce(cluster.bootstrap, "kg-t", [b"a", b"b", b"c"])
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kgroup",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("kg-t", 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    assert "kgroup" in ok(tool(cluster, "kafka-consumer-groups.sh", "--list")
                          ).stdout.splitlines()
    lines = ok(tool(cluster, "kafka-consumer-groups.sh", "--list", "--state", "Empty")
               ).stdout.splitlines()
    assert lines[0].split() == ["GROUP", "STATE"] and ["kgroup", "Empty"] in [
        line.split() for line in lines[1:]]
    done = ok(tool(cluster, "kafka-consumer-groups.sh", "--describe", "--group", "kgroup"))
    assert "Consumer group 'kgroup' has no active members." in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "" and lines[1].split() == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
        "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert lines[2].split() == ["kgroup", "kg-t", "0", "1", "3", "2", "-", "-", "-"]
    assert lines[1].index("TOPIC") == lines[2].index("kg-t") == 16  # Kafka's %-15s columns
    lines = ok(tool(cluster, "kafka-consumer-groups.sh", "--describe", "--group", "kgroup",
                    "--state")).stdout.splitlines()
    assert lines[1].split()[:3] == ["GROUP", "COORDINATOR", "(ID)"]
    host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
    assert lines[2].split() == ["kgroup", f"{host}:{port}", "(1)", "Empty", "0"]
    out = ok(tool(cluster, "kafka-consumer-groups.sh", "--reset-offsets", "--group", "kgroup",
                  "--topic", "kg-t", "--to-earliest", "--execute")).stdout
    assert re.search(r"kgroup\s+kg-t\s+0\s+0", out), out
    assert ok(tool(cluster, "kafka-consumer-groups.sh", "--delete", "--group", "kgroup")
              ).stdout == "Deletion of requested consumer groups ('kgroup') was successful.\n"
    failed(tool(cluster, "kafka-consumer-groups.sh", "--describe", "--group", "kgroup"),
           "Error: ", "GROUP_ID_NOT_FOUND")


def test_kafka_configs_scram_users(cluster) -> None:
    """KIP-554: ConfigCommand's --entity-type users with SCRAM credentials over
    --bootstrap-server (the form kafkajs' createScramCredentials.sh uses)."""
    from confluent_kafka.admin import AdminClient

    assert ok(tool(cluster, "kafka-configs.sh", "--alter", "--entity-type", "users",
                   "--entity-name", "kcu", "--add-config",
                   "SCRAM-SHA-256=[iterations=8192,password=pw=256],"
                   "SCRAM-SHA-512=[password=pw=512]")).stdout == \
        "Completed updating config for user kcu.\n"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_user_scram_credentials(["kcu"])["kcu"].result(timeout=30)
    assert sorted((str(i.mechanism.name), i.iterations)
                  for i in described.scram_credential_infos) == [
        ("SCRAM_SHA_256", 8192), ("SCRAM_SHA_512", 4096)]
    assert ok(tool(cluster, "kafka-configs.sh", "--describe", "--user", "kcu")).stdout == (
        "SCRAM credential configs for user-principal 'kcu' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    assert ok(tool(cluster, "kafka-configs.sh", "--alter", "--user", "kcu",
                   "--delete-config", "SCRAM-SHA-512")).stdout == \
        "Completed updating config for user kcu.\n"
    assert ok(tool(cluster, "kafka-configs.sh", "--describe", "--entity-type", "users")
              ).stdout == ("SCRAM credential configs for user-principal 'kcu' are "
                           "SCRAM-SHA-256=iterations=8192\n")
    failed(tool(cluster, "kafka-configs.sh", "--alter", "--user", "kcu", "--add-config",
                "SCRAM-SHA-256=[iterations=100,password=x]"),
           "Error while executing config command : ", "Iterations 100 is less than the "
           "minimum 4096 required for SCRAM-SHA-256")
    failed(tool(cluster, "kafka-configs.sh", "--alter", "--user", "kcu", "--add-config",
                "retention.ms=1"),
           "Error while executing config command : ", "Unexpected config names: retention.ms")

"""ACLs on three brokers: an ACL created through one broker governs the others without a
restart (ZooKeeper change notifications), and the ACL APIs through real clients
(confluent-kafka's and kafka-python's admin clients) and ``weir acl``."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from tests.integration.acl_cluster import (
    cluster_acl,
    eventually,
    start_secure_cluster,
)
from tests.integration.clients import raw_request
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation as Op
from weir.security.acls import ResourceType as RT

pytestmark = pytest.mark.integration

TOPIC_AUTH = int(ErrorCode.topic_authorization_failed)
UNKNOWN_TOPIC = int(ErrorCode.unknown_topic_or_partition)  # authorized, does not exist


@pytest.fixture(scope="module")
def secure3(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("weir-acl3")
    # The brokers (ClusterAction) and this module's clients (Alter: ACL management) are all
    # User:ANONYMOUS on PLAINTEXT.
    cluster, admin = start_secure_cluster(
        data_dir, 3, [cluster_acl(Op.CLUSTER_ACTION), cluster_acl(Op.ALTER)],
        **{"auto.create.topics.enable": "false"})
    try:
        yield cluster
    finally:
        admin.close()
        cluster.stop()


def _metadata(slot, name: str) -> int:
    r = raw_request(slot.host, slot.port, 3, 9, topics=[{"name": name}],
                    allow_auto_topic_creation=False)
    return int(r.topics[0].error_code)


def _create_acl(slot, topic: str) -> int:
    r = raw_request(slot.host, slot.port, 30, 3, creations=[
        {"resource_type": int(RT.TOPIC), "resource_name": topic, "resource_pattern_type": 3,
         "principal": "User:ANONYMOUS", "host": "*", "operation": int(Op.DESCRIBE),
         "permission_type": 3}])
    return int(r.results[0].error_code)


def _delete_acl(slot, topic: str) -> list[str]:
    r = raw_request(slot.host, slot.port, 31, 3, filters=[
        {"resource_type_filter": int(RT.TOPIC), "resource_name_filter": topic,
         "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
         "operation": 1, "permission_type": 1}])
    assert int(r.filter_results[0].error_code) == 0
    return [m.resource_name for m in r.filter_results[0].matching_acls]


def test_acl_changes_reach_every_broker_without_a_restart(secure3):
    first, second, third = secure3.brokers
    topic = f"spread-{uuid.uuid4().hex[:6]}"
    for slot in (first, second, third):
        assert _metadata(slot, topic) == TOPIC_AUTH
    assert _create_acl(first, topic) == 0
    # The broker that took the request decides at once, the others once notified.
    assert _metadata(first, topic) == UNKNOWN_TOPIC
    for slot in (second, third):
        eventually(lambda s=slot: _metadata(s, topic), UNKNOWN_TOPIC)
    assert _delete_acl(second, topic) == [topic]
    assert _metadata(second, topic) == TOPIC_AUTH
    for slot in (first, third):
        eventually(lambda s=slot: _metadata(s, topic), TOPIC_AUTH)


def test_confluent_admin_client_acl_round_trip(secure3):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": secure3.bootstrap})
    group = f"ck-{uuid.uuid4().hex[:6]}"
    acls = [AclBinding(ResourceType.GROUP, group, ResourcePatternType.PREFIXED, "User:alice",
                       "*", AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, group, ResourcePatternType.PREFIXED, "User:bob",
                       "10.0.0.1", AclOperation.READ, AclPermissionType.DENY)]
    for future in admin.create_acls(acls, request_timeout=20).values():
        assert future.result(timeout=30) is None
    flt = AclBindingFilter(ResourceType.GROUP, group, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    found = admin.describe_acls(flt, request_timeout=20).result(timeout=30)
    assert sorted(found) == sorted(acls)
    # MATCH: the ACLs that apply to a group named under the prefix.
    match = AclBindingFilter(ResourceType.GROUP, group + "-x", ResourcePatternType.MATCH,
                             "User:alice", None, AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(match, request_timeout=20).result(timeout=30) == [acls[0]]
    deleted = admin.delete_acls([flt], request_timeout=20)[flt].result(timeout=30)
    assert sorted(deleted) == sorted(acls)
    assert admin.describe_acls(flt, request_timeout=20).result(timeout=30) == []
    # An invalid ACL is refused with Kafka's error, not stored.
    bad = AclBinding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL,
                     "User:alice", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(Exception, match="INVALID_REQUEST|kafka-cluster"):
        admin.create_acls([bad], request_timeout=20)[bad].result(timeout=30)


def test_kafka_python_admin_acl_round_trip(secure3):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    topic = f"kp-{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=secure3.bootstrap, request_timeout_ms=20000)
    try:
        acl = ACL("User:carol", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                  ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL))
        result = admin.create_acls([acl])
        assert result["failed"] == [] and len(result["succeeded"]) == 1
        flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(ResourceType.TOPIC, topic,
                                              ACLResourcePatternType.ANY))
        acls, error = admin.describe_acls(flt)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name)
                for a in acls] == [("User:carol", ACLOperation.WRITE, topic)]
        [(_, deleted, error)] = admin.delete_acls([flt])
        assert error.errno == 0 and len(deleted) == 1
        acls, _ = admin.describe_acls(flt)
        assert acls == []
    finally:
        admin.close()


def _weir(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "weir", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def test_weir_acl_cli(secure3):
    bootstrap = ["--bootstrap-server", secure3.bootstrap]
    topic = f"cli-{uuid.uuid4().hex[:6]}"
    added = _weir("acl", "add", *bootstrap, "--json", "--topic", topic,
                  "--resource-pattern-type", "prefixed", "--allow-principal", "User:dave",
                  "--allow-principal", "User:erin", "--operation", "Read",
                  "--operation", "Describe", "--deny-principal", "User:mallory",
                  "--deny-host", "10.9.9.9")
    assert added.returncode == 0, added.stderr
    # 2 allowed principals x 2 operations + 1 denied principal x 2 operations.
    assert len(json.loads(added.stdout)["added"]) == 6
    listed = _weir("acl", "list", *bootstrap, "--topic", topic, "--principal", "User:mallory")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST",
                                "OPERATION", "PERMISSION"]
    assert sorted(line.split()[5:] for line in lines[1:]) == [["Describe", "Deny"],
                                                              ["Read", "Deny"]]
    assert all("10.9.9.9" in line for line in lines[1:])
    removed = _weir("acl", "remove", *bootstrap, "--json", "--topic", topic,
                    "--resource-pattern-type", "prefixed", "--allow-principal", "User:dave")
    assert removed.returncode == 0, removed.stderr
    assert {r["principal"] for r in json.loads(removed.stdout)["removed"]} == {"User:dave"}
    left = json.loads(_weir("acl", "list", *bootstrap, "--json", "--topic", topic).stdout)
    assert {r["principal"] for r in left["acls"]} == {"User:erin", "User:mallory"}
    everything = _weir("acl", "remove", *bootstrap, "--json", "--topic", topic,
                       "--resource-pattern-type", "any")
    assert len(json.loads(everything.stdout)["removed"]) == 4
    # kafka-acls.sh's shorthands.
    producer = _weir("acl", "add", *bootstrap, "--json", "--producer", "--topic", topic,
                     "--allow-principal", "User:app")
    assert producer.returncode == 0, producer.stderr
    assert sorted(r["operation"] for r in json.loads(producer.stdout)["added"]) == [
        "Create", "Describe", "Write"]
    gone = _weir("acl", "remove", *bootstrap, "--json", "--producer", "--topic", topic,
                 "--allow-principal", "User:app")
    assert len(json.loads(gone.stdout)["removed"]) == 3
    # Bad input: a clear message and exit code 1, nothing sent.
    bad = _weir("acl", "add", *bootstrap, "--group", "g", "--allow-principal", "User:x",
                "--operation", "Write")
    assert bad.returncode == 1 and "does not apply to Group" in bad.stderr
    bad = _weir("acl", "add", *bootstrap, "--topic", "t", "--allow-principal", "x",
                "--operation", "Read")
    assert bad.returncode == 1 and "Type:name" in bad.stderr

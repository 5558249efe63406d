"""ACL matrix on a real broker with Kafka's AclAuthorizer on: for each API a principal
without the ACL is refused with Kafka's error, and served once the ACL exists; deny beats
allow; prefixed ACLs match; unauthorized topics are not revealed.

Every client here is ``User:ANONYMOUS`` (PLAINTEXT), told from the brokers by its address
(an ACL's host); its ACLs are written to ZooKeeper with
change notifications, so every step also checks that a broker applies a change it did not
make itself, without a restart.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka import Producer

from tests.integration.acl_cluster import (
    binding,
    cluster_acl,
    eventually,
    start_secure_cluster,
)
from tests.integration.clients import raw_request
from weir.protocol.errors import ErrorCode
from weir.security.acls import AclOperation as Op
from weir.security.acls import PatternType, PermissionType
from weir.security.acls import ResourceType as RT

pytestmark = pytest.mark.integration

TOPIC = "matrix-topic"  # exists; one partition
GROUP = "matrix-group"
S = timedelta(seconds=10)
TOPIC_AUTH = int(ErrorCode.topic_authorization_failed)
GROUP_AUTH = int(ErrorCode.group_authorization_failed)
CLUSTER_AUTH = int(ErrorCode.cluster_authorization_failed)
NONE = 0
# The brokers connect from 127.0.0.1 and hold CLUSTER_ACTION from there only; the requests
# of this module come from another loopback address, a client host without it.
CLIENT_HOST = "127.0.0.2"
BROKERS_CLUSTER_ACTION = binding(RT.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION,
                                 host="127.0.0.1")


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("weir-acl")
    cluster, admin = start_secure_cluster(data_dir, 1, [BROKERS_CLUSTER_ACTION],
                                          **{"auto.create.topics.enable": "false"})
    try:
        slot = cluster.brokers[0]
        # The fixture's own topic: CREATE on the cluster while it is made, then taken away.
        admin.grant(cluster_acl(Op.CREATE))
        eventually(lambda: _create_topics(slot, TOPIC), NONE)
        admin.revoke(cluster_acl(Op.CREATE))
        eventually(lambda: _create_topics(slot, "matrix-probe"), TOPIC_AUTH)
        # The group coordinator's topic, created by the first FindCoordinator.
        admin.grant(binding(RT.GROUP, GROUP, Op.DESCRIBE))
        eventually(lambda: _find_coordinator(slot, GROUP), NONE, timeout_s=60)
        admin.revoke(binding(RT.GROUP, GROUP, Op.DESCRIBE))
        eventually(lambda: _find_coordinator(slot, GROUP), GROUP_AUTH)
        yield cluster, admin
    finally:
        admin.close()
        cluster.stop()


def _req(slot, api_key: int, version: int, **fields) -> Any:
    return raw_request(slot.host, slot.port, api_key, version, source_host=CLIENT_HOST,
                       **fields)


def _create_topics(slot, name: str, validate_only: bool = False) -> int:
    r = _req(slot, 19, 5, timeout=S, validate_only=validate_only, topics=[
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []}])
    return int(r.topics[0].error_code)


def _metadata(slot, name: str) -> int:
    r = _req(slot, 3, 9, topics=[{"name": name}], allow_auto_topic_creation=False)
    return int(r.topics[0].error_code)


def _fetch(slot, name: str) -> int:
    r = _req(slot, 1, 12, replica_id=-1, max_wait=timedelta(0), min_bytes=1,
             max_bytes=1 << 20, session_id=0, session_epoch=-1, topics=[
                 {"topic": name, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                 "partition_max_bytes": 1 << 20}]}],
             forgotten_topics_data=[], rack_id="")
    return int(r.responses[0].partitions[0].error_code)


def _list_offsets(slot, name: str) -> int:
    r = _req(slot, 2, 7, replica_id=-1, topics=[
        {"name": name, "partitions": [{"partition_index": 0, "timestamp": -1}]}])
    return int(r.topics[0].partitions[0].error_code)


def _offset_for_leader_epoch(slot, name: str) -> int:
    r = _req(slot, 23, 4, replica_id=-1, topics=[
        {"topic": name, "partitions": [{"partition": 0, "leader_epoch": 0,
                                        "current_leader_epoch": -1}]}])
    return int(r.topics[0].partitions[0].error_code)


def _describe_topic_configs(slot, name: str) -> int:
    r = _req(slot, 32, 4, resources=[{"resource_type": 2, "resource_name": name,
                                      "configuration_keys": None}])
    return int(r.results[0].error_code)


def _describe_broker_configs(slot, _name: str) -> int:
    r = _req(slot, 32, 4, resources=[{"resource_type": 4, "resource_name": "",
                                      "configuration_keys": None}])
    return int(r.results[0].error_code)


def _alter_topic_configs(slot, name: str) -> int:
    r = _req(slot, 44, 1, validate_only=True, resources=[
        {"resource_type": 2, "resource_name": name, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "86400000"}]}])
    return int(r.responses[0].error_code)


def _legacy_alter_topic_configs(slot, name: str) -> int:
    r = _req(slot, 33, 2, validate_only=True, resources=[
        {"resource_type": 2, "resource_name": name, "configs": []}])
    return int(r.responses[0].error_code)


def _create_partitions(slot, name: str) -> int:
    r = _req(slot, 37, 3, timeout=S, validate_only=True, topics=[
        {"name": name, "count": 2, "assignments": None}])
    return int(r.results[0].error_code)


def _delete_records(slot, name: str) -> int:
    r = _req(slot, 21, 2, timeout=S, topics=[
        {"name": name, "partitions": [{"partition_index": 0, "offset": 0}]}])
    return int(r.topics[0].partitions[0].error_code)


def _find_coordinator(slot, group: str) -> int:
    return int(_req(slot, 10, 3, key=group, key_type=0).error_code)


def _join_group(slot, group: str) -> int:
    r = _req(slot, 11, 7, group_id=group, session_timeout=timedelta(seconds=6),
             rebalance_timeout=timedelta(seconds=6), member_id="", group_instance_id=None,
             protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}])
    return int(r.error_code)


def _heartbeat(slot, group: str) -> int:
    return int(_req(slot, 12, 4, group_id=group, generation_id=1, member_id="m",
                    group_instance_id=None).error_code)


def _sync_group(slot, group: str) -> int:
    return int(_req(slot, 14, 5, group_id=group, generation_id=1, member_id="m",
                    group_instance_id=None, protocol_type="consumer", protocol_name="range",
                    assignments=[]).error_code)


def _leave_group(slot, group: str) -> int:
    r = _req(slot, 13, 4, group_id=group, members=[{"member_id": "m",
                                                    "group_instance_id": None}])
    return int(r.error_code) or int(r.members[0].error_code)


def _offset_commit(slot, group: str) -> int:
    r = _req(slot, 8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
             group_instance_id=None, topics=[
                 {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                 "committed_leader_epoch": -1,
                                                 "committed_metadata": ""}]}])
    return int(r.topics[0].partitions[0].error_code)


def _offset_fetch(slot, group: str) -> int:
    return int(_req(slot, 9, 7, group_id=group, topics=None, require_stable=False).error_code)


def _describe_groups(slot, group: str) -> int:
    r = _req(slot, 15, 5, groups=[group], include_authorized_operations=False)
    return int(r.groups[0].error_code)


def _delete_groups(slot, group: str) -> int:
    return int(_req(slot, 42, 2, groups_names=[group]).results[0].error_code)


def _offset_delete(slot, group: str) -> int:
    return int(_req(slot, 47, 0, group_id=group, topics=[
        {"name": TOPIC, "partitions": [{"partition_index": 0}]}]).error_code)


def _elect_leaders(slot, _name: str) -> int:
    r = _req(slot, 43, 2, election_type=0, timeout=S, topic_partitions=[
        {"topic": TOPIC, "partitions": [0]}])
    return int(r.error_code) or int(r.replica_election_results[0].partition_result[0]
                                    .error_code)


def _alter_reassignments(slot, _name: str) -> int:
    return int(_req(slot, 45, 0, timeout=S, topics=[]).error_code)


def _list_reassignments(slot, _name: str) -> int:
    return int(_req(slot, 46, 0, timeout=S, topics=None).error_code)


def _init_producer_id(slot, _name: str) -> int:
    return int(_req(slot, 22, 4, transactional_id=None,
                    transaction_timeout=timedelta(seconds=60), producer_id=-1,
                    producer_epoch=-1).error_code)


def _describe_acls(slot, _name: str) -> int:
    return int(_req(slot, 29, 3, resource_type_filter=1, resource_name_filter=None,
                    pattern_type_filter=1, principal_filter=None, host_filter=None,
                    operation=1, permission_type=1).error_code)


def _create_acls(slot, _name: str) -> int:
    r = _req(slot, 30, 3, creations=[
        {"resource_type": 2, "resource_name": "acl-made-by-test", "resource_pattern_type": 3,
         "principal": "User:nobody", "host": "*", "operation": 3, "permission_type": 3}])
    return int(r.results[0].error_code)


def _delete_acls(slot, _name: str) -> int:
    r = _req(slot, 31, 3, filters=[
        {"resource_type_filter": 2, "resource_name_filter": "acl-made-by-test",
         "pattern_type_filter": 3, "principal_filter": "User:nobody", "host_filter": None,
         "operation": 1, "permission_type": 1}])
    return int(r.filter_results[0].error_code)


def _describe_log_dirs(slot, _name: str) -> int:
    return int(_req(slot, 35, 4, topics=None).error_code)


def _describe_scram_users(slot, _name: str) -> int:
    return int(_req(slot, 50, 0, users=None).error_code)


def _alter_scram_users(slot, _name: str) -> int:
    r = _req(slot, 51, 0, upsertions=[], deletions=[{"name": "nobody", "mechanism": 1}])
    return int(r.results[0].error_code)


# (request, resource type, resource name, the operation that serves it, refusal, served)
CASES: list[tuple[Callable[..., int], RT, str, Op, int, int]] = [
    (_metadata, RT.TOPIC, TOPIC, Op.DESCRIBE, TOPIC_AUTH, NONE),
    (_fetch, RT.TOPIC, TOPIC, Op.READ, TOPIC_AUTH, NONE),
    (_list_offsets, RT.TOPIC, TOPIC, Op.DESCRIBE, TOPIC_AUTH, NONE),
    (_offset_for_leader_epoch, RT.TOPIC, TOPIC, Op.DESCRIBE, TOPIC_AUTH, NONE),
    (_describe_topic_configs, RT.TOPIC, TOPIC, Op.DESCRIBE_CONFIGS, TOPIC_AUTH, NONE),
    (_alter_topic_configs, RT.TOPIC, TOPIC, Op.ALTER_CONFIGS, TOPIC_AUTH, NONE),
    (_legacy_alter_topic_configs, RT.TOPIC, TOPIC, Op.ALTER_CONFIGS, TOPIC_AUTH, NONE),
    (_create_partitions, RT.TOPIC, TOPIC, Op.ALTER, TOPIC_AUTH, NONE),
    (_delete_records, RT.TOPIC, TOPIC, Op.DELETE, TOPIC_AUTH, NONE),
    (_describe_broker_configs, RT.CLUSTER, "kafka-cluster", Op.DESCRIBE_CONFIGS, CLUSTER_AUTH,
     NONE),
    (_find_coordinator, RT.GROUP, GROUP, Op.DESCRIBE, GROUP_AUTH, NONE),
    (_join_group, RT.GROUP, GROUP, Op.READ, GROUP_AUTH,
     int(ErrorCode.member_id_required)),
    (_heartbeat, RT.GROUP, GROUP, Op.READ, GROUP_AUTH, int(ErrorCode.unknown_member_id)),
    (_sync_group, RT.GROUP, GROUP, Op.READ, GROUP_AUTH, int(ErrorCode.unknown_member_id)),
    (_leave_group, RT.GROUP, GROUP, Op.READ, GROUP_AUTH, int(ErrorCode.unknown_member_id)),
    (_offset_fetch, RT.GROUP, GROUP, Op.DESCRIBE, GROUP_AUTH, NONE),
    (_describe_groups, RT.GROUP, GROUP, Op.DESCRIBE, GROUP_AUTH, NONE),
    (_offset_delete, RT.GROUP, "matrix-no-offsets", Op.DELETE, GROUP_AUTH,
     int(ErrorCode.group_id_not_found)),
    (_delete_groups, RT.GROUP, "matrix-never-used", Op.DELETE, GROUP_AUTH,
     int(ErrorCode.group_id_not_found)),
    (_elect_leaders, RT.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_AUTH,
     int(ErrorCode.election_not_needed)),
    (_alter_reassignments, RT.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_AUTH, NONE),
    (_list_reassignments, RT.CLUSTER, "kafka-cluster", Op.DESCRIBE, CLUSTER_AUTH, NONE),
    (_init_producer_id, RT.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE, CLUSTER_AUTH, NONE),
    (_describe_acls, RT.CLUSTER, "kafka-cluster", Op.DESCRIBE, CLUSTER_AUTH, NONE),
    (_create_acls, RT.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_AUTH, NONE),
    (_delete_acls, RT.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_AUTH, NONE),
    (_describe_log_dirs, RT.CLUSTER, "kafka-cluster", Op.DESCRIBE, CLUSTER_AUTH, NONE),
    (_describe_scram_users, RT.CLUSTER, "kafka-cluster", Op.DESCRIBE, CLUSTER_AUTH, NONE),
    (_alter_scram_users, RT.CLUSTER, "kafka-cluster", Op.ALTER, CLUSTER_AUTH,
     int(ErrorCode.resource_not_found)),
]


@pytest.mark.parametrize("call,rtype,name,op,refused,served", CASES,
                         ids=[c[0].__name__.strip("_") for c in CASES])
def test_refused_without_acl_served_with_it(secure, call, rtype, name, op, refused, served):
    cluster, admin = secure
    slot = cluster.brokers[0]
    acl = binding(rtype, name, op)
    assert call(slot, name) == refused
    admin.grant(acl)
    try:
        eventually(lambda: call(slot, name), served)
        # Deny beats allow: the same principal, denied everything on the resource.
        deny = binding(rtype, name, Op.ALL, PermissionType.DENY)
        admin.grant(deny)
        try:
            eventually(lambda: call(slot, name), refused)
        finally:
            admin.revoke(deny)
        eventually(lambda: call(slot, name), served)
    finally:
        admin.revoke(acl)
    eventually(lambda: call(slot, name), refused)


def test_offset_commit_needs_group_and_topic_read(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]
    group = f"commit-{uuid.uuid4().hex[:6]}"
    assert _offset_commit(slot, group) == GROUP_AUTH
    admin.grant(binding(RT.GROUP, group, Op.READ))
    eventually(lambda: _offset_commit(slot, group), TOPIC_AUTH)
    admin.grant(binding(RT.TOPIC, TOPIC, Op.READ))
    try:
        eventually(lambda: _offset_commit(slot, group), NONE)
    finally:
        admin.revoke(binding(RT.TOPIC, TOPIC, Op.READ), binding(RT.GROUP, group, Op.READ))
    eventually(lambda: _offset_commit(slot, group), GROUP_AUTH)


def test_create_and_delete_topics(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]
    name = f"made-{uuid.uuid4().hex[:6]}"
    assert _create_topics(slot, name) == TOPIC_AUTH
    admin.grant(binding(RT.TOPIC, name, Op.CREATE))
    eventually(lambda: _create_topics(slot, name, validate_only=True), NONE)
    assert _create_topics(slot, name) == NONE
    delete = lambda: int(_req(slot, 20, 5, timeout=S, topic_names=[name])
                         .responses[0].error_code)
    assert delete() == TOPIC_AUTH
    admin.grant(binding(RT.TOPIC, name, Op.DELETE))
    eventually(delete, NONE)
    admin.revoke(binding(RT.TOPIC, name, Op.CREATE), binding(RT.TOPIC, name, Op.DELETE))


def test_prefixed_acls_match_names_under_the_prefix(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]
    prefixed = binding(RT.TOPIC, "matrix-", Op.DESCRIBE, pattern=PatternType.PREFIXED)
    assert _metadata(slot, TOPIC) == TOPIC_AUTH
    admin.grant(prefixed)
    try:
        eventually(lambda: _metadata(slot, TOPIC), NONE)
        # A name outside the prefix stays refused (and, not existing, is not revealed).
        assert _metadata(slot, "other-topic") == TOPIC_AUTH
        # A literal deny inside the prefix beats the prefixed allow.
        deny = binding(RT.TOPIC, TOPIC, Op.DESCRIBE, PermissionType.DENY)
        admin.grant(deny)
        eventually(lambda: _metadata(slot, TOPIC), TOPIC_AUTH)
        admin.revoke(deny)
        eventually(lambda: _metadata(slot, TOPIC), NONE)
    finally:
        admin.revoke(prefixed)
    eventually(lambda: _metadata(slot, TOPIC), TOPIC_AUTH)


def test_unauthorized_topics_are_not_revealed(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]
    # Existing or not, a topic the principal may not describe reads the same.
    assert _metadata(slot, TOPIC) == TOPIC_AUTH
    assert _metadata(slot, "no-such-topic") == TOPIC_AUTH
    everything = _req(slot, 3, 9, topics=None, allow_auto_topic_creation=False)
    assert [t.name for t in everything.topics] == []
    acl = binding(RT.TOPIC, TOPIC, Op.DESCRIBE)
    admin.grant(acl)
    try:
        listed = lambda: [t.name for t in _req(
            slot, 3, 9, topics=None, allow_auto_topic_creation=False).topics]
        eventually(listed, [TOPIC])
        # Authorized but absent: now the client may learn that it does not exist.
        admin.grant(binding(RT.TOPIC, "no-such-topic", Op.DESCRIBE))
        eventually(lambda: _metadata(slot, "no-such-topic"),
                   int(ErrorCode.unknown_topic_or_partition))
    finally:
        admin.revoke(acl, binding(RT.TOPIC, "no-such-topic", Op.DESCRIBE))
    eventually(lambda: _metadata(slot, TOPIC), TOPIC_AUTH)


def test_list_groups_shows_only_describable_groups(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]
    group = f"listed-{uuid.uuid4().hex[:6]}"
    admin.grant(binding(RT.GROUP, group, Op.READ))
    try:
        eventually(lambda: _join_group(slot, group), int(ErrorCode.member_id_required))
        # The group exists now (a member id was handed out): READ implies DESCRIBE.
        names = lambda: sorted(g.group_id for g in _req(
            slot, 16, 4, states_filter=[]).groups)
        eventually(names, [group])
    finally:
        admin.revoke(binding(RT.GROUP, group, Op.READ))
    eventually(names, [])


def test_real_producer_gets_topic_authorization_failed(secure):
    cluster, admin = secure
    slot = cluster.brokers[0]
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "message.timeout.ms": 5000})
    producer.produce(TOPIC, b"x", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(15)
    assert errors and errors[0] is not None
    assert errors[0].code() == CKafkaError.TOPIC_AUTHORIZATION_FAILED
    admin.grant(binding(RT.TOPIC, TOPIC, Op.WRITE))
    try:
        eventually(lambda: _metadata(slot, TOPIC), NONE)  # WRITE implies DESCRIBE
        outcome: list[Any] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap,
                             "message.timeout.ms": 10000})
        producer.produce(TOPIC, b"y", on_delivery=lambda err, _m: outcome.append(err))
        producer.flush(15)
        assert outcome == [None]
    finally:
        admin.revoke(binding(RT.TOPIC, TOPIC, Op.WRITE))
    eventually(lambda: _metadata(slot, TOPIC), TOPIC_AUTH)


def test_fuzzed_requests_against_the_authorizer(secure):
    """Every API and version, valid and mutated, through the authorization checks (last in
    the module: a fuzzed request may change the broker's state). The broker answers or
    closes each connection, stays up, and still decides by its ACLs."""
    from fuzz.cases import cases, make_case, targets
    from fuzz.live import run_cases

    cluster, admin = secure
    slot = cluster.brokers[0]
    pid = cluster.broker_pid(slot.id)
    valid = [make_case(t, "valid", i) for t in targets() for i in range(2)]
    outcomes, bad = asyncio.run(run_cases(slot.host, slot.port, valid, wait_s=5.0))
    assert not bad
    assert set(outcomes) <= {"answered", "pending"}, outcomes
    outcomes, bad = asyncio.run(run_cases(slot.host, slot.port, list(cases(3, 4))))
    assert not bad, [(c.target.name, c.target.version, c.mutation, c.seed, o) for c, o in bad]
    assert cluster.broker_pid(slot.id) == pid, "the broker process restarted or died"
    log = cluster.log_path(slot.id).read_text(errors="replace")
    assert "Traceback" not in log, log[log.index("Traceback") - 2000:][:6000]
    acl = binding(RT.TOPIC, TOPIC, Op.DESCRIBE)
    assert _metadata(slot, TOPIC) == TOPIC_AUTH
    admin.grant(acl)
    try:
        eventually(lambda: _metadata(slot, TOPIC), NONE)
    finally:
        admin.revoke(acl)

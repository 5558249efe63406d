"""ACLs for authenticated principals: two brokers with a SASL_PLAINTEXT listener (PLAIN and
SCRAM), replicating over it as ``User:admin`` (a super user), and the authorizer on.
``alice`` (PLAIN) and ``bob`` (SCRAM-SHA-256) are refused until an ACL names them, each only
for what it was given; ``User:ANONYMOUS`` on PLAINTEXT sees nothing."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.integration.acl_cluster import AUTHORIZER, eventually
from tests.integration.clients import raw_request
from weir.ops.cluster import LOOPBACK, LocalCluster, free_port
from weir.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
BOB_PASSWORD = "bob-scram-secret"
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" '
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory):
    ports = {b: {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()} for b in (1, 2)}
    per_broker = {b: {"listeners": ",".join(f"{n}://{LOOPBACK}:{p}" for n, p in ps.items())}
                  for b, ps in ports.items()}
    cluster = LocalCluster(tmp_path_factory.mktemp("weir-acl-sasl"), brokers=2, port_base=0,
                           broker_overrides=per_broker, overrides={
                               **AUTHORIZER,
                               "super.users": "User:admin",
                               "inter.broker.listener.name": "SASL_PLAINTEXT",
                               "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                               "sasl.mechanism.inter.broker.protocol": "PLAIN",
                               "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                               "offsets.topic.replication.factor": "2",
                               "auto.create.topics.enable": "false"})
    try:
        cluster.start(timeout_s=90)
        sasl = ",".join(f"{LOOPBACK}:{p['SASL_PLAINTEXT']}" for p in ports.values())
        admin = AdminClient(_conf(sasl, "admin"))
        upsert = UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
            BOB_PASSWORD.encode())
        admin.alter_user_scram_credentials([upsert])["bob"].result(30)
        topic = f"sasl-acl-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, 1, 2, config={"min.insync.replicas": "2"})],
                            operation_timeout=30)[topic].result(60)
        yield cluster, sasl, admin, topic
    finally:
        cluster.stop()


def _conf(bootstrap: str, user: str) -> dict[str, object]:
    if user == "bob":
        mechanism, password = "SCRAM-SHA-256", BOB_PASSWORD
    else:
        mechanism, password = "PLAIN", PASSWORDS[user]
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def _produce(bootstrap: str, user: str, topic: str) -> object:
    """The delivery outcome of one acks=all record: None or the KafkaError code."""
    outcome: list[object] = []
    producer = Producer({**_conf(bootstrap, user), "acks": "all", "message.timeout.ms": 8000})
    producer.produce(topic, f"from {user}".encode(),
                     on_delivery=lambda err, _m: outcome.append(err))
    producer.flush(20)
    return outcome[0].code() if outcome and outcome[0] is not None else (
        None if outcome else "no outcome")


def _allow(admin, user: str, rtype, name: str, *ops) -> list:
    bindings = [AclBinding(rtype, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                           AclPermissionType.ALLOW) for op in ops]
    for future in admin.create_acls(bindings, request_timeout=20).values():
        future.result(30)
    return bindings


def test_principals_get_only_what_their_acls_give(sasl_cluster):
    _cluster, sasl, admin, topic = sasl_cluster
    assert _produce(sasl, "alice", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(sasl, "bob", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    granted = _allow(admin, "alice", ResourceType.TOPIC, topic, AclOperation.WRITE)
    try:
        # acks=all with min.insync.replicas=2: the follower replicates over SASL as
        # User:admin, a super user (its fetches need CLUSTER_ACTION).
        eventually(lambda: _produce(sasl, "alice", topic), None, timeout_s=40)
        assert _produce(sasl, "bob", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal,
                                    b.host, b.operation, b.permission_type) for b in granted]
        for future in admin.delete_acls(filters, request_timeout=20).values():
            future.result(30)


def test_a_consumer_needs_read_on_topic_and_group(sasl_cluster):
    _cluster, sasl, admin, topic = sasl_cluster
    group = f"g-{uuid.uuid4().hex[:6]}"
    assert _produce(sasl, "admin", topic) is None

    def consume() -> object:
        consumer = Consumer({**_conf(sasl, "bob"), "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            # No explicit offset: the consumer must ask the group for its committed
            # offset (OffsetFetch, which needs the group) before it may fetch, so
            # the group's refusal always comes before any record. With an explicit
            # offset librdkafka fetches at once, as Kafka allows without the group.
            consumer.assign([CkTopicPartition(topic, 0)])
            for _ in range(20):
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                return msg.error().code() if msg.error() else "served"
            return "nothing"
        finally:
            consumer.close()

    # The committed offsets are asked first (OffsetFetch: the group), then the records.
    assert consume() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _allow(admin, "bob", ResourceType.TOPIC, topic, AclOperation.READ)
    assert consume() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _allow(admin, "bob", ResourceType.GROUP, group, AclOperation.READ)
    eventually(consume, "served", timeout_s=40)


def test_anonymous_on_plaintext_sees_nothing(sasl_cluster):
    cluster, _sasl, _admin, topic = sasl_cluster
    slot = cluster.brokers[0]
    everything = raw_request(slot.host, slot.port, 3, 9, topics=None,
                             allow_auto_topic_creation=False)
    assert [t.name for t in everything.topics] == []
    named = raw_request(slot.host, slot.port, 3, 9, topics=[{"name": topic}],
                        allow_auto_topic_creation=False)
    assert named.topics[0].error_code == ErrorCode.topic_authorization_failed
    # Nor may it impersonate a broker.
    refused = raw_request(slot.host, slot.port, 7, 3, broker_id=2, broker_epoch=-1)
    assert refused.error_code == ErrorCode.cluster_authorization_failed

"""Kafka's AclAuthorizer rules (sans-I/O): matching, deny over allow, prefixes, wildcards,
implied operations, super users, allow.everyone.if.no.acl.found, filters and the JSON."""

from __future__ import annotations

import json

import pytest

from weir.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    decode_change,
    decode_entries,
    encode_change,
    encode_entries,
    validate_binding,
)
from weir.security.authorizer import Authorizer, Session, parse_super_users

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
Op = AclOperation
ALICE = Session("User:alice", "10.0.0.1")
BOB = Session("User:bob", "10.0.0.2")


def ace(principal="User:alice", op=Op.READ, perm=ALLOW, host="*"):
    return AccessControlEntry(principal, host, op, perm)


def authorizer(*acls, **kw) -> Authorizer:
    az = Authorizer(**kw)
    by_pattern: dict = {}
    for pattern, entry in acls:
        by_pattern.setdefault(pattern, set()).add(entry)
    for pattern, entries in by_pattern.items():
        az.cache.replace(pattern, entries)
    return az


def topic(name, pattern=LIT):
    return ResourcePattern(T, name, pattern)


def test_no_acl_denies_unless_allow_everyone():
    assert not authorizer().authorize(ALICE, Op.READ, T, "t")
    assert authorizer(allow_everyone_if_no_acl_found=True).authorize(ALICE, Op.READ, T, "t")
    # A resource with ACLs (for someone else) is not "no ACL found".
    az = authorizer((topic("t"), ace("User:bob")), allow_everyone_if_no_acl_found=True)
    assert not az.authorize(ALICE, Op.READ, T, "t")
    assert az.authorize(BOB, Op.READ, T, "t")
    assert az.authorize(ALICE, Op.READ, T, "other")


def test_literal_allow_is_exact():
    az = authorizer((topic("orders"), ace()))
    assert az.authorize(ALICE, Op.READ, T, "orders")
    assert not az.authorize(ALICE, Op.READ, T, "orders2")
    assert not az.authorize(ALICE, Op.WRITE, T, "orders")
    assert not az.authorize(BOB, Op.READ, T, "orders")
    assert not az.authorize(ALICE, Op.READ, G, "orders")


def test_deny_beats_allow():
    az = authorizer((topic("t"), ace()), (topic("t"), ace(perm=DENY)))
    assert not az.authorize(ALICE, Op.READ, T, "t")
    # A deny for everyone on every topic beats a literal allow.
    az = authorizer((topic("t"), ace()), (topic("*"), ace("User:*", Op.ALL, DENY)))
    assert not az.authorize(ALICE, Op.READ, T, "t")
    # A prefixed deny beats a literal allow.
    az = authorizer((topic("secret-x"), ace()), (topic("secret-", PRE), ace(perm=DENY)))
    assert not az.authorize(ALICE, Op.READ, T, "secret-x")


def test_prefixed_allow():
    az = authorizer((topic("app-", PRE), ace(op=Op.WRITE)))
    assert az.authorize(ALICE, Op.WRITE, T, "app-")
    assert az.authorize(ALICE, Op.WRITE, T, "app-orders")
    assert not az.authorize(ALICE, Op.WRITE, T, "ap")
    assert not az.authorize(ALICE, Op.WRITE, T, "other-app-x")
    az.cache.replace(topic("app-", PRE), ())
    assert not az.authorize(ALICE, Op.WRITE, T, "app-orders")


def test_wildcards_principal_host_resource_operation():
    assert authorizer((topic("*"), ace())).authorize(ALICE, Op.READ, T, "anything")
    assert authorizer((topic("t"), ace("User:*"))).authorize(BOB, Op.READ, T, "t")
    assert authorizer((topic("t"), ace(op=Op.ALL))).authorize(ALICE, Op.DELETE, T, "t")
    az = authorizer((topic("t"), ace(host="10.0.0.1")))
    assert az.authorize(ALICE, Op.READ, T, "t")
    assert not az.authorize(Session("User:alice", "10.0.0.9"), Op.READ, T, "t")


@pytest.mark.parametrize("granted,implied", [
    (Op.READ, Op.DESCRIBE), (Op.WRITE, Op.DESCRIBE), (Op.DELETE, Op.DESCRIBE),
    (Op.ALTER, Op.DESCRIBE), (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)])
def test_implied_operations(granted, implied):
    az = authorizer((topic("t"), ace(op=granted)))
    assert az.authorize(ALICE, implied, T, "t")
    assert not authorizer((topic("t"), ace(op=implied))).authorize(ALICE, granted, T, "t")


def test_deny_describe_is_not_overridden_by_implication():
    az = authorizer((topic("t"), ace(op=Op.READ)), (topic("t"), ace(op=Op.DESCRIBE, perm=DENY)))
    assert not az.authorize(ALICE, Op.DESCRIBE, T, "t")


def test_super_users():
    assert parse_super_users("User:admin; User:broker") == {"User:admin", "User:broker"}
    assert parse_super_users("") == frozenset()
    with pytest.raises(AclError):
        parse_super_users("admin")
    az = authorizer((topic("t"), ace("User:admin", Op.ALL, DENY)),
                    super_users={"User:admin"})
    assert az.authorize(Session("User:admin", "h"), Op.WRITE, T, "t")
    assert az.authorize(Session("User:admin", "h"), Op.CLUSTER_ACTION, C, "kafka-cluster")


def test_authorize_by_resource_type():
    """KIP-679: WRITE on some topic lets an idempotent producer get a producer id."""
    az = authorizer((topic("t"), ace(op=Op.WRITE)))
    assert az.authorize_by_resource_type(ALICE, Op.WRITE, T)
    assert not az.authorize_by_resource_type(BOB, Op.WRITE, T)
    az = authorizer((topic("t"), ace(op=Op.WRITE)), (topic("t"), ace(op=Op.WRITE, perm=DENY)))
    assert not az.authorize_by_resource_type(ALICE, Op.WRITE, T)
    # A literal allow under a prefixed deny is dominated.
    az = authorizer((topic("a-b"), ace(op=Op.WRITE)), (topic("a-", PRE), ace(op=Op.WRITE,
                                                                             perm=DENY)))
    assert not az.authorize_by_resource_type(ALICE, Op.WRITE, T)
    az = authorizer((topic("x", PRE), ace(op=Op.WRITE)), (topic("y"), ace(op=Op.WRITE,
                                                                          perm=DENY)))
    assert az.authorize_by_resource_type(ALICE, Op.WRITE, T)
    az = authorizer((topic("t"), ace(op=Op.WRITE)), (topic("*"), ace(op=Op.WRITE, perm=DENY)))
    assert not az.authorize_by_resource_type(ALICE, Op.WRITE, T)


def test_authorized_operations_bits():
    az = authorizer((topic("t"), ace(op=Op.READ)))
    bits = az.authorized_operations(ALICE, T, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_filters():
    b1 = AclBinding(topic("app-", PRE), ace())
    b2 = AclBinding(topic("app-x"), ace("User:bob", Op.WRITE))
    b3 = AclBinding(topic("*"), ace(op=Op.DESCRIBE))
    b4 = AclBinding(ResourcePattern(G, "g", LIT), ace())
    everything = [b1, b2, b3, b4]

    def matching(**kw):
        return [b for b in everything if AclBindingFilter(**kw).matches(b)]

    assert matching() == everything
    assert matching(resource_type=T) == [b1, b2, b3]
    assert matching(resource_type=T, name="app-x") == [b2]
    assert matching(resource_type=T, name="app-x", pattern_type=PatternType.MATCH) == [b1, b2, b3]
    assert matching(pattern_type=PRE) == [b1]
    assert matching(principal="User:bob") == [b2]
    assert matching(operation=Op.DESCRIBE) == [b3]
    assert matching(permission=DENY) == []
    assert AclBindingFilter(resource_type=T, name="n").exact_patterns() == [topic("n"),
                                                                            topic("n", PRE)]
    assert AclBindingFilter(resource_type=T).exact_patterns() == []
    assert AclBindingFilter(resource_type=T, name="a/b").exact_patterns() == []
    with pytest.raises(AclError):
        AclBindingFilter(pattern_type=PatternType.UNKNOWN).validate()


@pytest.mark.parametrize("binding,reason", [
    (AclBinding(ResourcePattern(C, "other", LIT), ace(op=Op.ALTER)), "kafka-cluster"),
    (AclBinding(topic(""), ace()), "empty"),
    (AclBinding(topic("a/b"), ace()), "invalid resource name"),
    (AclBinding(topic(".."), ace()), "invalid resource name"),
    (AclBinding(topic("bad\ud800"), ace()), "invalid resource name"),
    (AclBinding(topic("t", PatternType.MATCH), ace()), "LITERAL or PREFIXED"),
    (AclBinding(ResourcePattern(ResourceType.ANY, "t", LIT), ace()), "resource type"),
    (AclBinding(topic("t"), ace(op=Op.ANY)), "operation"),
    (AclBinding(topic("t"), ace(perm=PermissionType.ANY)), "permission"),
    (AclBinding(topic("t"), ace(principal="alice")), "Type:name"),
])
def test_invalid_bindings(binding, reason):
    with pytest.raises(AclError, match=reason):
        validate_binding(binding)


def test_zookeeper_json_is_kafkas():
    entries = {ace(op=Op.CLUSTER_ACTION, perm=DENY, host="h1"), ace("User:bob", Op.READ)}
    doc = json.loads(encode_entries(entries))
    assert doc["version"] == 1
    assert {"principal": "User:alice", "permissionType": "Deny", "operation": "ClusterAction",
            "host": "h1"} in doc["acls"]
    assert decode_entries(encode_entries(entries)) == entries
    # As Kafka writes it (AclEntry.toJsonCompatibleMap).
    kafka = (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
             b'"operation":"IdempotentWrite","host":"*"}]}')
    assert decode_entries(kafka) == {ace(op=Op.IDEMPOTENT_WRITE)}
    for bad in (b"{", b'{"version":2,"acls":[]}', b'{"version":1}',
                (b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe",'
                 b'"operation":"Read","host":"*"}]}')):
        with pytest.raises(AclError):
            decode_entries(bad)


def test_change_events_are_kafkas():
    assert encode_change(topic("t")) == b"TOPIC:t"
    assert decode_change(b"TOPIC:a:b", extended=False) == topic("a:b")
    assert json.loads(encode_change(topic("p-", PRE))) == {
        "version": 1, "resourceType": "TOPIC", "name": "p-", "patternType": "PREFIXED"}
    assert decode_change(encode_change(topic("p-", PRE)), extended=True) == topic("p-", PRE)
    with pytest.raises(AclError):
        decode_change(b"nocolon", extended=False)
    with pytest.raises(AclError):
        decode_change(b'{"version":1}', extended=True)


def test_authorizer_configs_are_checked_at_startup():
    from weir.config import BrokerConfig, ConfigError

    base = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}
    cfg = BrokerConfig({**base, "authorizer.class.name":
                        "kafka.security.authorizer.AclAuthorizer",
                        "super.users": "User:admin; User:broker"})
    assert parse_super_users(cfg.get("super.users")) == {"User:admin", "User:broker"}
    assert cfg.get("allow.everyone.if.no.acl.found") is False
    assert BrokerConfig(base).get("authorizer.class.name") == ""
    with pytest.raises(ConfigError, match="super.users"):
        BrokerConfig({**base, "super.users": "admin"})
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({**base, "authorizer.class.name": "com.example.MyAuthorizer"})


def test_a_group_supports_read_describe_and_delete_as_in_kafka_3_9() -> None:
    """DescribeGroups' authorized operations for a group (librdkafka 0081_admin expects
    three from a broker before 4.0: group configs arrived with KIP-848 in 4.0)."""
    from weir.security.acls import SUPPORTED_OPERATIONS, AclOperation
    assert SUPPORTED_OPERATIONS[G] == {AclOperation.READ, AclOperation.DESCRIBE,
                                       AclOperation.DELETE}

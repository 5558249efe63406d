"""The AclAuthorizer shell against a real ZooKeeper: two "brokers" (two authorizer services
on one chroot) see each other's ACL changes through the change notifications; creates and
deletes follow Kafka's AclAuthorizer (grouping per resource, filters, exact-pattern deletes of
ACLs not yet cached, validation errors); corrupt data is survived."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from weir.config import BrokerConfig
from weir.coordination.zk import ZkClient
from weir.protocol.errors import ErrorCode
from weir.security.acl_store import (
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    ZkAclStore,
    resource_path,
)
from weir.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from weir.security.authorizer import Session
from weir.server.authz import AclAuthorizerService, create_authorizer

_chroots = itertools.count()
ALICE = Session("User:alice", "10.0.0.1")


def _config(connect: str, **extra: str) -> BrokerConfig:
    return BrokerConfig({"broker.id": "1", "zookeeper.connect": connect,
                         "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                         **extra})


def _binding(name: str, op: AclOperation = AclOperation.READ,
             pattern: PatternType = PatternType.LITERAL, principal: str = "User:alice",
             permission: PermissionType = PermissionType.ALLOW,
             rtype: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern),
                      AccessControlEntry(principal, "*", op, permission))


async def _eventually(predicate, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met before the deadline")
        await asyncio.sleep(0.02)


@pytest.fixture
def connect(zk_server) -> str:
    return f"{zk_server.connect_string}/acl-test-{next(_chroots)}"


def _run(connect: str, body, **extra: str) -> None:
    """Two authorizer services ("brokers") on one chroot, each with its own session."""

    async def main() -> None:
        clients = [ZkClient(connect, 6000, 10000) for _ in range(2)]
        services: list[AclAuthorizerService] = []
        try:
            for client in clients:
                await asyncio.to_thread(client.start)
                service = create_authorizer(_config(connect, **extra), client)
                assert service is not None
                await service.start()
                services.append(service)
            await body(*services, clients[0])
        finally:
            for service in services:
                await service.stop()
            for client in clients:
                await asyncio.to_thread(client.stop)

    asyncio.run(main())


def test_no_authorizer_without_the_config(connect):
    cfg = BrokerConfig({"broker.id": "1", "zookeeper.connect": connect})
    assert create_authorizer(cfg, object()) is None


def test_an_acl_created_on_one_broker_reaches_the_other(connect):
    async def body(a, b, zk):
        assert not b.core.authorize(ALICE, AclOperation.READ, ResourceType.TOPIC, "t")
        results = await a.create_acls([_binding("t"), _binding("p-", AclOperation.WRITE,
                                                               PatternType.PREFIXED)])
        assert results == [(ErrorCode.none, None)] * 2
        # The creating broker decides at once; the other after the notification.
        assert a.core.authorize(ALICE, AclOperation.READ, ResourceType.TOPIC, "t")
        await _eventually(lambda: b.core.authorize(ALICE, AclOperation.READ,
                                                   ResourceType.TOPIC, "t"))
        await _eventually(lambda: b.core.authorize(ALICE, AclOperation.WRITE,
                                                   ResourceType.TOPIC, "p-x"))
        # Stored in Kafka's layout, with one notification per changed resource.
        raw, _ = zk.kazoo.get("/kafka-acl/Topic/t")
        assert json.loads(raw) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
             "host": "*"}]}
        assert zk.kazoo.exists("/kafka-acl-extended/prefixed/Topic/p-")
        literal = zk.kazoo.get_children(LITERAL_CHANGES)
        extended = zk.kazoo.get_children(EXTENDED_CHANGES)
        assert [zk.kazoo.get(f"{LITERAL_CHANGES}/{c}")[0] for c in literal] == [b"TOPIC:t"]
        assert len(extended) == 1

        deleted = await b.delete_acls([AclBindingFilter(resource_type=ResourceType.TOPIC,
                                                        name="t")])
        assert deleted == [(ErrorCode.none, None, [(_binding("t"), ErrorCode.none)])]
        await _eventually(lambda: not a.core.authorize(ALICE, AclOperation.READ,
                                                       ResourceType.TOPIC, "t"))
        assert zk.kazoo.exists("/kafka-acl/Topic/t") is None  # no ACL left: no znode

    _run(connect, body)


def test_creates_merge_and_repeat_without_a_second_notification(connect):
    async def body(a, _b, zk):
        await a.create_acls([_binding("t")])
        await a.create_acls([_binding("t", AclOperation.WRITE)])
        before = zk.kazoo.get_children(LITERAL_CHANGES)
        assert await a.create_acls([_binding("t")]) == [(ErrorCode.none, None)]
        assert zk.kazoo.get_children(LITERAL_CHANGES) == before  # nothing changed
        entries = a.store.read(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL))
        assert {e.operation for e in entries.entries} == {AclOperation.READ,
                                                          AclOperation.WRITE}

    _run(connect, body)


def test_invalid_bindings_are_refused_one_by_one(connect):
    async def body(a, _b, _zk):
        results = await a.create_acls([
            _binding("ok"),
            _binding("x", rtype=ResourceType.CLUSTER),
            _binding("t", pattern=PatternType.MATCH),
            _binding("t", principal="alice"),
        ])
        assert [code for code, _ in results] == [ErrorCode.none] + [ErrorCode.invalid_request] * 3
        assert "kafka-cluster" in results[1][1]

    _run(connect, body)


def test_delete_filters_report_each_binding_once(connect):
    async def body(a, b, _zk):
        await a.create_acls([_binding("t"), _binding("t", principal="User:bob"),
                             _binding("u", AclOperation.WRITE)])
        results = await a.delete_acls([
            AclBindingFilter(principal="User:alice", operation=AclOperation.READ),
            AclBindingFilter(resource_type=ResourceType.TOPIC),  # matches alice's too
            AclBindingFilter(pattern_type=PatternType.UNKNOWN),
        ])
        assert results[0] == (ErrorCode.none, None, [(_binding("t"), ErrorCode.none)])
        assert sorted(b for b, _ in results[1][2]) == sorted(
            [_binding("t", principal="User:bob"), _binding("u", AclOperation.WRITE)])
        assert results[2][0] == ErrorCode.invalid_request
        assert a.describe_acls(AclBindingFilter()) == []
        await _eventually(lambda: b.describe_acls(AclBindingFilter()) == [])

    _run(connect, body)


def test_exact_delete_reaches_acls_this_broker_has_not_cached(connect):
    async def body(a, _b, zk):
        # Written behind the brokers' backs, no notification: only ZooKeeper knows it.
        store = ZkAclStore(zk)
        pattern = ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL)
        path = resource_path(pattern)
        zk.kazoo.create(path, b'{"version":1,"acls":[{"principal":"User:alice",'
                              b'"permissionType":"Allow","operation":"Read","host":"*"}]}')
        assert a.describe_acls(AclBindingFilter()) == []
        results = await a.delete_acls([AclBindingFilter(resource_type=ResourceType.GROUP,
                                                        name="g",
                                                        pattern_type=PatternType.LITERAL)])
        assert len(results[0][2]) == 1
        assert store.read(pattern).entries == frozenset()

    _run(connect, body)


def test_corrupt_znodes_and_notifications_are_survived(connect):
    async def body(a, b, zk):
        zk.kazoo.create("/kafka-acl/Topic/bad", b"not json")
        zk.kazoo.create(f"{LITERAL_CHANGES}/acl_changes_", b"nocolon", sequence=True)
        zk.kazoo.create(f"{LITERAL_CHANGES}/acl_changes_", b"TOPIC:bad", sequence=True)
        await a.create_acls([_binding("good")])
        await _eventually(lambda: b.core.authorize(ALICE, AclOperation.READ,
                                                   ResourceType.TOPIC, "good"))
        assert not b.core.authorize(ALICE, AclOperation.READ, ResourceType.TOPIC, "bad")

    _run(connect, body)


def test_a_restarted_broker_loads_every_acl(connect):
    async def body(a, _b, zk):
        await a.create_acls([_binding("t"), _binding("p", pattern=PatternType.PREFIXED),
                             _binding("kafka-cluster", AclOperation.ALTER,
                                      rtype=ResourceType.CLUSTER)])
        fresh = create_authorizer(_config(zk.connect), zk)
        await fresh.start()
        try:
            assert len(fresh.describe_acls(AclBindingFilter())) == 3
            assert fresh.core.authorize(ALICE, AclOperation.READ, ResourceType.TOPIC, "px")
        finally:
            await fresh.stop()

    _run(connect, body)


def test_super_users_and_allow_everyone_come_from_the_config(connect):
    async def body(a, _b, _zk):
        assert a.core.authorize(Session("User:admin", "h"), AclOperation.ALTER,
                                ResourceType.CLUSTER, "kafka-cluster")
        assert a.core.authorize(ALICE, AclOperation.READ, ResourceType.TOPIC, "t")
        await a.create_acls([_binding("t", principal="User:bob")])
        assert not a.core.authorize(ALICE, AclOperation.READ, ResourceType.TOPIC, "t")

    _run(connect, body, **{"super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"})


def test_concurrent_changes_through_two_brokers_lose_nothing(connect):
    """Conditional writes (znode versions) with re-read and retry, as Kafka's
    updateResourceAcls: creates racing on one resource through two brokers all land."""

    async def body(a, b, _zk):
        users = [f"User:u{i}" for i in range(12)]
        await asyncio.gather(*(
            (a if i % 2 else b).create_acls([_binding("shared", principal=user)])
            for i, user in enumerate(users)))
        pattern = ResourcePattern(ResourceType.TOPIC, "shared", PatternType.LITERAL)
        stored = a.store.read(pattern).entries
        assert sorted(e.principal for e in stored) == sorted(users)
        await _eventually(lambda: len(a.describe_acls(AclBindingFilter())) == 12
                          and len(b.describe_acls(AclBindingFilter())) == 12)

    _run(connect, body)

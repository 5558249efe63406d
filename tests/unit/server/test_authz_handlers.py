"""Handlers with principals other than User:ANONYMOUS (as SASL or TLS would set them on the
RequestContext): the inter-broker APIs need CLUSTER_ACTION, the ACL APIs ALTER/DESCRIBE on
the cluster and an authorizer (SECURITY_DISABLED without one), a follower fetch needs
CLUSTER_ACTION; without an authorizer everything is allowed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.security.acls import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from weir.security.authorizer import Authorizer
from weir.server import authz
from weir.server.context import RequestContext
from weir.server.fetch_session import PartitionRequest
from weir.server.handlers import REGISTRY, fetch
from weir.server.handlers import describe_acls as describe_acls_handler

CLUSTER = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


def _broker(acls=(), super_users=(), with_authorizer=True):
    core = Authorizer(super_users)
    for pattern, principal, op in acls:
        core.cache.replace(pattern, core.cache.get(pattern) | {
            AccessControlEntry(principal, "*", op, PermissionType.ALLOW)})
    service = SimpleNamespace(core=core, describe_acls=lambda _flt: [])

    async def wait_registered():
        return True

    return SimpleNamespace(authorizer=service if with_authorizer else None,
                           registration=SimpleNamespace(broker_epoch=5,
                                                        wait_registered=wait_registered))


def _ctx(broker, api_key: int, version: int, principal: str) -> RequestContext:
    request_cls, response_cls = REGISTRY[api_key].schemas(version)
    header = codec.RequestHeader(api_key, version, 1, "test", 0)
    return RequestContext(broker, header, request_cls, response_cls, "10.1.2.3:5555",
                          principal=principal)


def _call(broker, api_key: int, version: int, principal: str, **fields):
    ctx = _ctx(broker, api_key, version, principal)
    request = codec.build(ctx.request_cls, **fields)
    return asyncio.run(REGISTRY[api_key].module.handle(ctx, request))


INTER_BROKER = [(4, 7, {"broker_epoch": 1}), (5, 4, {"broker_epoch": 1}),
                (6, 8, {"broker_epoch": 1}), (7, 3, {}), (56, 2, {})]


@pytest.mark.parametrize("api_key,version,fields", INTER_BROKER,
                         ids=["LeaderAndIsr", "StopReplica", "UpdateMetadata",
                              "ControlledShutdown", "AlterPartition"])
def test_inter_broker_apis_need_cluster_action(api_key, version, fields):
    refused = _call(_broker(), api_key, version, "User:alice", **fields)
    assert refused.error_code == ErrorCode.cluster_authorization_failed


@pytest.mark.parametrize("grant", ["acl", "super"])
def test_brokers_with_cluster_action_get_past_the_check(grant):
    broker = (_broker(acls=[(CLUSTER, "User:broker", AclOperation.CLUSTER_ACTION)])
              if grant == "acl" else _broker(super_users={"User:broker"}))
    broker.controller = None
    # Past authorization: the broker-epoch check (an older epoch than ours) answers.
    assert _call(broker, 4, 7, "User:broker", broker_epoch=1).error_code == (
        ErrorCode.stale_broker_epoch)
    assert _call(broker, 7, 3, "User:broker").error_code == ErrorCode.not_controller
    # Another principal on the same broker is still refused.
    assert _call(broker, 4, 7, "User:alice", broker_epoch=1).error_code == (
        ErrorCode.cluster_authorization_failed)


def test_acl_apis_need_the_cluster_operation_and_an_authorizer():
    creation = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                "principal": "User:x", "host": "*", "operation": 3, "permission_type": 3}
    flt = {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
           "permission_type": 1}
    no_authorizer = _broker(with_authorizer=False)
    assert _call(no_authorizer, 30, 3, "User:alice", creations=[creation]).results[0]\
        .error_code == ErrorCode.security_disabled
    assert _call(no_authorizer, 29, 3, "User:alice", **flt).error_code == (
        ErrorCode.security_disabled)
    assert _call(no_authorizer, 31, 3, "User:alice", filters=[flt]).filter_results[0]\
        .error_code == ErrorCode.security_disabled
    secured = _broker(acls=[(CLUSTER, "User:ops", AclOperation.DESCRIBE)])
    assert _call(secured, 30, 3, "User:alice", creations=[creation]).results[0]\
        .error_code == ErrorCode.cluster_authorization_failed
    assert _call(secured, 29, 3, "User:alice", **flt).error_code == (
        ErrorCode.cluster_authorization_failed)
    assert _call(secured, 29, 3, "User:ops", **flt).error_code == ErrorCode.none
    # ALTER on the cluster is needed to delete, DESCRIBE is not enough.
    assert _call(secured, 31, 3, "User:ops", filters=[flt]).filter_results[0]\
        .error_code == ErrorCode.cluster_authorization_failed


def test_credential_and_log_dir_apis_need_cluster_operations():
    broker = _broker()
    r = _call(broker, 51, 0, "User:alice", deletions=[{"name": "bob", "mechanism": 1}],
              upsertions=[{"name": "alice", "mechanism": 1, "iterations": 4096,
                           "salt": b"s", "salted_password": b"p"}])
    assert [(x.user, x.error_code) for x in r.results] == [
        ("alice", ErrorCode.cluster_authorization_failed),
        ("bob", ErrorCode.cluster_authorization_failed)]
    r = _call(broker, 50, 0, "User:alice", users=[{"name": "bob"}])
    assert r.error_code == ErrorCode.cluster_authorization_failed
    assert [x.error_code for x in r.results] == [ErrorCode.cluster_authorization_failed]
    r = _call(broker, 35, 4, "User:alice", topics=None)
    assert r.error_code == ErrorCode.cluster_authorization_failed and r.results == ()
    r = _call(broker, 34, 2, "User:alice", dirs=[
        {"path": "/elsewhere", "topics": [{"name": "t", "partitions": [0, 1]}]}])
    assert [p.error_code for p in r.results[0].partitions] == [
        ErrorCode.cluster_authorization_failed] * 2


def test_describe_acls_v0_filters_literal_patterns():
    seen = []
    broker = _broker(super_users={"User:ops"})
    broker.authorizer.describe_acls = lambda flt: seen.append(flt) or []
    assert describe_acls_handler.MIN_VERSION == 0
    response = _call(broker, 29, 0, "User:ops", resource_type_filter=2,
                     resource_name_filter=None, principal_filter=None, host_filter=None,
                     operation=1, permission_type=1)
    assert response.error_code == ErrorCode.none
    assert seen[0].pattern_type == PatternType.LITERAL


def test_follower_fetch_needs_cluster_action_consumer_fetch_read():
    parts = [PartitionRequest("t", None, 0, 0, 1024), PartitionRequest("u", None, 0, 0, 1024)]
    topic_read = ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)
    broker = _broker(acls=[(topic_read, "User:alice", AclOperation.READ),
                           (CLUSTER, "User:broker", AclOperation.CLUSTER_ACTION)])
    ctx = _ctx(broker, 1, 12, "User:alice")
    assert fetch._unauthorized_topics(ctx, True, parts) == {"u"}
    assert fetch._unauthorized_topics(ctx, False, parts) == {"t", "u"}
    ctx.principal = "User:broker"
    assert fetch._unauthorized_topics(ctx, False, parts) == set()


def test_no_authorizer_allows_everything():
    ctx = _ctx(_broker(with_authorizer=False), 3, 12, "User:anyone")
    assert authz.authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, "t")
    assert authz.authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    assert authz.authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)
    assert authz.config_refusal(ctx, 4, "", AclOperation.ALTER_CONFIGS) is None


def test_config_refusals_name_the_resource_kind():
    ctx = _ctx(_broker(), 32, 4, "User:alice")
    assert authz.config_refusal(ctx, 2, "t", AclOperation.DESCRIBE_CONFIGS)[0] == (
        ErrorCode.topic_authorization_failed)
    assert authz.config_refusal(ctx, 4, "1", AclOperation.DESCRIBE_CONFIGS)[0] == (
        ErrorCode.cluster_authorization_failed)
    assert authz.config_refusal(ctx, 8, "1", AclOperation.ALTER_CONFIGS)[0] == (
        ErrorCode.cluster_authorization_failed)


def test_hosts_come_from_the_peer_address():
    broker = _broker()
    broker.authorizer.core.cache.replace(
        ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
        {AccessControlEntry("User:alice", "10.1.2.3", AclOperation.READ,
                            PermissionType.ALLOW)})
    ctx = _ctx(broker, 1, 12, "User:alice")
    assert authz.authorize(ctx, AclOperation.READ, ResourceType.TOPIC, "t")
    ctx.peer = "10.9.9.9:1"
    assert not authz.authorize(ctx, AclOperation.READ, ResourceType.TOPIC, "t")

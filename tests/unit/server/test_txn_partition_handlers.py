"""The partition-side transaction handlers' authorization and request rules (KIP-98):
WriteTxnMarkers needs ALTER or CLUSTER_ACTION on the cluster, transactional Produce needs
a transactional id the principal may WRITE, DescribeProducers needs READ on the topic."""

from __future__ import annotations

import asyncio
import datetime
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.replication.replica_manager import ProduceResult
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
from weir.server.context import RequestContext
from weir.server.handlers import REGISTRY

CLUSTER = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


class _ReplicaManager:
    def __init__(self) -> None:
        self.partitions: dict = {}
        self.appended: list = []

    def clock(self) -> int:  # the broker's clock, in milliseconds
        return 1_234_567

    async def append(self, acks, timeout_ms, entries, origin=None, verification=None):
        self.appended.append((entries, origin))
        return {tp: ProduceResult(base_offset=0) for tp in entries}

    def append_now(self, acks, timeout_ms, entries, origin=None, verification=None):
        self.appended.append((entries, origin))
        return {tp: ProduceResult(base_offset=0) for tp in entries}, None


def _broker(acls=()):
    core = Authorizer(())
    for pattern, principal, op in acls:
        core.cache.replace(pattern, core.cache.get(pattern) | {
            AccessControlEntry(principal, "*", op, PermissionType.ALLOW)})
    return SimpleNamespace(
        authorizer=SimpleNamespace(core=core), replica_manager=_ReplicaManager(),
        config=SimpleNamespace(get=lambda key: None),
        metadata=SimpleNamespace(partition=lambda tp: None, has_topic=lambda name: True),
        group_coordinator=None)


def _call(broker, api_key: int, version: int, principal: str, **fields):
    request_cls, response_cls = REGISTRY[api_key].schemas(version)
    header = codec.RequestHeader(api_key, version, 1, "test", 0)
    ctx = RequestContext(broker, header, request_cls, response_cls, "10.1.2.3:5555",
                         principal=principal)
    request = codec.build(request_cls, **fields)
    return asyncio.run(REGISTRY[api_key].answer(ctx, request))


MARKERS = [{"producer_id": 7, "producer_epoch": 0, "transaction_result": True,
            "topics": [{"name": "t", "partition_indexes": [0, 1]}], "coordinator_epoch": 0}]


def _marker_errors(response) -> list[int]:
    return [int(p.error_code) for m in response.markers for t in m.topics for p in t.partitions]


def test_write_txn_markers_needs_alter_or_cluster_action():
    refused = _call(_broker(), 27, 1, "User:alice", markers=MARKERS)
    assert _marker_errors(refused) == [ErrorCode.cluster_authorization_failed] * 2
    for op in (AclOperation.CLUSTER_ACTION, AclOperation.ALTER):
        broker = _broker(acls=[(CLUSTER, "User:broker", op)])
        allowed = _call(broker, 27, 1, "User:broker", markers=MARKERS)
        # past authorization: no replica of t hosted here
        assert _marker_errors(allowed) == [ErrorCode.unknown_topic_or_partition] * 2


def test_write_txn_markers_appends_control_batches_as_coordinator():
    from weir.records.batch import parse_header
    from weir.records.control import read_marker
    from weir.storage.producer_state import AppendOrigin

    broker = _broker(acls=[(CLUSTER, "User:broker", AclOperation.CLUSTER_ACTION)])
    hosted = SimpleNamespace(log=object())
    broker.replica_manager.partitions = {TopicPartition("t", 0): hosted,
                                         TopicPartition("t", 1): hosted}
    calls = []
    broker.group_coordinator = SimpleNamespace(
        on_txn_marker=lambda tp, pid, committed: calls.append((tp, pid, committed)))
    response = _call(broker, 27, 1, "User:broker", markers=MARKERS)
    assert _marker_errors(response) == [0, 0]
    (entries, origin), = broker.replica_manager.appended
    assert origin is AppendOrigin.COORDINATOR and len(entries) == 2
    batch = entries[TopicPartition("t", 0)]
    h = parse_header(batch)
    assert h.is_control and h.producer_id == 7 and read_marker(batch).committed
    assert h.max_timestamp == 1_234_567  # the broker's clock, not the wall clock
    assert calls == []  # not __consumer_offsets


def _produce(broker, principal, transactional_id, transactional=True):
    batch = build_batch([b"x"], producer_id=3, producer_epoch=0, base_sequence=0,
                        transactional=transactional)
    r = _call(broker, 0, 9, principal, transactional_id=transactional_id, acks=1,
              timeout=datetime.timedelta(seconds=1),
              topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": batch}]}])
    _, response_cls = REGISTRY[0].schemas(9)
    decoded = codec.decode_body(response_cls, r.body)
    return [int(p.error_code) for t in decoded.responses for p in t.partition_responses]


def test_transactional_produce_needs_a_writable_transactional_id():
    topic = ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)
    txn = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL)
    only_topic = _broker(acls=[(topic, "User:p", AclOperation.WRITE)])
    assert _produce(only_topic, "User:p", "tx") == [ErrorCode.transactional_id_authorization_failed]
    assert _produce(only_topic, "User:p", None) == [ErrorCode.transactional_id_authorization_failed]
    assert not only_topic.replica_manager.appended
    assert _produce(only_topic, "User:p", None, transactional=False) == [0]
    both = _broker(acls=[(topic, "User:p", AclOperation.WRITE),
                         (txn, "User:p", AclOperation.WRITE)])
    assert _produce(both, "User:p", "tx") == [0]


def test_describe_producers_needs_read_on_the_topic():
    r = _call(_broker(), 61, 0, "User:alice",
              topics=[{"name": "t", "partition_indexes": [0, 2]}])
    assert [int(p.error_code) for p in r.topics[0].partitions] == [
        ErrorCode.topic_authorization_failed] * 2

"""Handlers answer in request order, as Kafka builds its responses from the request's
entries in order: AddPartitionsToTxn lists topics and partitions as they were asked for,
whatever the outcome (added, refused, verified)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.protocol import codec
from weir.protocol.errors import ErrorCode
from weir.server.context import RequestContext
from weir.server.handlers import REGISTRY

# Many partitions, neither sorted nor in any hash order, in two topics named out of order.
ASKED = [("zeta", [7, 2, 11, 0, 5, 13, 3]), ("alpha", [9, 1, 12, 4, 8, 6, 10])]


class _TxnCoordinator:
    def __init__(self) -> None:
        self.added: list = []

    async def add_partitions(self, txn_id, pid, epoch, tps):
        self.added.append(set(tps))
        return ErrorCode.none

    def verify_partitions(self, txn_id, pid, epoch, tps):
        # a dict in another order than the request's
        return {tp: ErrorCode.none for tp in sorted(tps)}


def _broker(known: bool = True):
    return SimpleNamespace(
        authorizer=None, txn_coordinator=_TxnCoordinator(),
        config=SimpleNamespace(get=lambda key: None),
        metadata=SimpleNamespace(partition=lambda tp: object() if known else None,
                                 has_topic=lambda name: True))


def _call(broker, version: int, **fields):
    request_cls, response_cls = REGISTRY[24].schemas(version)
    header = codec.RequestHeader(24, version, 1, "test", 0)
    ctx = RequestContext(broker, header, request_cls, response_cls, "10.1.2.3:5555",
                         principal="User:ANONYMOUS")
    return asyncio.run(REGISTRY[24].module.handle(ctx, codec.build(request_cls, **fields)))


def _order(topic_results) -> list[tuple[str, list[int]]]:
    return [(t.name, [int(p.partition_index) for p in t.results_by_partition])
            for t in topic_results]


def _v3(broker, version: int = 3):
    return _call(broker, version, v3_and_below_transactional_id="tx",
                 v3_and_below_producer_id=5, v3_and_below_producer_epoch=0,
                 v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in ASKED])


def test_client_request_answered_in_request_order():
    broker = _broker()
    response = _v3(broker)
    assert _order(response.results_by_topic_v3_and_below) == ASKED
    assert broker.txn_coordinator.added == [
        {TopicPartition(t, p) for t, ps in ASKED for p in ps}]


def test_refused_partitions_answered_in_request_order():
    response = _v3(_broker(known=False), version=1)
    assert _order(response.results_by_topic_v3_and_below) == ASKED
    assert {int(p.partition_error_code) for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {ErrorCode.unknown_topic_or_partition}


def test_repeated_partition_answered_once_at_its_first_place():
    response = _call(_broker(), 3, v3_and_below_transactional_id="tx",
                     v3_and_below_producer_id=5, v3_and_below_producer_epoch=0,
                     v3_and_below_topics=[{"name": "b", "partitions": [3, 1, 3]},
                                          {"name": "a", "partitions": [2]}])
    assert _order(response.results_by_topic_v3_and_below) == [("b", [3, 1]), ("a", [2])]


def test_broker_verification_answered_in_request_order():
    response = _call(_broker(), 4, transactions=[
        {"transactional_id": "tx", "producer_id": 5, "producer_epoch": 0, "verify_only": True,
         "topics": [{"name": t, "partitions": ps} for t, ps in ASKED]}])
    (txn,) = response.results_by_transaction
    order = [(t.name, [int(p.partition_index) for p in t.results_by_partition])
             for t in txn.topic_results]
    assert order == ASKED


class _GroupCoordinator:
    async def delete_offsets(self, group_id, tps):
        # the subscribed topic's partitions first, as the coordinator finds them
        first = {tp: ErrorCode.group_subscribed_to_topic for tp in tps if tp.topic == "subscribed"}
        return ErrorCode.none, first | {tp: ErrorCode.none for tp in tps if tp not in first}


def test_offset_delete_answered_in_request_order():
    broker = SimpleNamespace(authorizer=None, group_coordinator=_GroupCoordinator(),
                             config=SimpleNamespace(get=lambda key: None))
    request_cls, response_cls = REGISTRY[47].schemas(0)
    ctx = RequestContext(broker, codec.RequestHeader(47, 0, 1, "test", 0), request_cls,
                         response_cls, "10.1.2.3:5555", principal="User:ANONYMOUS")
    asked = [("zeta", [3, 1]), ("subscribed", [2, 0]), ("alpha", [5])]
    request = codec.build(request_cls, group_id="g", topics=[
        {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in asked])
    response = asyncio.run(REGISTRY[47].module.handle(ctx, request))
    assert [(t.name, [int(p.partition_index) for p in t.partitions])
            for t in response.topics] == asked
    assert [int(p.error_code) for p in response.topics[1].partitions] == [
        ErrorCode.group_subscribed_to_topic] * 2


class _DeletingReplicaManager:
    async def delete_records(self, offsets, timeout_ms, alive):
        return {tp: (ErrorCode.none, offset) for tp, offset in reversed(offsets.items())}


def test_delete_records_answered_in_request_order():
    broker = SimpleNamespace(authorizer=None, replica_manager=_DeletingReplicaManager(),
                             config=SimpleNamespace(get=lambda key: None),
                             metadata=SimpleNamespace(partition=lambda tp: object(), brokers={}))
    request_cls, response_cls = REGISTRY[21].schemas(2)
    ctx = RequestContext(broker, codec.RequestHeader(21, 2, 1, "test", 0), request_cls,
                         response_cls, "10.1.2.3:5555", principal="User:ANONYMOUS")
    request = codec.build(request_cls, timeout_ms=1000, topics=[
        {"name": t, "partitions": [{"partition_index": p, "offset": 10 * p} for p in ps]}
        for t, ps in ASKED])
    response = asyncio.run(REGISTRY[21].module.handle(ctx, request))
    assert [(t.name, [int(p.partition_index) for p in t.partitions])
            for t in response.topics] == ASKED
    assert all(int(p.low_watermark) == 10 * int(p.partition_index)
               for t in response.topics for p in t.partitions)

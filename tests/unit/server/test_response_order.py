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

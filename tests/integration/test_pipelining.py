"""Requests pipelined on one connection are answered in order; produces keep their order."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from kio.index import load_request_schema

from tests.integration.clients import create_topic
from weir.protocol import codec
from weir.protocol.client import BrokerConnection
from weir.records.builder import build_batch

pytestmark = pytest.mark.integration


def test_pipelined_produces_and_metadata_in_order(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name)
    slot = cluster1.brokers[0]

    async def run():
        conn = BrokerConnection(slot.host, slot.port)
        await conn.connect()
        try:
            produce_cls = load_request_schema(0, 9)
            metadata_cls = load_request_schema(3, 12)

            def produce(i: int):
                return codec.build(produce_cls, acks=-1,
                                   timeout=datetime.timedelta(seconds=30),
                                   topic_data=[{"name": topic_name, "partition_data": [
                                       {"index": 0, "records": build_batch([b"%d" % i] * 3)}]}])

            requests = [produce(i) for i in range(20)]
            requests.insert(10, codec.build(metadata_cls, topics=None,
                                            allow_auto_topic_creation=False))
            # all sent before any answer is read: the client pipelines them
            return await asyncio.gather(*(conn.request(r) for r in requests))
        finally:
            await conn.close()

    responses = asyncio.run(asyncio.wait_for(run(), 60))
    offsets = [r.responses[0].partition_responses[0].base_offset
               for i, r in enumerate(responses) if i != 10]
    assert offsets == [3 * i for i in range(20)]
    assert responses[10].topics  # the metadata answer sits at its place

"""Metadata handler: a topic's partitions are built once per metadata update (memo) and the
memo never outlives an UpdateMetadata."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from weir.protocol import codec
from weir.server.context import RequestContext
from weir.server.handlers import REGISTRY
from weir.server.metadata_cache import BrokerMeta, MetadataCache, PartitionMeta

METADATA = 3
TID = uuid.uuid4()


def _cache(leader: int) -> MetadataCache:
    cache = MetadataCache()
    brokers = [BrokerMeta(b, "127.0.0.1", 9090 + b, endpoints=(("PLAINTEXT", "127.0.0.1",
                                                                  9090 + b),))
               for b in (1, 2, 3)]
    cache.update(1, 1, brokers, [("t", TID, p, PartitionMeta(leader, 1, (1, 2, 3), (1, 2, 3)))
                                 for p in range(50)])
    return cache


def _leaders(cache: MetadataCache, version: int = 12) -> dict[int, int]:
    broker = SimpleNamespace(metadata=cache, authorizer=None, cluster_id="c",
                             config=SimpleNamespace(auto_create_topics_enable=False,
                                                    get=lambda key: None))
    request_cls, response_cls = REGISTRY[METADATA].schemas(version)
    header = codec.RequestHeader(METADATA, version, 1, "test", 0)
    ctx = RequestContext(broker, header, request_cls, response_cls, "10.1.2.3:5555",
                         listener="PLAINTEXT")
    request = codec.build(request_cls, topics=[{"name": "t"}], allow_auto_topic_creation=False)
    response = asyncio.run(REGISTRY[METADATA].module.handle(ctx, request))
    [topic] = response.topics
    return {p.partition_index: p.leader_id for p in topic.partitions}


def test_partitions_are_memoised_per_update_and_version():
    cache = _cache(leader=2)
    assert _leaders(cache) == {p: 2 for p in range(50)}
    assert len(cache.described) == 1
    memo = next(iter(cache.described.values()))
    assert _leaders(cache) == {p: 2 for p in range(50)}
    assert next(iter(cache.described.values())) is memo  # reused, not rebuilt
    assert _leaders(cache, version=1) == {p: 2 for p in range(50)}
    assert len(cache.described) == 2  # one per response version


def test_an_update_invalidates_the_memo():
    cache = _cache(leader=2)
    _leaders(cache)
    cache.update(1, 1, list(cache.brokers.values()),
                 [("t", TID, 7, PartitionMeta(3, 2, (3, 1), (1, 2, 3)))])
    assert _leaders(cache)[7] == 3
    assert _leaders(cache)[6] == 2

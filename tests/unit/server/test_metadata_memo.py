"""Metadata handler: an answer is kept encoded until the next UpdateMetadata, and its
partitions' encodings until an update changes them (tests/unit/server/test_metadata_splice.py)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from tests.unit.server.metadata_helpers import metadata_context
from weir.protocol import codec
from weir.server.context import RawResponse
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


def _answer(cache: MetadataCache, version: int = 12, topics=("t",), authorizer=None):
    """The handler's answer (decoded if it came encoded) and what it returned."""
    ctx, request_cls = metadata_context(cache, version, authorizer)
    request = codec.build(request_cls, allow_auto_topic_creation=False,
                          topics=None if topics is None else [{"name": t} for t in topics])
    returned = asyncio.run(REGISTRY[METADATA].module.handle(ctx, request))
    if isinstance(returned, RawResponse):
        return codec.decode_body(ctx.response_cls, returned.body), returned
    return returned, returned


def _leaders(cache: MetadataCache, version: int = 12) -> dict[int, int]:
    response, _ = _answer(cache, version)
    [topic] = response.topics
    return {p.partition_index: p.leader_id for p in topic.partitions}


def test_partition_encodings_are_kept_per_version():
    cache = _cache(leader=2)
    assert _leaders(cache) == {p: 2 for p in range(50)}
    assert len(cache.partition_bytes) == 1
    [kept] = cache.partition_bytes.values()
    first = dict(kept["t"])
    cache.encoded.clear()  # asked again: spliced again from the same encodings
    assert _leaders(cache) == {p: 2 for p in range(50)}
    assert all(kept["t"][i] is first[i] for i in first)
    assert _leaders(cache, version=1) == {p: 2 for p in range(50)}
    assert len(cache.partition_bytes) == 2  # one per response version


def test_an_update_invalidates_the_memo():
    cache = _cache(leader=2)
    _leaders(cache)
    cache.update(1, 1, list(cache.brokers.values()),
                 [("t", TID, 7, PartitionMeta(3, 2, (3, 1), (1, 2, 3)))])
    assert _leaders(cache)[7] == 3
    assert _leaders(cache)[6] == 2


def test_an_answer_is_kept_encoded_until_the_next_update():
    """The same request gets the same bytes, not encoded again; each request shape
    (version, topics named or all) has its own; an UpdateMetadata drops them all."""
    cache = _cache(leader=2)
    first, raw = _answer(cache)
    assert isinstance(raw, RawResponse) and len(cache.encoded) == 1
    again, raw_again = _answer(cache)
    assert raw_again.body is raw.body  # sent again as it is
    assert again == first
    every, raw_all = _answer(cache, topics=None)
    assert raw_all.body is not raw.body and len(cache.encoded) == 2
    assert [t.name for t in every.topics] == ["t"]
    _answer(cache, version=1)
    assert len(cache.encoded) == 3
    cache.update(1, 1, list(cache.brokers.values()),
                 [("t", TID, 7, PartitionMeta(3, 2, (3, 1), (1, 2, 3)))])
    assert not cache.encoded
    assert _leaders(cache)[7] == 3


def test_answers_that_depend_on_more_than_the_cache_are_not_kept():
    """An unknown topic (it may be auto-created, and its error changes without an
    update), and any answer under an authorizer (it depends on the principal)."""
    cache = _cache(leader=2)
    response, raw = _answer(cache, topics=("t", "missing"))
    assert not isinstance(raw, RawResponse) and not cache.encoded
    assert [t.error_code for t in response.topics] == [0, 3]  # UNKNOWN_TOPIC_OR_PARTITION

    allow_all = SimpleNamespace(core=SimpleNamespace(authorize=lambda *args: True))
    response, raw = _answer(cache, authorizer=allow_all)
    assert [t.error_code for t in response.topics] == [0]
    assert not isinstance(raw, RawResponse) and not cache.encoded

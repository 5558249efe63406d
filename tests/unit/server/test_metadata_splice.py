"""Metadata answers spliced from kept partition encodings (weir.server.metadata_encoding):
byte for byte the answer encoded whole, at every version, and an UpdateMetadata drops only
the encodings it makes stale."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from tests.unit.server.metadata_helpers import metadata_context
from weir.protocol import codec
from weir.server.context import RawResponse
from weir.server.handlers import REGISTRY
from weir.server.metadata_cache import BrokerMeta, MetadataCache, PartitionMeta

METADATA = 3
VERSIONS = range(13)


def _brokers(ids) -> list[BrokerMeta]:
    return [BrokerMeta(b, "127.0.0.1", 9090 + b, endpoints=(("PLAINTEXT", "127.0.0.1",
                                                             9090 + b),)) for b in ids]


def _state(rng: random.Random) -> PartitionMeta:
    replicas = tuple(rng.sample([1, 2, 3, 4], 3))
    leader = rng.choice([*replicas, -1])
    isr = tuple(r for r in replicas if rng.random() < 0.8) or replicas[:1]
    offline = tuple(r for r in replicas if rng.random() < 0.1)
    return PartitionMeta(leader, rng.randrange(40), isr, replicas, offline, rng.randrange(9))


def _cache(rng: random.Random, topics: dict[str, int]) -> MetadataCache:
    cache = MetadataCache()
    cache.update(1, 1, _brokers((1, 2, 3)), [
        (t, uuid.uuid4(), p, _state(rng)) for t, n in topics.items() for p in range(n)])
    return cache


def _both(cache: MetadataCache, version: int, topics=None) -> tuple[bytes, bytes]:
    """(the handler's spliced body, the same answer built and encoded whole)."""
    module = REGISTRY[METADATA].module
    ctx, request_cls = metadata_context(cache, version)
    request = codec.build(request_cls, allow_auto_topic_creation=False,
                          topics=None if topics is None else [{"name": t} for t in topics])
    cache.encoded.clear()
    returned = asyncio.run(module.handle(ctx, request))
    assert isinstance(returned, RawResponse)
    whole, reusable = asyncio.run(module._answer(ctx, request))
    assert reusable
    return returned.body, codec.encode_body(whole)


@pytest.mark.parametrize("version", VERSIONS)
def test_spliced_answer_is_the_whole_encoding(version):
    rng = random.Random(version)
    cache = _cache(rng, {"a": 7, "b": 1, "__c": 130})
    spliced, whole = _both(cache, version)
    assert spliced == whole
    spliced, whole = _both(cache, version, topics=("b", "a"))
    assert spliced == whole


@pytest.mark.parametrize("version", [0, 1, 9, 12])
def test_after_updates_only_stale_encodings_are_redone(version):
    rng = random.Random(100 + version)
    cache = _cache(rng, {"a": 60, "b": 40})
    _both(cache, version)
    [kept] = cache.partition_bytes.values()
    before = {t: dict(parts) for t, parts in kept.items()}
    # a leader move of some partitions, live brokers unchanged
    moved = [("a", None, p, _state(rng)) for p in (3, 17, 59)]
    cache.update(1, 2, _brokers((1, 2, 3)), moved)
    spliced, whole = _both(cache, version)
    assert spliced == whole
    for t, parts in kept.items():
        for index, encoded in parts.items():
            if (t, index) not in {("a", 3), ("a", 17), ("a", 59)}:
                assert encoded is before[t][index]
    # broker 3 goes: partitions it leads (and at v0, where a dead replica is an error,
    # those it replicates) are encoded again, the others are kept
    keep = {(t, i) for t, parts in cache.topics.items() for i, p in parts.items()
            if p.leader != 3 and (version > 0 or 3 not in p.replicas)}
    snapshot = {t: dict(parts) for t, parts in kept.items()}
    cache.update(1, 3, _brokers((1, 2)), [])
    assert all(i in kept[t] for t, i in keep)
    assert not any(i in kept[t] for t in kept for i in cache.topics[t]
                   if (t, i) not in keep)
    spliced, whole = _both(cache, version)
    assert spliced == whole
    assert all(kept[t][i] is snapshot[t][i] for t, i in keep)
    # and back, and a topic deleted
    cache.update(1, 4, _brokers((1, 2, 3, 4)),
                 [("b", None, p, PartitionMeta(-2, 0, (), ())) for p in range(40)])
    spliced, whole = _both(cache, version)
    assert spliced == whole
    assert "b" not in cache.topics

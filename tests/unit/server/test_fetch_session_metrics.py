"""Kafka's FetchSessionCache metrics on /metrics, read from the broker's session cache."""

from __future__ import annotations

import random
from types import SimpleNamespace

from weir.server.fetch_session import FetchSessionCache, PartitionRequest
from weir.server.metrics import MetricsSource, broker_state, collect, parse, render
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager


def _open(cache: FetchSessionCache, partitions: int, now: int, follower: bool = False) -> int:
    reqs = [PartitionRequest("t", None, i, 0, 100) for i in range(partitions)]
    ctx = cache.new_context(12, 0, 0, follower, reqs, [], now)
    answers = [(r, SimpleNamespace(high_watermark=0, log_start_offset=0)) for r in reqs]
    return ctx.respond(answers, now)[1]


def test_fetch_session_cache_metrics(tmp_path):
    cache = FetchSessionCache(max_entries=2, rng=random.Random(1))
    _open(cache, 1, now=0)
    _open(cache, 2, now=0)
    _open(cache, 3, now=1, follower=True)  # evicts the 1-partition consumer session
    rm = SimpleNamespace(partitions={}, log_manager=LogManager([tmp_path], LogConfig()))
    source = MetricsSource(replica_manager=rm, log_manager=rm.log_manager,
                           min_isr=lambda _t: 1, state=lambda: broker_state(False, 1),
                           controller=lambda: None, fetch_sessions=cache)
    samples = parse(render(collect(source)))
    prefix = "kafka_server_fetchsessioncache_"
    assert samples[(prefix + "numincrementalfetchsessions", ())] == 2
    assert samples[(prefix + "numincrementalfetchpartitionscached", ())] == 5
    assert samples[(prefix + "incrementalfetchsessionevictions_total", ())] == 1

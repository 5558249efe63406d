"""The replica fetcher keeps an incremental fetch session with its leader (KIP-227): after
the first full request it names only partitions whose fetch offset changed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.replication.fetcher import (
    FETCHING,
    FetcherSettings,
    FetchState,
    LeaderEndpoint,
    ReplicaFetcher,
)
from weir.storage.log import Log, LogConfig

TPS = [TopicPartition("t", 0), TopicPartition("t", 1)]


class FakeLeader:
    """Answers Fetch requests with scripted (error, session id, {partition: records})."""

    def __init__(self, answers) -> None:
        self.answers = answers
        self.requests: list = []

    async def request(self, request, _timeout_s):
        self.requests.append(request)
        error, session_id, records = self.answers.pop(0)
        return SimpleNamespace(error_code=error, session_id=session_id, responses=[
            SimpleNamespace(topic="t", partitions=[
                SimpleNamespace(partition_index=p, error_code=ErrorCode.none,
                                high_watermark=10, log_start_offset=0, records=data,
                                diverging_epoch=None)
                for p, data in records.items()])])


def setup(tmp_path):
    logs = {tp: Log.open(tmp_path / f"t-{tp.partition}", LogConfig.from_dict({}),
                         clean_shutdown=False, now_ms=0) for tp in TPS}
    throttles = SimpleNamespace(follower_throttled=lambda *a: False,
                                record_follower=lambda *a: None)
    rm = SimpleNamespace(follower_log=logs.get, partitions={}, throttles=throttles,
                         on_follower_fetched=lambda *a: None)
    f = ReplicaFetcher(LeaderEndpoint(1, "localhost", 1), rm, FetcherSettings(replica_id=2))
    for tp in TPS:
        f.partitions[tp] = FetchState(tp, leader_epoch=0, fetch_offset=0, state=FETCHING)
    return f, logs


def sent(request) -> tuple[int, int, set[int], set[int]]:
    return (int(request.session_id), int(request.session_epoch),
            {int(p.partition) for t in request.topics for p in t.partitions},
            {int(p) for t in request.forgotten_topics_data for p in t.partitions})


def test_follower_fetches_are_incremental_after_the_first(tmp_path):
    f, logs = setup(tmp_path)
    leader = FakeLeader([
        (ErrorCode.none, 41, {0: b"", 1: b""}),
        (ErrorCode.none, 41, {0: build_batch([b"x", b"y"])}),
        (ErrorCode.none, 41, {}),
        (ErrorCode.invalid_fetch_session_epoch, 0, {}),
        (ErrorCode.none, 42, {0: b"", 1: b""}),
    ])
    for _ in range(5):
        asyncio.run(f._fetch(leader))
    assert [sent(r) for r in leader.requests] == [
        (0, 0, {0, 1}, set()),     # full: creates the session
        (41, 1, set(), set()),     # nothing changed: no partition named
        (41, 2, {0}, set()),       # partition 0 moved to offset 2
        (41, 3, set(), set()),     # the leader says the epoch is wrong...
        (41, 0, {0, 1}, set()),    # ... so the next one is full, closing session 41
    ]
    assert logs[TPS[0]].log_end_offset == 2


def test_a_partition_no_longer_followed_is_forgotten(tmp_path):
    f, _logs = setup(tmp_path)
    leader = FakeLeader([(ErrorCode.none, 7, {0: b"", 1: b""}), (ErrorCode.none, 7, {})])
    asyncio.run(f._fetch(leader))
    f.remove(TPS[1])
    asyncio.run(f._fetch(leader))
    assert sent(leader.requests[1]) == (7, 1, set(), {1})

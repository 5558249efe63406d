"""The remote leader endpoint keeps an incremental fetch session with its leader (KIP-227):
after the first full request it names only partitions whose fetch offset changed.  Here the
real fetcher drives a RemoteLeaderEndPoint whose connection is a scripted fake."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.coordination.codecs import topic_id_to_str
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.replication.fetcher import (
    FetcherSettings,
    PartitionFetchState,
    ReplicaFetcher,
    ReplicaState,
)
from weir.replication.leader_endpoint import BrokerEndPoint, RemoteLeaderEndPoint
from weir.storage.log import Log, LogConfig

TPS = [TopicPartition("t", 0), TopicPartition("t", 1)]


class FakeLeader:
    """Answers Fetch requests with scripted (error, session id, {partition: records}); a
    partition's records may be an ErrorCode instead (that partition's error).  Topic "t"
    is named as the request names it: by name (v12) or by ``topic_id`` (v13)."""

    connected = True

    def __init__(self, answers, topic_id: uuid.UUID | None = None) -> None:
        self.answers = answers
        self.topic_id = topic_id
        self.requests: list = []

    async def close(self) -> None:
        self.connected = False

    async def request(self, request, _timeout_s):
        self.requests.append(request)
        error, session_id, records = self.answers.pop(0)
        naming = {"topic_id": self.topic_id} if int(request.__version__) >= 13 \
            else {"topic": "t"}
        return SimpleNamespace(error_code=error, session_id=session_id, responses=[
            SimpleNamespace(**naming, partitions=[
                SimpleNamespace(partition_index=p,
                                error_code=data if isinstance(data, ErrorCode) else ErrorCode.none,
                                high_watermark=10, log_start_offset=0,
                                records=b"" if isinstance(data, ErrorCode) else data,
                                diverging_epoch=None)
                for p, data in records.items()])])


def setup(tmp_path, leader: FakeLeader, topic_id: uuid.UUID | None = None):
    logs = {tp: Log.open(tmp_path / f"t-{tp.partition}", LogConfig.from_dict({}),
                         clean_shutdown=False, now_ms=0) for tp in TPS}
    for lg in logs.values():
        lg.topic_id = None if topic_id is None else topic_id_to_str(topic_id)
    view = SimpleNamespace(follower_log=logs.get, is_in_sync=lambda _tp: True,
                           on_follower_fetched=lambda *a: None)
    endpoint = RemoteLeaderEndPoint(BrokerEndPoint(1, "localhost", 1), "test")
    endpoint._conn = leader  # as if connected
    f = ReplicaFetcher(endpoint, view, FetcherSettings(replica_id=2))
    for tp in TPS:
        f.partitions[tp] = PartitionFetchState(tp, leader_epoch=0, fetch_offset=0,
                                               state=ReplicaState.FETCHING)
    return f, logs


def sent(request) -> tuple[int, int, set[int], set[int]]:
    return (int(request.session_id), int(request.session_epoch),
            {int(p.partition) for t in request.topics for p in t.partitions},
            {int(p) for t in request.forgotten_topics_data for p in t.partitions})


def test_follower_fetches_are_incremental_after_the_first(tmp_path):
    leader = FakeLeader([
        (ErrorCode.none, 41, {0: b"", 1: b""}),
        (ErrorCode.none, 41, {0: build_batch([b"x", b"y"])}),
        (ErrorCode.none, 41, {}),
        (ErrorCode.invalid_fetch_session_epoch, 0, {}),
        (ErrorCode.none, 42, {0: b"", 1: b""}),
    ])
    f, logs = setup(tmp_path, leader)
    for _ in range(5):
        asyncio.run(f.fetch())
    assert [sent(r) for r in leader.requests] == [
        (0, 0, {0, 1}, set()),     # full: creates the session
        (41, 1, set(), set()),     # nothing changed: no partition named
        (41, 2, {0}, set()),       # partition 0 moved to offset 2
        (41, 3, set(), set()),     # the leader says the epoch is wrong...
        (41, 0, {0, 1}, set()),    # ... so the next one is full, closing session 41
    ]
    assert logs[TPS[0]].log_end_offset == 2


def test_a_partition_no_longer_followed_is_forgotten(tmp_path):
    leader = FakeLeader([(ErrorCode.none, 7, {0: b"", 1: b""}), (ErrorCode.none, 7, {})])
    f, _logs = setup(tmp_path, leader)
    asyncio.run(f.fetch())
    f.remove(TPS[1])
    asyncio.run(f.fetch())
    assert sent(leader.requests[1]) == (7, 1, set(), {1})


def test_a_lost_answer_makes_the_next_fetch_full(tmp_path):
    """FetchSessionHandler.handleError: after a connection loss the endpoint is reset and
    the next request is full (epoch 0 of the same session id, which closes it)."""
    leader = FakeLeader([(ErrorCode.none, 9, {0: b"", 1: b""})])
    f, _logs = setup(tmp_path, leader)
    asyncio.run(f.fetch())
    asyncio.run(f.leader.reset())
    assert not leader.connected
    again = FakeLeader([(ErrorCode.none, 9, {0: b"", 1: b""})])
    f.leader._conn = again
    asyncio.run(f.fetch())
    assert sent(again.requests[0]) == (9, 0, {0, 1}, set())


def test_followers_name_topics_by_id_when_their_logs_have_one(tmp_path):
    """KIP-516: with topic ids on every followed log the follower fetches v13, naming the
    topic by id in the session's partitions and in the forgotten ones, and maps the
    leader's answer (by id) back to its partitions."""
    tid = uuid.uuid4()
    leader = FakeLeader([(ErrorCode.none, 5, {0: b"", 1: b""}),
                         (ErrorCode.none, 5, {1: build_batch([b"z"])})], topic_id=tid)
    f, logs = setup(tmp_path, leader, topic_id=tid)
    asyncio.run(f.fetch())
    f.remove(TPS[0])
    asyncio.run(f.fetch())
    first, second = leader.requests
    assert [int(r.__version__) for r in leader.requests] == [13, 13]
    assert [t.topic_id for t in first.topics] == [tid]
    assert [(t.topic_id, list(t.partitions)) for t in second.forgotten_topics_data] == [
        (tid, [0])]
    assert logs[TPS[1]].log_end_offset == 1


def test_a_follower_log_without_topic_id_fetches_by_name(tmp_path):
    leader = FakeLeader([(ErrorCode.none, 5, {0: b"", 1: b""})])
    f, _logs = setup(tmp_path, leader)
    asyncio.run(f.fetch())
    assert int(leader.requests[0].__version__) == 12
    assert [t.topic for t in leader.requests[0].topics] == ["t"]


def test_an_inconsistent_topic_id_answer_backs_the_partition_off(tmp_path):
    """The leader's log belongs to another topic of the same name: nothing is appended and
    the partition waits replica.fetch.backoff.ms (Kafka's partitionsWithError)."""
    tid = uuid.uuid4()
    leader = FakeLeader([(ErrorCode.none, 5, {0: ErrorCode.inconsistent_topic_id,
                                              1: build_batch([b"a"])})], topic_id=tid)
    f, logs = setup(tmp_path, leader, topic_id=tid)
    asyncio.run(f.fetch())
    assert f.partitions[TPS[0]].is_delayed(f.clock())
    assert not f.partitions[TPS[1]].is_delayed(f.clock())
    assert (logs[TPS[0]].log_end_offset, logs[TPS[1]].log_end_offset) == (0, 1)

"""The replica fetcher's truncation states against scripted leader answers (no sockets): a
fake connection answers OffsetForLeaderEpoch, the follower's log is a real one.  Kafka's
AbstractFetcherThread is the reference (truncateToEpochEndOffsets, truncateOnFetchResponse,
updateFetchOffsetAndMaybeMarkTruncationComplete)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch
from weir.replication.fetcher import (
    DELAYED,
    FETCHING,
    TRUNCATING,
    FetcherSettings,
    FetchState,
    LeaderEndpoint,
    ReplicaFetcher,
)
from weir.storage.log import Log, LogConfig

TP = TopicPartition("t", 0)


class FakeConn:
    """Answers each OffsetForLeaderEpoch with the next scripted (error, epoch, end offset)."""

    def __init__(self, answers: list[tuple[ErrorCode, int, int]]) -> None:
        self.answers = answers
        self.asked: list[int] = []  # the leader_epoch of each request

    async def request(self, request, _timeout_s):
        part = request.topics[0].partitions[0]
        self.asked.append(int(part.leader_epoch))
        error, epoch, end = self.answers.pop(0)
        return SimpleNamespace(topics=[SimpleNamespace(topic=TP.topic, partitions=[
            SimpleNamespace(partition=TP.partition, error_code=error, leader_epoch=epoch,
                            end_offset=end)])])


def follower_log(path: Path) -> Log:
    """Offsets 0-1 in epoch 0 and 2-3 in epoch 2 (an epoch the leader never had)."""
    log = Log.open(path / "t-0", LogConfig.from_dict({}), clean_shutdown=False, now_ms=0)
    for epoch in (0, 0, 2, 2):
        if log.epoch_cache.latest_epoch < epoch:
            log.epoch_cache.assign(epoch, log.log_end_offset)
        log.append_as_leader(build_batch([b"v"]), epoch, now_ms=0)
    return log


def fetcher(log: Log, backoff_ms: int = 0) -> tuple[ReplicaFetcher, FetchState]:
    rm = SimpleNamespace(follower_log=lambda tp: log if tp == TP else None)
    f = ReplicaFetcher(LeaderEndpoint(1, "localhost", 1), rm,
                       FetcherSettings(replica_id=2, backoff_ms=backoff_ms))
    st = FetchState(TP, leader_epoch=3, fetch_offset=log.log_end_offset)
    f.partitions[TP] = st  # as ReplicaFetcher.add, without starting its task
    return f, st


def test_walk_back_moves_the_fetch_offset_and_asks_again(tmp_path):
    """truncateToEpochEndOffsets (KIP-279): an answer that is not final truncates, sets the
    fetch offset to the truncation point, stays truncating and asks again with the
    follower's now-latest epoch; the final answer completes truncation there."""
    log = follower_log(tmp_path)
    f, st = fetcher(log)
    # The leader has epochs 0 (offsets 0-1) and 1 (from 2 to 5): asked about epoch 2, it
    # answers epoch 1 ending at 5, which the follower never had.
    conn = FakeConn([(ErrorCode.none, 1, 5), (ErrorCode.none, 0, 2)])
    asyncio.run(f._truncate(conn))
    assert log.log_end_offset == 2 and log.epoch_cache.latest_epoch == 0
    assert (st.state, st.fetch_offset) == (TRUNCATING, 2)
    asyncio.run(f._truncate(conn))
    assert conn.asked == [2, 0]
    assert (st.state, st.fetch_offset) == (FETCHING, 2)


def test_offset_for_leader_epoch_error_retries_truncation(tmp_path):
    """truncateToEpochEndOffsets / handlePartitionsWithErrors: an OffsetForLeaderEpoch error
    delays the partition, which then asks again; it never fetches untruncated."""
    log = follower_log(tmp_path)
    f, st = fetcher(log)
    conn = FakeConn([(ErrorCode.not_leader_or_follower, -1, -1), (ErrorCode.none, 0, 2)])
    asyncio.run(f._truncate(conn))
    assert st.state == DELAYED
    assert f._ready(FETCHING) == [] and f._ready(TRUNCATING) == [st]  # back-off is 0 ms
    asyncio.run(f._truncate(conn))
    assert conn.asked == [2, 2]
    assert (st.state, st.fetch_offset, log.log_end_offset) == (FETCHING, 2, 2)


def test_fetch_errors_resume_fetching(tmp_path):
    """delayPartitions: a fetching partition delayed after an error resumes fetching."""
    log = follower_log(tmp_path)
    f, st = fetcher(log)
    st.state = FETCHING
    f._delay(st, "test")
    assert f._ready(FETCHING) == [st]


def test_diverging_epoch_walk_back_moves_the_fetch_offset(tmp_path):
    """truncateOnFetchResponse (KIP-320): a diverging epoch in a fetch response truncates and
    the next fetch starts at the truncation point with the follower's latest epoch, also
    when the walk back is not final."""
    log = follower_log(tmp_path)
    f, st = fetcher(log)
    st.state = FETCHING
    part = SimpleNamespace(error_code=ErrorCode.none, records=None, high_watermark=2,
                           log_start_offset=0,
                           diverging_epoch=SimpleNamespace(epoch=1, end_offset=5))
    asyncio.run(f._apply_fetched(st, part))
    assert log.log_end_offset == 2
    assert (st.state, st.fetch_offset) == (FETCHING, 2)


def test_answer_for_a_replaced_partition_state_is_ignored(tmp_path):
    """truncateToEpochEndOffsets: an answer is applied only if the partition is still
    fetched with the leader epoch the request was made for."""
    log = follower_log(tmp_path)
    f, _ = fetcher(log)

    class Replacing(FakeConn):
        async def request(self, request, timeout_s):
            out = await super().request(request, timeout_s)
            f.partitions[TP] = FetchState(TP, leader_epoch=4, fetch_offset=4)  # re-added
            return out

    asyncio.run(f._truncate(Replacing([(ErrorCode.none, 0, 1)])))
    assert log.log_end_offset == 4
    assert f.partitions[TP].state == TRUNCATING

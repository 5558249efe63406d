"""The replica fetcher against an in-memory leader (no sockets): real leader and follower
logs, a settable clock.  Kafka's AbstractFetcherThread is the reference
(truncateToEpochEndOffsets, truncateOnFetchResponse, handleOutOfRangeError,
updateFetchOffsetAndMaybeMarkTruncationComplete, delayPartitions; AbstractFetcherThreadTest
drives it the same way through a MockLeaderEndPoint)."""

from __future__ import annotations

import asyncio
import time

from tests.unit.replication.leader_fakes import (
    Clock,
    Followed,
    InMemoryLeader,
    all_bytes,
    open_log,
    write,
)
from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode
from weir.replication.fetcher import (
    FetcherSettings,
    PartitionFetchState,
    ReplicaFetcher,
    ReplicaFetcherManager,
    ReplicaState,
)
from weir.replication.leader_endpoint import BrokerEndPoint, EpochEndOffset
from weir.replication.throttle import FOLLOWER_REPLICAS, ReplicationThrottles

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TRUNCATING, FETCHING = ReplicaState.TRUNCATING, ReplicaState.FETCHING


def diverged(tmp_path):
    """Leader: epoch 0 at offsets 0-1, epoch 1 at 2-5 (current epoch 3).  Follower: epoch 0
    at 0-1, then 2-3 in epoch 2, an epoch the leader never had."""
    leader_log, follower_log = open_log(tmp_path / "leader" / "t-0"), open_log(tmp_path / "follower" / "t-0")
    write(leader_log, [0, 0], b"common")
    write(follower_log, [0, 0], b"common")
    write(leader_log, [1, 1, 1, 1], b"leader")
    leader_log.epoch_cache.assign(3, leader_log.log_end_offset)
    leader_log.update_high_watermark(6)
    write(follower_log, [2, 2], b"follower")
    return leader_log, follower_log


def make(tmp_path, backoff_ms: int = 1000, state=TRUNCATING, fetch_offset=None, quota=None):
    leader_log, follower_log = diverged(tmp_path)
    leader = InMemoryLeader({TP: leader_log}, {TP: 3})
    logs = Followed({TP: follower_log})
    clock = Clock()
    f = ReplicaFetcher(leader, logs, FetcherSettings(replica_id=2, backoff_ms=backoff_ms),
                       quota=quota, clock=clock)
    offset = follower_log.log_end_offset if fetch_offset is None else fetch_offset
    st = PartitionFetchState(TP, leader_epoch=3, fetch_offset=offset, state=state)
    f.partitions[TP] = st  # as ReplicaFetcher.add, without starting its task
    return f, st, leader, logs, clock


def run(coro):
    return asyncio.run(coro)


def test_truncation_walks_back_through_epochs_then_fetches_the_leaders_log(tmp_path):
    """truncateToEpochEndOffsets (KIP-279): asked about epoch 2, the leader answers epoch 1
    (ending at 6), which the follower never had: it truncates to the end of its own older
    epoch (2), stays truncating and asks again about epoch 0; that answer is final."""
    f, st, leader, logs, _ = make(tmp_path)
    follower_log = logs.logs[TP]
    run(f.truncate())
    assert follower_log.log_end_offset == 2 and follower_log.epoch_cache.latest_epoch == 0
    assert (st.state, st.fetch_offset) == (TRUNCATING, 2)
    run(f.truncate())
    assert [q[TP] for q in leader.epoch_questions] == [(3, 2), (3, 0)]
    assert (st.state, st.fetch_offset) == (FETCHING, 2)
    run(f.fetch())
    assert all_bytes(follower_log) == all_bytes(leader.logs[TP])
    assert follower_log.high_watermark == 6 and st.lag == 0
    assert logs.fetched == [(TP, 6, 0)]


def test_offset_for_leader_epoch_error_backs_off_and_keeps_truncating(tmp_path):
    """handlePartitionsWithErrors / delayPartitions: an OffsetForLeaderEpoch error delays the
    partition for the back-off, in its truncating state: it never fetches untruncated."""
    f, st, leader, _, clock = make(tmp_path)
    leader.errors[TP] = ErrorCode.not_leader_or_follower
    run(f.truncate())
    assert st.state is TRUNCATING and st.is_delayed(clock())
    assert f._ready(FETCHING) == [] and f._ready(TRUNCATING) == []
    clock.now += 999
    assert f._ready(TRUNCATING) == []
    clock.now += 1
    del leader.errors[TP]
    assert f._ready(TRUNCATING) == [st]
    run(f.truncate())
    run(f.truncate())
    assert (st.state, st.fetch_offset) == (FETCHING, 2)


def test_fetch_error_delays_and_then_resumes_fetching(tmp_path):
    """A fenced epoch in a fetch answer (the controller's next LeaderAndIsr is on its way):
    delayed for the back-off, then fetching again from the same offset."""
    f, st, leader, logs, clock = make(tmp_path, state=FETCHING, fetch_offset=4)
    leader.epoch[TP] = 4
    run(f.fetch())
    assert st.state is FETCHING and st.is_delayed(clock()) and st.fetch_offset == 4
    run(f.fetch())
    assert len(leader.fetches) == 1  # nothing was ready to fetch
    clock.now += 1000
    assert f._ready(FETCHING) == [st]
    assert logs.logs[TP].log_end_offset == 4


def test_diverging_epoch_in_a_fetch_answer_truncates_and_keeps_fetching(tmp_path):
    """truncateOnFetchResponse (KIP-320): the leader reports a diverging epoch; the follower
    truncates (here a walk back that is not final) and keeps fetching: the next fetch's last
    fetched epoch lets the leader report the next divergence or send records."""
    f, st, leader, logs, _ = make(tmp_path, state=FETCHING)
    follower_log = logs.logs[TP]
    run(f.fetch())
    assert leader.fetches[0][TP].last_fetched_epoch == 2
    assert follower_log.log_end_offset == 2
    assert (st.state, st.fetch_offset) == (FETCHING, 2)
    run(f.fetch())
    assert leader.fetches[1][TP].last_fetched_epoch == 0
    assert all_bytes(follower_log) == all_bytes(leader.logs[TP])
    assert leader.epoch_questions == []


def test_out_of_range_below_the_leaders_log_start_starts_over_there(tmp_path):
    """handleOutOfRangeError: the leader deleted records past our log end; the follower
    asks for the leader's earliest offset and restarts its log there."""
    leader_log, follower_log = open_log(tmp_path / "leader" / "t-0"), open_log(tmp_path / "follower" / "t-0")
    write(leader_log, [0] * 6)
    leader_log.update_high_watermark(6)
    leader_log.delete_records_before(4)
    leader = InMemoryLeader({TP: leader_log}, {TP: 0})
    f = ReplicaFetcher(leader, Followed({TP: follower_log}), FetcherSettings(replica_id=2),
                       clock=Clock())
    st = PartitionFetchState(TP, leader_epoch=0, fetch_offset=0, state=FETCHING)
    f.partitions[TP] = st
    run(f.fetch())
    assert (follower_log.log_start_offset, follower_log.log_end_offset, st.fetch_offset) == (
        4, 4, 4)
    run(f.fetch())
    assert follower_log.log_end_offset == 6 and follower_log.high_watermark == 6


def test_out_of_range_above_the_leaders_log_end_truncates_to_it(tmp_path):
    """handleOutOfRangeError: a follower with no epochs (nothing to diverge on) ahead of the
    leader truncates to the leader's log end."""
    leader_log, follower_log = open_log(tmp_path / "leader" / "t-0"), open_log(tmp_path / "follower" / "t-0")
    write(leader_log, [0] * 2)
    for _ in range(4):
        follower_log.append_as_follower(_unversioned_batch(follower_log.log_end_offset))
    leader = InMemoryLeader({TP: leader_log}, {TP: 0})
    f = ReplicaFetcher(leader, Followed({TP: follower_log}), FetcherSettings(replica_id=2),
                       clock=Clock())
    st = PartitionFetchState(TP, leader_epoch=0, fetch_offset=4, state=FETCHING)
    f.partitions[TP] = st
    assert follower_log.epoch_cache.latest_epoch < 0
    run(f.fetch())
    assert (follower_log.log_end_offset, st.fetch_offset) == (2, 2)


def _unversioned_batch(offset: int) -> bytes:
    """A batch with partition leader epoch -1 (written before epochs: no epoch entry)."""
    from weir.records.builder import build_batch
    return build_batch([b"old"], base_offset=offset, partition_leader_epoch=-1)


def test_an_answer_for_a_replaced_partition_state_is_ignored(tmp_path):
    """An answer is applied only if the partition is still fetched with the state (leader
    epoch) the request was made for: here it is re-added for epoch 4 while in flight."""
    f, _, leader, logs, _ = make(tmp_path)

    class Replacing(InMemoryLeader):
        async def fetch_epoch_end_offsets(self, replica_id, partitions):
            f.partitions[TP] = PartitionFetchState(TP, leader_epoch=4, fetch_offset=4)
            return {TP: EpochEndOffset(ErrorCode.none, 0, 1)}

    f.leader = Replacing(leader.logs, leader.epoch)
    run(f.truncate())
    assert logs.logs[TP].log_end_offset == 4
    assert f.partitions[TP].state is TRUNCATING


def test_leader_change_moves_the_partition_and_truncates_against_the_new_leader(tmp_path):
    """AbstractFetcherManager.addFetcherForPartitions: a new leader (or epoch) takes the
    partition out of the old leader's fetcher and starts it truncating in the new one's; a
    leader back on another address gets a fresh fetcher and endpoint."""
    leader_log, follower_log = diverged(tmp_path)
    leaders: dict[int, InMemoryLeader] = {}

    def endpoint(broker: BrokerEndPoint) -> InMemoryLeader:
        leaders[broker.broker_id] = InMemoryLeader({TP: leader_log}, {TP: 3},
                                                   broker_id=broker.broker_id)
        return leaders[broker.broker_id]

    logs = Followed({TP: follower_log})
    settings = FetcherSettings(replica_id=2, backoff_ms=0, max_wait_ms=0)

    async def scenario() -> None:
        manager = ReplicaFetcherManager(logs, settings, clock=Clock(),
                                        endpoint_factory=endpoint)
        leaders_epoch_1 = BrokerEndPoint(1, "h1", 1)
        manager.add(TP, leaders_epoch_1, 2, follower_log.log_end_offset)
        leaders[1].epoch[TP] = 99  # the old leader fences us from now on
        manager.add(TP, BrokerEndPoint(3, "h3", 3), 3, follower_log.log_end_offset)
        assert TP not in manager.fetchers[1].partitions
        assert manager.fetchers[3].partitions[TP].state is TRUNCATING
        await _until(lambda: all_bytes(follower_log) == all_bytes(leader_log))
        assert manager.lag(TP) == 0
        old = manager.fetchers[3]
        manager.add(TP, BrokerEndPoint(3, "h3-moved", 3), 3, follower_log.log_end_offset)
        assert manager.fetchers[3] is not old
        await asyncio.sleep(0)
        await manager.close()
        assert leaders[3].closed

    run(scenario())


def test_connection_errors_reset_the_endpoint_and_retry(tmp_path):
    """The fetcher's loop survives a lost connection: the endpoint is reset (its fetch
    session dropped) and the round retried after the back-off."""
    f, _, leader, logs, _ = make(tmp_path, backoff_ms=0)
    leader.fail_next = [ConnectionError("gone"), TimeoutError()]

    async def scenario() -> None:
        f.add(TP, 3, logs.logs[TP].log_end_offset)
        await _until(lambda: all_bytes(logs.logs[TP]) == all_bytes(leader.logs[TP]))
        await f.close()

    run(scenario())
    assert leader.resets == 2 and leader.closed


def test_follower_throttle_leaves_out_of_sync_partitions_out_of_the_fetch(tmp_path):
    """ReplicationQuotaManager (KIP-73), follower side: once the follower quota is exceeded,
    a throttled partition out of the ISR is left out of the next fetch; an in-sync one is
    never throttled."""
    leader_log, follower_log = open_log(tmp_path / "leader" / "t-0"), open_log(tmp_path / "follower" / "t-0")
    leader_log1, follower_log1 = open_log(tmp_path / "leader" / "t-1"), open_log(tmp_path / "follower" / "t-1")
    for log in (leader_log, leader_log1):
        write(log, [0] * 3)
        log.update_high_watermark(3)
    quota = ReplicationThrottles(broker_id=2)
    quota.configure(None, 10.0, topic_config=lambda _topic: {FOLLOWER_REPLICAS: "*"})
    leader = InMemoryLeader({TP: leader_log, TP1: leader_log1}, {TP: 0, TP1: 0})
    logs = Followed({TP: follower_log, TP1: follower_log1}, in_sync={TP1})
    clock = Clock()
    f = ReplicaFetcher(leader, logs, FetcherSettings(replica_id=2, partition_max_bytes=1),
                       quota=quota, clock=clock)
    for tp in (TP, TP1):
        f.partitions[tp] = PartitionFetchState(tp, 0, 0, state=FETCHING)
    run(f.fetch())
    assert set(leader.fetches[0]) == {TP, TP1}
    assert quota.follower.exceeded(clock())  # only TP's bytes count
    run(f.fetch())
    assert set(leader.fetches[1]) == {TP1}
    clock.now += 60_000  # the measured window has passed
    run(f.fetch())
    assert set(leader.fetches[2]) == {TP, TP1}


async def _until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def test_out_of_range_handling_stops_if_the_partition_is_removed_meanwhile(tmp_path):
    """The follower's log is looked up again after each ListOffsets answer: a StopReplica
    that deleted it while the question was in flight leaves nothing to truncate (the
    simulation found the fetcher truncating a closed log)."""
    leader_log, follower_log = open_log(tmp_path / "leader" / "t-0"), \
        open_log(tmp_path / "follower" / "t-0")
    write(leader_log, [0] * 2)
    write(follower_log, [0] * 4)
    logs = Followed({TP: follower_log})

    class Deleting(InMemoryLeader):
        async def fetch_latest_offset(self, replica_id, tp, current_leader_epoch):
            f.remove(tp)
            del logs.logs[tp]
            follower_log.close()
            return 2

    f = ReplicaFetcher(Deleting({TP: leader_log}, {TP: 0}), logs,
                       FetcherSettings(replica_id=2), clock=Clock())
    st = PartitionFetchState(TP, leader_epoch=0, fetch_offset=4, state=FETCHING)
    f.partitions[TP] = st
    run(f._handle_out_of_range(st))
    assert st.fetch_offset == 4 and TP not in f.partitions


def _three_partitions(tmp_path, followed=Followed):
    tps = [TopicPartition("t", i) for i in range(3)]
    leaders = {tp: open_log(tmp_path / "leader" / f"t-{tp.partition}") for tp in tps}
    followers = {tp: open_log(tmp_path / "follower" / f"t-{tp.partition}") for tp in tps}
    for log in leaders.values():
        write(log, [0] * 4, b"x" * 100)
        log.update_high_watermark(4)
    leader = InMemoryLeader(dict(leaders), dict.fromkeys(tps, 0))
    logs = followed(dict(followers))
    f = ReplicaFetcher(leader, logs, FetcherSettings(replica_id=2), clock=Clock())
    for tp in tps:
        f.partitions[tp] = PartitionFetchState(tp, 0, 0, state=FETCHING)
    return f, tps, leaders, logs


async def _fetch_watching_others(f, logs) -> list[int]:
    """Run one fetch while another task notes, each time it runs, how many partitions the
    fetch has applied so far."""
    seen: list[int] = []
    done = False

    async def other() -> None:
        while not done:
            seen.append(len(logs.fetched))
            await asyncio.sleep(0)

    task = asyncio.ensure_future(other())
    await f.fetch()
    done = True
    await task
    return seen


def test_a_large_answer_is_applied_in_several_loop_steps(tmp_path, monkeypatch):
    """Appending a whole fetch answer (up to replica.fetch.response.max.bytes over many
    partitions) in one event-loop step would stall every request the broker serves as a
    leader: once APPLY_YIELD_BYTES are appended, the fetcher lets other tasks run before the
    next partition, and still applies every partition, whole, in order."""
    from weir.replication import fetcher as fetcher_module

    f, tps, leaders, logs = _three_partitions(tmp_path)
    monkeypatch.setattr(fetcher_module, "APPLY_YIELD_BYTES", 1)
    seen = run(_fetch_watching_others(f, logs))
    assert 1 in seen and 2 in seen  # other work ran between the partitions' appends
    assert [tp for tp, _hw, _start in logs.fetched] == tps
    for tp in tps:
        assert all_bytes(logs.logs[tp]) == all_bytes(leaders[tp])
        assert f.partitions[tp].fetch_offset == 4


def test_a_small_answer_is_applied_in_one_loop_step(tmp_path):
    """Below APPLY_YIELD_BYTES the answer is applied without yielding: no extra loop steps
    (and no extra latency) for the common, small answer."""
    f, tps, _leaders, logs = _three_partitions(tmp_path)
    seen = run(_fetch_watching_others(f, logs))
    assert not any(0 < n < len(tps) for n in seen)
    assert [tp for tp, _hw, _start in logs.fetched] == tps


def test_a_partition_removed_while_the_loop_ran_is_not_applied(tmp_path, monkeypatch):
    """What runs between two partitions' appends may remove a partition (StopReplica, a new
    leader): it is checked again after the yield and left alone."""
    from weir.replication import fetcher as fetcher_module

    monkeypatch.setattr(fetcher_module, "APPLY_YIELD_BYTES", 1)

    class RemovingAfterFirst(Followed):
        def on_follower_fetched(self, tp, leader_hw, leader_log_start):
            super().on_follower_fetched(tp, leader_hw, leader_log_start)
            if tp.partition == 0:  # a StopReplica queued behind the first partition's append
                asyncio.get_running_loop().call_soon(f.remove, tps[2])

    f, tps, _leaders, logs = _three_partitions(tmp_path, RemovingAfterFirst)
    run(f.fetch())
    assert [tp for tp, _hw, _start in logs.fetched] == tps[:2]
    assert logs.logs[tps[2]].log_end_offset == 0


def test_a_demoted_idle_leader_drops_its_epoch_without_a_write_on_the_loop(tmp_path):
    """A broker made leader of epoch 2 that wrote nothing, then follower of epoch 3: the
    leader never had epoch 2, so the follower drops that entry (no record goes). The
    checkpoint is written afterwards off the loop, as Kafka's truncateFromEndAsyncFlush
    (KAFKA-15046): thousands of such partitions once cost one fsync each on the loop."""
    leader_log = open_log(tmp_path / "leader" / "t-0")
    follower_log = open_log(tmp_path / "follower" / "t-0")
    write(leader_log, [0, 0], b"common")
    write(follower_log, [0, 0], b"common")
    leader_log.epoch_cache.assign(3, leader_log.log_end_offset)
    leader_log.update_high_watermark(2)
    follower_log.epoch_cache.assign(2, 2)  # written at once: this broker led epoch 2
    checkpoint = tmp_path / "follower" / "t-0" / "leader-epoch-checkpoint"
    led = checkpoint.read_text()
    leader = InMemoryLeader({TP: leader_log}, {TP: 3})
    logs = Followed({TP: follower_log})
    f = ReplicaFetcher(leader, logs, FetcherSettings(replica_id=2), clock=Clock())
    st = PartitionFetchState(TP, leader_epoch=3, fetch_offset=2, state=TRUNCATING)
    f.partitions[TP] = st
    seen: list[tuple[bool, str]] = []
    scheduled = logs.schedule_epoch_checkpoints

    def schedule(plogs):  # what the storage thread is handed: not yet written
        seen.extend((p.epoch_cache.dirty, checkpoint.read_text()) for p in plogs)
        scheduled(plogs)

    logs.schedule_epoch_checkpoints = schedule
    run(f.truncate())
    assert follower_log.log_end_offset == 2 and (st.state, st.fetch_offset) == (FETCHING, 2)
    assert follower_log.epoch_cache.entries == [(0, 0)]
    assert seen == [(True, led)]  # nothing written during the truncation itself
    assert logs.checkpointed == [follower_log]
    assert "2 2" not in checkpoint.read_text().splitlines()  # written afterwards

"""Replication throttling: config parsing, the rate quota, and the leader-side hook in the
replica manager (an out-of-sync follower of a throttled replica gets no data while the
quota is exceeded; in-sync followers and consumers are never throttled)."""

from __future__ import annotations

import asyncio

from weir.common import TopicPartition
from weir.records.builder import build_batch
from weir.replication.local_reads import FetchPartition
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from weir.replication.throttle import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    RateQuota,
    ReplicationThrottles,
    parse_throttled_replicas,
)
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager

TP = TopicPartition("t", 0)


def test_parse_throttled_replicas() -> None:
    assert parse_throttled_replicas("*").covers(7, 3)
    parsed = parse_throttled_replicas("0:1, 1:2,bad,3:")
    assert parsed.covers(0, 1) and parsed.covers(1, 2)
    assert not parsed.covers(0, 2) and not parsed.covers(3, 1)
    assert parse_throttled_replicas(["0:4"]).covers(0, 4)
    assert not parse_throttled_replicas(None).covers(0, 1)
    assert not parse_throttled_replicas([]).covers(0, 1)


def test_rate_quota_measures_over_a_sliding_window() -> None:
    quota = RateQuota(1000, window_ms=1000, samples=2)
    quota.record(1500, now_ms=10_000)
    assert quota.exceeded(10_100)  # 1500 B over (at least) one window
    quota.record(400, now_ms=10_900)
    assert quota.measured(11_000) == 1900 * 1000 / 1000
    assert not quota.exceeded(12_500)  # 1.9 kB over 2.5 s... the first window expired
    assert quota.measured(20_000) == 0


def test_unbounded_quota_never_exceeds() -> None:
    quota = RateQuota(2**63 - 1)
    quota.record(10**9, now_ms=0)
    assert not quota.bounded and not quota.exceeded(1)


def test_throttles_apply_to_named_out_of_sync_replicas_only() -> None:
    configs = {"t": {LEADER_REPLICAS: ["0:1"], FOLLOWER_REPLICAS: "0:2"}}
    leader = ReplicationThrottles(broker_id=1)
    leader.configure(100, None, lambda topic: configs.get(topic, {}))
    leader.record_leader(TP, follower_in_sync=False, size=500, now_ms=0)
    assert leader.leader_throttled(TP, follower_in_sync=False, now_ms=10)
    assert not leader.leader_throttled(TP, follower_in_sync=True, now_ms=10)
    assert not leader.leader_throttled(TopicPartition("t", 1), False, 10)
    assert not leader.leader_throttled(TopicPartition("other", 0), False, 10)
    assert not leader.follower_throttled(TP, False, 10)  # no follower rate here
    follower = ReplicationThrottles(broker_id=2)
    follower.configure(None, 100, lambda topic: configs[topic])
    follower.record_follower(TP, in_sync=False, size=500, now_ms=0)
    assert follower.follower_throttled(TP, in_sync=False, now_ms=10)
    follower.record_follower(TP, in_sync=True, size=10**6, now_ms=0)  # not counted
    assert follower.follower.measured(10) == 500


def test_leader_serves_nothing_to_throttled_follower_while_quota_exceeded(tmp_path) -> None:
    lm = LogManager([tmp_path], LogConfig.from_dict({}))
    lm.startup(0)
    rm = ReplicaManager(1, lm, lambda _t: LogConfig.from_dict({}), lambda _t: 1)
    state = LeaderState(leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2, 3],
                        partition_epoch=0, controller_epoch=1)
    rm.apply_leader_and_isr(1, {TP: PartitionStateUpdate(state, None, False)}, False)
    asyncio.run(rm.append(1, 1000, {TP: build_batch([b"x" * 1000] * 5)}))
    rm.throttles.configure(10, None, lambda _t: {LEADER_REPLICAS: ["*"]})

    def fetch(replica_id: int, offset: int = 0):
        return asyncio.run(rm.reads.fetch(replica_id, 0, 1, 1 << 20,
                                    [FetchPartition(TP, offset, 1 << 20)]))[TP]

    first = fetch(3)  # under the quota: served, and accounted
    assert first.size > 0
    assert rm.throttles.leader.exceeded(_now())
    assert fetch(3).size == 0  # out of sync, throttled
    assert fetch(2).size > 0  # in the ISR: never throttled
    fetch(2, 5)  # the in-sync follower reached the log end: the high watermark moves
    assert fetch(-1).size > 0  # consumers are not replication traffic


def _now() -> int:
    from weir.replication.replica_manager import now_ms

    return now_ms()

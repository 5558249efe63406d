"""The leader's high watermark and follower state across role changes (sans-I/O Partition over
a real log): Kafka's Partition.makeLeader / Replica.resetReplicaState and
Partition.maybeIncrementLeaderHW."""

from __future__ import annotations

from pathlib import Path

from weir.common import TopicPartition
from weir.records.builder import build_batch
from weir.replication.partition import LeaderState, Partition
from weir.storage.log import Log, LogConfig

TP = TopicPartition("t", 0)
NOW = 1_000_000
LAG = 30_000


def leader(tmp_path: Path, replicas=(1, 2, 3), isr=(1, 2, 3), epoch=0,
           min_isr: int = 1) -> Partition:
    p = Partition(TP, 1)
    p.log = Log.open(tmp_path / "t-0", LogConfig.from_dict({}), clean_shutdown=False, now_ms=0)
    p.replica_lag_time_max_ms = LAG
    p.min_insync_replicas = lambda: min_isr
    p.make_leader(state(replicas, isr, epoch), NOW)
    return p


def state(replicas, isr, epoch, leader_id: int = 1) -> LeaderState:
    return LeaderState(leader=leader_id, leader_epoch=epoch, isr=list(isr),
                       replicas=list(replicas), partition_epoch=epoch, controller_epoch=1)


def append(p: Partition, n: int = 1) -> None:
    p.log.append_as_leader(build_batch([b"v"] * n), p.leader_epoch, NOW)
    p.maybe_increment_high_watermark()


def test_epoch_bump_while_leader_keeps_follower_offsets(tmp_path):
    """Partition.makeLeader: a new leader epoch on a broker that stays leader keeps the
    followers' log end offsets (Replica.resetReplicaState with isNewLeader=false), so the
    high watermark moves at once instead of waiting for every follower's next fetch."""
    p = leader(tmp_path)
    append(p, 2)
    p.update_follower_fetch(2, 2, NOW)  # follower 2 has everything
    p.update_follower_fetch(3, 0, NOW)  # follower 3 has nothing
    assert p.log.high_watermark == 0
    # The controller removes the lagging follower 3 from the ISR, bumping the epoch.
    assert p.make_leader(state((1, 2, 3), (1, 2), 1), NOW + 1)
    assert p.followers[2].log_end_offset == 2
    assert p.log.high_watermark == 2
    assert p.log.epoch_cache.latest_epoch == 1 and p.leader_epoch_start_offset == 2
    # Outside the ISR, follower 3 does not count as caught up (lastCaughtUpTimeMs reset to 0).
    assert p.followers[3].last_caught_up_ms == 0 and p.followers[2].last_caught_up_ms == NOW + 1


def test_new_leader_forgets_follower_offsets(tmp_path):
    """Replica.resetReplicaState with isNewLeader=true: follower offsets start unknown."""
    p = leader(tmp_path)
    append(p)
    p.update_follower_fetch(2, 1, NOW)
    p.make_follower(state((1, 2, 3), (1, 2, 3), 1, leader_id=2))
    p.make_leader(state((1, 2, 3), (1, 2, 3), 2), NOW)
    assert p.followers[2].log_end_offset == -1


def test_high_watermark_waits_for_a_caught_up_follower_outside_the_isr(tmp_path):
    """Partition.maybeIncrementLeaderHW: a live replica outside the ISR whose last caught-up
    time is within replica.lag.time.max.ms is waited for, as the ISR members are."""
    p = leader(tmp_path, isr=(1, 2))
    append(p)
    p.update_follower_fetch(2, 1, NOW)
    p.update_follower_fetch(3, 1, NOW)  # 3 caught up to the leader's end: about to join
    assert p.log.high_watermark == 1
    append(p)                           # offset 1; follower 2 gets it, 3 not yet
    p.update_follower_fetch(2, 2, NOW + 10)
    assert p.log.high_watermark == 1    # held back for the caught-up follower 3
    p.update_follower_fetch(3, 2, NOW + 20)
    assert p.log.high_watermark == 2


def test_high_watermark_ignores_a_lagging_or_dead_follower_outside_the_isr(tmp_path):
    """Partition.maybeIncrementLeaderHW: a replica outside the ISR not caught up within
    replica.lag.time.max.ms, or on a broker that is not alive, does not hold the HW."""
    p = leader(tmp_path, isr=(1, 2))
    append(p)
    p.update_follower_fetch(2, 1, NOW)
    p.update_follower_fetch(3, 1, NOW)
    append(p)
    p.update_follower_fetch(2, 2, NOW + LAG + 1)  # 3 last caught up more than LAG ago
    assert p.log.high_watermark == 2

    p.update_follower_fetch(3, 2, NOW + LAG + 2)  # 3 catches up again ...
    p.broker_alive = lambda broker: broker != 3   # ... and its broker dies
    append(p)
    p.update_follower_fetch(2, 3, NOW + LAG + 3)
    assert p.log.high_watermark == 3


def test_a_follower_outside_the_isr_never_heard_from_does_not_hold_the_hw(tmp_path):
    """Replica.resetReplicaState: a new leader's non-ISR replicas start with no caught-up time."""
    p = leader(tmp_path, isr=(1, 2))
    append(p)
    p.update_follower_fetch(2, 1, NOW)
    assert p.log.high_watermark == 1


def test_high_watermark_does_not_move_below_the_effective_min_isr(tmp_path):
    """Partition.maybeIncrementLeaderHW: no HW advance while the ISR is smaller than
    min(min.insync.replicas, replication factor) (Partition.effectiveMinIsr)."""
    p = leader(tmp_path, replicas=(1, 2), isr=(1,), min_isr=2)
    append(p)
    assert p.log.high_watermark == 0
    solo = leader(tmp_path / "solo", replicas=(1,), isr=(1,), min_isr=2)
    append(solo)
    assert solo.log.high_watermark == 1  # the effective min ISR of one replica is 1

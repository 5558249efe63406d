"""The two KIP-101 scenarios, replayed deterministically over real logs.

High-watermark truncation loses or diverges committed data in both; leader-epoch truncation
(weir.replication.truncation) must do neither.  A crash that drops unflushed bytes is
simulated by truncating the replica's log, as the issue asks.
"""

from __future__ import annotations

from pathlib import Path

from weir.records.batch import iter_headers
from weir.records.builder import build_batch
from weir.replication.truncation import after_leader_epoch_answer
from weir.storage.log import Log, LogConfig


def open_log(path: Path) -> Log:
    return Log.open(path, LogConfig.from_dict({}), clean_shutdown=False, now_ms=0)


def lead_append(log: Log, epoch: int, value: bytes) -> None:
    if log.epoch_cache.latest_epoch < epoch:
        log.epoch_cache.assign(epoch, log.log_end_offset)  # as Partition.make_leader does
    log.append_as_leader(build_batch([value]), epoch, now_ms=0)


def replicate(leader: Log, follower: Log) -> None:
    """The follower fetches everything the leader has beyond its log end."""
    read = leader.read(follower.log_end_offset, 1 << 20, max_offset=None)
    if read.size:
        follower.append_as_follower(read.read_bytes())


def become_follower_of(follower: Log, leader: Log) -> None:
    """The fetcher's truncation step, against the leader's OffsetForLeaderEpoch answers."""
    while True:
        asked = follower.epoch_cache.latest_epoch
        epoch, end = leader.epoch_cache.end_offset_for(asked, leader.log_end_offset)
        decision = after_leader_epoch_answer(epoch, end, follower.epoch_cache,
                                             follower.log_end_offset, follower.high_watermark)
        follower.truncate_to(decision.offset)
        if decision.completed:
            return


def values(log: Log) -> list[bytes]:
    read = log.read(log.log_start_offset, 1 << 30, max_offset=None)
    data = read.read_bytes() if read.size else b""
    # the single record's value sits at the end of each one-record test batch
    return [data[h.position + h.size - 3: h.position + h.size - 1] for h in iter_headers(data)]


def test_scenario_1_follower_restart_then_leader_death_loses_nothing(tmp_path):
    a, b = open_log(tmp_path / "a" / "t-0"), open_log(tmp_path / "b" / "t-0")
    lead_append(a, 0, b"m0")
    lead_append(a, 0, b"m1")
    replicate(a, b)                 # B has m0, m1 ...
    a.update_high_watermark(2)      # ... A committed both (acks=all answered) ...
    b.update_high_watermark(1)      # ... but B learned HW=1 only (its next fetch never came)
    # B restarts: HW truncation would cut m1 here. Epoch truncation asks A instead.
    become_follower_of(b, a)
    assert b.log_end_offset == 2
    # A dies, B becomes leader at epoch 1 and takes a new write.
    lead_append(b, 1, b"m2")
    assert values(b) == [b"m0", b"m1", b"m2"]


def test_scenario_2_both_crash_and_lose_unflushed_data_no_divergence(tmp_path):
    a, b = open_log(tmp_path / "a" / "t-0"), open_log(tmp_path / "b" / "t-0")
    lead_append(a, 0, b"m0")
    replicate(a, b)
    size_after_m0 = sum(p.stat().st_size for p in b.dir.glob("*.log"))
    lead_append(a, 0, b"m1")
    replicate(a, b)
    a.update_high_watermark(2)
    b.update_high_watermark(1)
    # Power loss on B: the bytes of m1 were never flushed. Simulate it by truncating B's
    # segment, then reopen B (recovery drops nothing else: the tail is clean).
    b.close()
    segment = next(b.dir.glob("*.log"))
    with open(segment, "r+b") as f:
        f.truncate(size_after_m0)
    b = Log.open(b.dir, LogConfig.from_dict({}), clean_shutdown=False, now_ms=0)
    assert b.log_end_offset == 1
    # B comes back first and is elected leader at epoch 1; its new write lands at offset 1.
    lead_append(b, 1, b"m2")
    # A returns as a follower. HW truncation would keep A's m1 at offset 1 (A's HW is 2):
    # divergence. Epoch truncation: epoch 0 ends at 1 on B, so A drops m1.
    become_follower_of(a, b)
    replicate(b, a)
    assert values(a) == values(b) == [b"m0", b"m2"]
    assert a.epoch_cache.entries == b.epoch_cache.entries


def test_walk_back_when_the_leader_never_had_the_followers_epoch(tmp_path):
    # Follower wrote in epochs 0 and 2; the leader has epochs 0 and 1: the follower keeps
    # only what is common (KIP-279), in two OffsetForLeaderEpoch rounds.
    leader, follower = open_log(tmp_path / "l" / "t-0"), open_log(tmp_path / "f" / "t-0")
    for log in (leader, follower):
        lead_append(log, 0, b"c0")
        lead_append(log, 0, b"c1")
    lead_append(leader, 1, b"l2")
    lead_append(follower, 2, b"f2")
    lead_append(follower, 2, b"f3")
    become_follower_of(follower, leader)
    replicate(leader, follower)
    assert values(follower) == values(leader) == [b"c0", b"c1", b"l2"]


def test_follower_without_epochs_falls_back_to_its_high_watermark(tmp_path):
    follower = open_log(tmp_path / "f" / "t-0")
    decision = after_leader_epoch_answer(-1, -1, follower.epoch_cache, 5, 3)
    assert (decision.offset, decision.completed) == (3, True)

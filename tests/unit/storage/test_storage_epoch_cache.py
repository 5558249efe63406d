"""LeaderEpochCache: KIP-101/279 semantics."""

from __future__ import annotations

from weir.storage.epoch_cache import LeaderEpochCache


def cache_with(*entries):
    return LeaderEpochCache(None, list(entries))


def test_assign_ignores_same_epoch_and_replaces_conflicts():
    c = LeaderEpochCache()
    assert c.latest_epoch == -1
    assert c.assign(1, 0)
    assert not c.assign(1, 5)  # same epoch, later offset: no change
    assert c.assign(2, 10)
    assert c.entries == [(1, 0), (2, 10)]
    assert c.assign(3, 8)  # start below epoch 2's start: epoch 2 entry dropped
    assert c.entries == [(1, 0), (3, 8)]
    assert c.latest_epoch == 3 and c.earliest_epoch == 1
    assert not c.assign(-1, 20)


def test_epoch_for_offset():
    c = cache_with((1, 0), (3, 10), (4, 20))
    assert c.epoch_for_offset(0) == 1
    assert c.epoch_for_offset(9) == 1
    assert c.epoch_for_offset(10) == 3
    assert c.epoch_for_offset(1000) == 4
    assert cache_with((1, 5)).epoch_for_offset(4) is None


def test_end_offset_for():
    c = cache_with((1, 0), (3, 10), (4, 20))
    leo = 25
    assert c.end_offset_for(-1, leo) == (-1, -1)
    assert c.end_offset_for(4, leo) == (4, 25)  # latest epoch -> LEO
    assert c.end_offset_for(3, leo) == (3, 20)
    assert c.end_offset_for(2, leo) == (1, 10)  # largest epoch <= 2 is 1, ends where 3 starts
    assert c.end_offset_for(1, leo) == (1, 10)
    assert c.end_offset_for(0, leo) == (0, 0)  # below the first epoch: Kafka's answer
    assert c.end_offset_for(9, leo) == (-1, -1)  # above every known epoch
    assert LeaderEpochCache().end_offset_for(0, 0) == (-1, -1)


def test_truncate_from_end():
    c = cache_with((1, 0), (3, 10), (4, 20))
    c.truncate_from_end(21)
    assert c.entries == [(1, 0), (3, 10), (4, 20)]
    c.truncate_from_end(20)
    assert c.entries == [(1, 0), (3, 10)]
    c.truncate_from_end(5)
    assert c.entries == [(1, 0)]


def test_truncate_from_start():
    c = cache_with((1, 0), (3, 10), (4, 20))
    c.truncate_from_start(0)
    assert c.entries == [(1, 0), (3, 10), (4, 20)]
    c.truncate_from_start(15)
    assert c.entries == [(3, 15), (4, 20)]
    c.truncate_from_start(20)
    assert c.entries == [(4, 20)]
    c.truncate_from_start(30)
    assert c.entries == [(4, 30)]
    c.clear()
    assert c.entries == []

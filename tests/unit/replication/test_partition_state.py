"""The leader's ISR as one closed type (Kafka's kafka.cluster.PartitionState): committed, or
one AlterPartition in flight expanding or shrinking it (KIP-497)."""

from __future__ import annotations

from tests.unit.replication.test_partition_hw import NOW, append, leader, state
from weir.replication.partition import (
    CommittedPartitionState,
    PendingExpandIsr,
    PendingShrinkIsr,
)


def test_expansion_in_flight_counts_the_new_member_for_the_high_watermark_only(tmp_path):
    """PendingExpandIsr: the maximal ISR includes the joining replica (the HW waits for it)
    while the committed ISR (min.insync.replicas) does not; no second change is proposed."""
    p = leader(tmp_path, isr=(1, 2))
    append(p, 2)
    p.update_follower_fetch(2, 2, NOW)
    p.update_follower_fetch(3, 2, NOW)
    assert p.propose_isr_expansion(3) == frozenset({1, 2, 3})
    assert p.partition_state == PendingExpandIsr(3, CommittedPartitionState(frozenset({1, 2})))
    assert p.isr == {1, 2} and p.maximal_isr == {1, 2, 3}
    assert p.inflight_isr == {1, 2, 3}
    assert p.propose_isr_shrink(NOW + 10**9, 1) is None  # one change at a time
    assert p.apply_isr_change(p.leader_epoch, [1, 2, 3], 1)
    assert p.partition_state == CommittedPartitionState(frozenset({1, 2, 3}))
    assert p.inflight_isr is None


def test_shrink_in_flight_keeps_the_leaving_members_in_the_maximal_isr(tmp_path):
    """PendingShrinkIsr: until the controller confirms, the replicas being removed still
    count for the high watermark; a refusal returns to the last committed state."""
    p = leader(tmp_path)
    append(p)
    p.update_follower_fetch(2, 1, NOW)
    assert p.propose_isr_shrink(NOW + 60_000, 30_000) == frozenset({1, 2})
    assert isinstance(p.partition_state, PendingShrinkIsr)
    assert p.partition_state.out_of_sync_replicas == {3}
    assert p.isr == {1, 2, 3} and p.maximal_isr == {1, 2, 3}
    assert p.log.high_watermark == 0  # 3 has not fetched: still holds the HW back
    p.abandon_isr_change()
    assert p.partition_state == CommittedPartitionState(frozenset({1, 2, 3}))


def test_an_answer_for_another_epoch_drops_the_change_and_keeps_the_committed_isr(tmp_path):
    p = leader(tmp_path)
    p.propose_isr_shrink(NOW + 60_000, 30_000)
    assert not p.apply_isr_change(p.leader_epoch + 1, [1], 5)
    assert p.partition_state == CommittedPartitionState(frozenset({1, 2, 3}))


def test_leader_and_isr_replaces_a_change_in_flight(tmp_path):
    p = leader(tmp_path)
    p.propose_isr_shrink(NOW + 60_000, 30_000)
    p.make_leader(state((1, 2, 3), (1, 2), 1), NOW)
    assert p.partition_state == CommittedPartitionState(frozenset({1, 2}))

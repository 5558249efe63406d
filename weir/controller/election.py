"""Leader selectors: pure functions from plain values to a frozen election result.

Each selector takes the partition's assigned replicas (in assignment order, the first one
being the *preferred* replica), its current ISR and the set of live brokers, and returns an
:class:`ElectionResult` or ``None`` when no leader can be chosen (the partition then keeps
its current state).  The caller bumps the leader epoch; selectors never see epochs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = [
    "ElectionResult",
    "controlled_shutdown_leader",
    "offline_leader",
    "preferred_leader",
    "reassigned_leader",
]


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """The outcome of one election.

    ``recipients`` are the brokers that must receive the new LeaderAndIsr.  ``unclean`` is
    true when the leader was taken from outside the ISR (possible data loss).
    """

    leader: int
    isr: tuple[int, ...]
    recipients: tuple[int, ...]
    unclean: bool = False


def _live(replicas: Sequence[int], live: Collection[int]) -> tuple[int, ...]:
    return tuple(r for r in replicas if r in live)


def offline_leader(assignment: Sequence[int], isr: Sequence[int], live: Collection[int],
                   unclean_allowed: bool) -> ElectionResult | None:
    """Elect a leader for a partition whose leader is gone.

    The leader is the first live replica, in assignment order, that is in the ISR; the new
    ISR is the live part of the old one.  If no ISR member is alive and unclean election is
    allowed, the first live assigned replica leads alone (``unclean=True``).
    """
    live_assigned = _live(assignment, live)
    live_isr = tuple(r for r in isr if r in live)
    for replica in live_assigned:
        if replica in live_isr:
            return ElectionResult(replica, live_isr, live_assigned)
    if unclean_allowed and live_assigned:
        leader = live_assigned[0]
        return ElectionResult(leader, (leader,), live_assigned, unclean=True)
    return None


def reassigned_leader(target_replicas: Sequence[int], isr: Sequence[int],
                      live: Collection[int]) -> ElectionResult | None:
    """Elect a leader among the reassignment's target replicas that are live and in sync.

    The ISR is unchanged; the target replicas receive the LeaderAndIsr.
    """
    for replica in target_replicas:
        if replica in live and replica in isr:
            return ElectionResult(replica, tuple(isr), tuple(target_replicas))
    return None


def preferred_leader(assignment: Sequence[int], isr: Sequence[int],
                     live: Collection[int]) -> ElectionResult | None:
    """Move leadership to the preferred (first assigned) replica if it is live and in sync."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in live and preferred in isr:
        return ElectionResult(preferred, tuple(isr), _live(assignment, live))
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Sequence[int],
                               live: Collection[int],
                               shutting_down: Collection[int]) -> ElectionResult | None:
    """Move leadership away from brokers that are shutting down.

    ``live`` includes the shutting-down brokers (they still serve until they stop).  The new
    ISR drops the shutting-down brokers; the leader is the first assigned replica in it.
    """
    new_isr = tuple(r for r in isr if r not in shutting_down)
    for replica in assignment:
        if replica in live and replica in new_isr:
            return ElectionResult(replica, new_isr, _live(assignment, live))
    return None

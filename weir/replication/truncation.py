"""Where a follower truncates its log before fetching from a new leader (sans-I/O).

KIP-101 replaced high-watermark truncation, which could lose or diverge committed data,
with leader epochs: the follower asks the leader (OffsetForLeaderEpoch) for the end offset of
the follower's latest epoch and truncates there.  KIP-279 adds the walk back: when the leader
answers with an older epoch than the one asked for, the follower looks up its own end offset
for that epoch, truncates to the smaller of the two, and asks again if it did not have that
epoch itself.  A follower with no epoch information falls back to its high watermark.
The same rule decides truncation when a Fetch response reports a diverging epoch (KIP-320).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from weir.storage.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache

if TYPE_CHECKING:
    from weir.storage.log import Log


@dataclass(frozen=True, slots=True)
class Truncation:
    offset: int
    completed: bool  # False: ask the leader again with our (older) epoch


def after_leader_epoch_answer(leader_epoch: int, leader_end_offset: int,
                              cache: LeaderEpochCache, log_end_offset: int,
                              high_watermark: int) -> Truncation:
    """Decide the truncation offset from the leader's (epoch, end offset) answer."""
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        # The leader knows no epoch at or below ours: no better information than the HW.
        return Truncation(min(high_watermark, log_end_offset), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    local_epoch, local_end = cache.end_offset_for(leader_epoch, log_end_offset)
    if local_end == UNDEFINED_EPOCH_OFFSET:
        # We have nothing at or below the leader's epoch.
        return Truncation(min(leader_end_offset, log_end_offset), True)
    if local_epoch != leader_epoch:
        # We never had the leader's epoch: cut back to the end of our largest older epoch
        # and ask again about that one (KIP-279's walk back).
        return Truncation(min(local_end, log_end_offset), False)
    return Truncation(min(leader_end_offset, local_end, log_end_offset), True)


def apply(log: Log, decision: Truncation) -> bool:
    """Truncate ``log`` as decided; True if records were removed.

    ``Log.truncate_to`` is called even when the offset is at the log end: it then drops only
    epochs this broker started but never wrote to (a leader that appended nothing in its
    epoch), which the new leader never had."""
    return log.truncate_to(decision.offset)

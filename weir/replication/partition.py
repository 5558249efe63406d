"""One partition as this broker sees it: leader or follower, ISR, high watermark (sans-I/O).

The leader tracks each follower's log end offset and last caught-up time from its fetches.
The high watermark is the minimum log end offset over the *maximal* ISR (the committed ISR
plus additions not yet confirmed, seed 002 / KIP-497) and never moves backwards.  Nothing here
reads a clock or touches the network: callers pass ``now_ms`` and act on the return values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from weir.storage.log import Log

NO_LEADER = -1


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1  # the leader's LEO when the previous fetch was served
    log_start_offset: int = -1  # as the follower reported it in its last fetch


@dataclass(slots=True)
class LeaderState:
    """What the controller told us (one LeaderAndIsr partition state)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    partition_epoch: int
    controller_epoch: int


@dataclass
class Partition:
    tp: TopicPartition
    broker_id: int
    log: Log | None = None
    topic_id: object = None
    leader: int = NO_LEADER
    leader_epoch: int = -1
    partition_epoch: int = -1
    controller_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: set[int] = field(default_factory=set)
    pending_isr: set[int] = field(default_factory=set)  # additions not yet confirmed
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # The ISR proposed to the controller in an AlterPartition not yet answered (KIP-497).
    # While one is in flight no other is sent; the HW uses the maximal ISR.
    inflight_isr: frozenset[int] | None = None
    leader_epoch_start_offset: int = 0

    # -- roles ---------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def maximal_isr(self) -> set[int]:
        """Committed ISR plus members whose addition is in flight (never minus a removal)."""
        return self.isr | self.pending_isr

    def check_epoch(self, state: LeaderState) -> None:
        """Refuse a LeaderAndIsr state older than the one applied (KIP-320 fencing)."""
        if state.leader_epoch < self.leader_epoch:
            raise KafkaError(
                ErrorCode.stale_controller_epoch,
                f"{self.tp}: leader epoch {state.leader_epoch} is older than "
                f"the current {self.leader_epoch}",
            )

    def make_leader(self, state: LeaderState, now_ms: int) -> bool:
        """Apply a become-leader state; True if this broker was not already leading this epoch."""
        self.check_epoch(state)
        assert self.log is not None
        was_leader = self.is_leader and state.leader_epoch == self.leader_epoch
        self._apply(state)
        if not was_leader:
            # The new epoch starts at our log end (KIP-101): followers truncate against it.
            self.log.epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.followers = {
                r: FollowerState(last_caught_up_ms=now_ms)
                for r in self.replicas
                if r != self.broker_id
            }
        self.maybe_increment_high_watermark()
        return not was_leader

    def make_follower(self, state: LeaderState) -> bool:
        """Apply a become-follower state; True if the leader or epoch changed."""
        self.check_epoch(state)
        changed = state.leader != self.leader or state.leader_epoch != self.leader_epoch
        self._apply(state)
        self.followers = {}
        return changed

    def _apply(self, state: LeaderState) -> None:
        self.inflight_isr = None
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = list(state.replicas)
        self.isr = set(state.isr)
        self.pending_isr = set()

    # -- leader side -----------------------------------------------------------------

    def require_leader(self, current_leader_epoch: int = -1) -> Log:
        """The log, if this broker leads the partition at the client's epoch (KIP-320)."""
        if not self.is_leader or self.log is None:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"not the leader for {self.tp}")
        self.check_client_epoch(current_leader_epoch)
        return self.log

    def check_client_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch,
                             f"{self.tp}: epoch {current_leader_epoch} < {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(ErrorCode.unknown_leader_epoch,
                             f"{self.tp}: epoch {current_leader_epoch} > {self.leader_epoch}")

    def check_min_isr(self, min_insync_replicas: int) -> None:
        if len(self.isr) < min_insync_replicas:
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"{self.tp}: ISR {sorted(self.isr)} is smaller than "
                f"min.insync.replicas={min_insync_replicas}",
            )

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                              log_start_offset: int = -1) -> bool:
        """Record a follower's fetch position; True if the high watermark advanced."""
        assert self.log is not None
        state = self.followers.setdefault(replica_id, FollowerState())
        leader_leo = self.log.log_end_offset
        # Kafka's rule: caught up now if at our end; caught up as of the previous fetch if
        # this fetch starts at (or past) where our log ended when that one was served.
        if fetch_offset >= leader_leo:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_leo >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.log_start_offset = log_start_offset
        state.last_fetch_ms = now_ms
        state.last_fetch_leader_leo = leader_leo
        return self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR; returns True if it moved forward."""
        if not self.is_leader or self.log is None:
            return False
        new_hw = self.log.log_end_offset
        for replica in self.maximal_isr:
            if replica == self.broker_id:
                continue
            follower = self.followers.get(replica)
            # A member not heard from in this epoch holds the HW back (LEO unknown).
            new_hw = min(new_hw, follower.log_end_offset if follower else -1)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    # -- ISR changes (leader side, KIP-497) --------------------------------------------

    def propose_isr_expansion(self, replica_id: int) -> frozenset[int] | None:
        """The ISR to propose if ``replica_id`` caught up to the HW and this epoch's start."""
        if (not self.is_leader or self.log is None or self.inflight_isr is not None
                or replica_id in self.isr or replica_id not in self.replicas):
            return None
        follower = self.followers.get(replica_id)
        if follower is None:
            return None
        if (follower.log_end_offset >= self.log.high_watermark
                and follower.log_end_offset >= self.leader_epoch_start_offset):
            proposed = frozenset(self.isr | {replica_id})
            self.inflight_isr = proposed
            self.pending_isr = {replica_id}
            return proposed
        return None

    def propose_isr_shrink(self, now_ms: int, max_lag_ms: int) -> frozenset[int] | None:
        """The ISR to propose without followers that have not caught up for ``max_lag_ms``."""
        if not self.is_leader or self.log is None or self.inflight_isr is not None:
            return None
        out_of_sync = {
            r for r in self.isr
            if r != self.broker_id and self._lagging(r, now_ms, max_lag_ms)
        }
        if not out_of_sync:
            return None
        proposed = frozenset(self.isr - out_of_sync)
        self.inflight_isr = proposed
        return proposed

    def _lagging(self, replica_id: int, now_ms: int, max_lag_ms: int) -> bool:
        follower = self.followers.get(replica_id)
        if follower is None:
            return True
        if follower.log_end_offset >= self.log.log_end_offset:  # type: ignore[union-attr]
            return False
        return now_ms - follower.last_caught_up_ms > max_lag_ms

    def apply_isr_change(self, leader_epoch: int, isr: list[int], partition_epoch: int) -> bool:
        """The controller confirmed an ISR; False if it is for another epoch (ignored)."""
        self.inflight_isr = None
        self.pending_isr = set()
        if leader_epoch != self.leader_epoch or not self.is_leader:
            return False
        self.isr = set(isr)
        self.partition_epoch = partition_epoch
        return True

    def abandon_isr_change(self) -> None:
        """The controller refused the change: wait for its next LeaderAndIsr or retry."""
        self.inflight_isr = None
        self.pending_isr = set()

    def low_watermark(self, alive: set[int] | None = None) -> int:
        """The smallest log start offset over this leader and its (live) followers (seed 002);
        DeleteRecords completes once it reaches the requested offset."""
        assert self.log is not None
        low = self.log.log_start_offset
        for replica in self.replicas:
            if replica == self.broker_id or (alive is not None and replica not in alive):
                continue
            follower = self.followers.get(replica)
            low = min(low, follower.log_start_offset if follower else -1)
        return low

    def isr_is_complete_for(self, required_offset: int) -> bool:
        """True once every maximal-ISR member reached ``required_offset`` (acks=all)."""
        return self.log is not None and self.log.high_watermark >= required_offset

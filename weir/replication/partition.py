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

    # -- roles ---------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def maximal_isr(self) -> set[int]:
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

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """Record a follower's fetch position; True if the high watermark advanced."""
        assert self.log is not None
        state = self.followers.setdefault(replica_id, FollowerState())
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now_ms
        if fetch_offset >= self.log.log_end_offset:
            state.last_caught_up_ms = now_ms
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

    def isr_is_complete_for(self, required_offset: int) -> bool:
        """True once every maximal-ISR member reached ``required_offset`` (acks=all)."""
        return self.log is not None and self.log.high_watermark >= required_offset

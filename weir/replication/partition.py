"""One partition as this broker sees it: leader or follower, ISR, high watermark (sans-I/O).

The leader tracks each follower's log end offset and last caught-up time from its fetches.
The high watermark is the minimum log end offset over the *maximal* ISR (the committed ISR
plus additions not yet confirmed, KIP-497's AlterPartition) and over live followers outside the ISR
that are caught up (about to join it), as Kafka's ``Partition.maybeIncrementLeaderHW``; it
never moves backwards, and does not move while the ISR is below the effective
``min.insync.replicas``.  Nothing here reads a clock or touches the network: callers pass
``now_ms`` (or the partition uses the latest time it was given) and act on the return values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.replication.read_replica import ReplicaView

if TYPE_CHECKING:
    from weir.storage.log import Log

NO_LEADER = -1
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30000


def _always(_broker_id: int) -> bool:
    return True


def _one() -> int:
    return 1


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1  # the leader's LEO when the previous fetch was served
    log_start_offset: int = -1  # as the follower reported it in its last fetch


@dataclass(frozen=True, slots=True)
class CommittedPartitionState:
    """The ISR the controller confirmed (LeaderAndIsr or an AlterPartition answer), with no
    change in flight (Kafka's ``CommittedPartitionState``)."""

    isr: frozenset[int]

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.isr

    @property
    def is_inflight(self) -> bool:
        return False

    @property
    def proposed_isr(self) -> frozenset[int] | None:
        return None


@dataclass(frozen=True, slots=True)
class PendingExpandIsr:
    """An AlterPartition adding ``new_in_sync_replica`` is in flight (Kafka's
    ``PendingExpandIsr``, KIP-497): the replica already counts for the high watermark (the
    maximal ISR), not yet for min.insync.replicas."""

    new_in_sync_replica: int
    last_committed: CommittedPartitionState

    @property
    def isr(self) -> frozenset[int]:
        return self.last_committed.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.last_committed.isr | {self.new_in_sync_replica}

    @property
    def is_inflight(self) -> bool:
        return True

    @property
    def proposed_isr(self) -> frozenset[int] | None:
        return self.maximal_isr


@dataclass(frozen=True, slots=True)
class PendingShrinkIsr:
    """An AlterPartition removing ``out_of_sync_replicas`` is in flight (Kafka's
    ``PendingShrinkIsr``): until it is confirmed they still count (the maximal ISR keeps
    them), so the high watermark never passes a replica the controller may still elect."""

    out_of_sync_replicas: frozenset[int]
    last_committed: CommittedPartitionState

    @property
    def isr(self) -> frozenset[int]:
        return self.last_committed.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self.last_committed.isr

    @property
    def is_inflight(self) -> bool:
        return True

    @property
    def proposed_isr(self) -> frozenset[int] | None:
        return self.last_committed.isr - self.out_of_sync_replicas


# Kafka's sealed kafka.cluster.PartitionState: the leader's ISR, committed or changing.
PartitionState = CommittedPartitionState | PendingExpandIsr | PendingShrinkIsr
NO_ISR = CommittedPartitionState(frozenset())


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
    # The ISR, committed or with one AlterPartition in flight (KIP-497): while one is in
    # flight no other is sent, and the HW uses the maximal ISR.
    partition_state: PartitionState = NO_ISR
    followers: dict[int, FollowerState] = field(default_factory=dict)
    leader_epoch_start_offset: int = 0
    # Changes each time this broker becomes leader after not leading: a produce waiting for
    # replication fails if it changed (leader -> follower -> leader may have truncated the
    # records it waits for), while an epoch bump that keeps this broker leader does not.
    leadership_generation: int = 0
    # Set by the replica manager: replica.lag.time.max.ms, whether a broker is alive (Kafka's
    # isReplicaIsrEligible in ZooKeeper mode) and the topic's min.insync.replicas.
    replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS
    broker_alive: Callable[[int], bool] = _always
    min_insync_replicas: Callable[[], int] = _one
    last_now_ms: int = 0  # the latest time a caller gave the partition

    # -- roles ---------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR."""
        return self.partition_state.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        """Committed ISR plus members whose addition is in flight (never minus a removal)."""
        return self.partition_state.maximal_isr

    @property
    def inflight_isr(self) -> frozenset[int] | None:
        """The ISR proposed in an AlterPartition not yet answered, if any."""
        return self.partition_state.proposed_isr

    def check_epoch(self, state: LeaderState) -> None:
        """Refuse a LeaderAndIsr state older than the one applied (KIP-320 fencing)."""
        if state.leader_epoch < self.leader_epoch:
            raise KafkaError(
                ErrorCode.stale_controller_epoch,
                f"{self.tp}: leader epoch {state.leader_epoch} is older than "
                f"the current {self.leader_epoch}",
            )

    def make_leader(self, state: LeaderState, now_ms: int, *,
                    defer_checkpoint: bool = False) -> bool:
        """Apply a become-leader state; True if this broker was not already leading this epoch.

        As Kafka's ``Partition.makeLeader``: a new leader epoch starts at our log end and
        re-initialises the followers' state; a broker that was already leader keeps what it
        knows of their log end offsets (only their caught-up and fetch times restart), so an
        epoch bump (say, a follower leaving the ISR) does not stall the high watermark.
        ``defer_checkpoint``: the new epoch's ``leader-epoch-checkpoint`` is left to the
        caller to write (:mod:`weir.storage.epoch_cache` says why that is safe)."""
        self.check_epoch(state)
        assert self.log is not None
        self.last_now_ms = max(self.last_now_ms, now_ms)
        is_new_leader = not self.is_leader
        is_new_epoch = state.leader_epoch > self.leader_epoch
        self._apply(state)
        if is_new_leader:
            self.leadership_generation += 1
        if is_new_epoch:
            # The new epoch starts at our log end (KIP-101): followers truncate against it.
            leo = self.log.log_end_offset
            self.log.epoch_cache.assign(state.leader_epoch, leo, defer=defer_checkpoint)
            self.leader_epoch_start_offset = leo
            self._reset_followers(now_ms, leo, keep_offsets=not is_new_leader)
        else:
            self._sync_followers()
        self.maybe_increment_high_watermark()
        return is_new_leader or is_new_epoch

    def _reset_followers(self, now_ms: int, leader_end: int, keep_offsets: bool) -> None:
        """Kafka's ``Replica.resetReplicaState``: an ISR member counts as caught up (and as
        just fetched) now, any other replica not at all, so it holds nothing back."""
        followers = {}
        for r in self.replicas:
            if r == self.broker_id:
                continue
            in_sync = r in self.isr
            old = self.followers.get(r) if keep_offsets else None
            state = FollowerState(last_caught_up_ms=now_ms if in_sync else 0)
            if old is not None:
                state.log_end_offset = old.log_end_offset
                state.log_start_offset = old.log_start_offset
                state.last_fetch_leader_leo = leader_end
                state.last_fetch_ms = now_ms if in_sync else 0
            followers[r] = state
        self.followers = followers

    def _sync_followers(self) -> None:
        """Same epoch, new replica set: add states for new replicas, drop removed ones."""
        self.followers = {r: self.followers.get(r) or FollowerState()
                          for r in self.replicas if r != self.broker_id}

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
        self.partition_state = CommittedPartitionState(frozenset(state.isr))

    # -- leader side -----------------------------------------------------------------

    def require_leader(self, current_leader_epoch: int = -1) -> Log:
        """The log, if this broker leads the partition at the client's epoch (KIP-320)."""
        if self.leader != self.broker_id or self.log is None:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"not the leader for {self.tp}")
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
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

    def effective_min_isr(self, min_insync_replicas: int | None = None) -> int:
        """min.insync.replicas, capped at the replication factor (as Kafka's
        ``Partition.effectiveMinIsr``)."""
        wanted = self.min_insync_replicas() if min_insync_replicas is None else min_insync_replicas
        return min(wanted, max(len(self.replicas), 1))

    def check_min_isr(self, min_insync_replicas: int | None = None) -> None:
        isr_size = len(self.partition_state.isr)
        if isr_size >= max(len(self.replicas), 1):
            return  # every replica in sync: any min.insync.replicas is met (it is capped)
        if isr_size < self.effective_min_isr(min_insync_replicas):
            raise KafkaError(
                ErrorCode.not_enough_replicas,
                f"{self.tp}: ISR {sorted(self.isr)} is smaller than "
                f"min.insync.replicas={min_insync_replicas}",
            )

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                              log_start_offset: int = -1, leader_leo: int = -1) -> bool:
        """Record a follower's fetch position; True if the high watermark advanced (Kafka's
        ``Partition.updateFollowerFetchState``).  ``leader_leo``: our log end offset if the
        caller has just read it (-1: read it here)."""
        plog = self.log
        assert plog is not None
        self.last_now_ms = max(self.last_now_ms, now_ms)
        state = self.followers.get(replica_id)
        if state is None:
            state = self.followers[replica_id] = FollowerState()
        if leader_leo < 0:
            leader_leo = plog.log_end_offset
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
        if plog.high_watermark >= leader_leo:
            return False  # as maybe_increment_high_watermark: nothing can move
        return self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self, now_ms: int | None = None) -> bool:
        """Kafka's ``Partition.maybeIncrementLeaderHW``; True if the HW moved forward.

        Nothing moves while the committed ISR is below the effective min.insync.replicas.
        Otherwise the HW is the minimum log end offset over this leader, the maximal ISR and
        every live follower outside it that is caught up (at our log end, or caught up within
        replica.lag.time.max.ms): a recovering follower about to join the ISR is waited for,
        so it joins without the HW having passed records it lacks."""
        log = self.log
        if self.leader != self.broker_id or log is None:
            return False
        if now_ms is not None and now_ms > self.last_now_ms:
            self.last_now_ms = now_ms
        leader_leo = log.log_end_offset
        if log.high_watermark >= leader_leo:
            return False  # the HW is at our log end already (every idle partition)
        now = self.last_now_ms
        replicas = self.replicas
        isr_size = len(self.partition_state.isr)
        # The effective min.insync.replicas is at most the replication factor: with every
        # replica in the ISR (the usual case) it is met without reading the topic's config.
        if isr_size < max(len(replicas), 1) and isr_size < self.effective_min_isr():
            return False
        new_hw = leader_leo
        maximal = self.partition_state.maximal_isr
        for replica in maximal.union(replicas):
            if replica == self.broker_id:
                continue
            follower = self.followers.get(replica)
            # A member not heard from in this epoch holds the HW back (LEO unknown).
            leo = follower.log_end_offset if follower is not None else -1
            if leo >= new_hw:
                continue
            if replica in maximal or (
                    follower is not None
                    and self.waits_for_replica_to_join_isr(replica, follower, leader_leo, now)):
                new_hw = leo
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    def waits_for_replica_to_join_isr(self, replica_id: int, follower: FollowerState,
                                      leader_leo: int, now_ms: int) -> bool:
        """Kafka's ``shouldWaitForReplicaToJoinIsr``: a follower outside the ISR that is
        caught up (``Replica.isCaughtUp``) on a live broker holds the high watermark back."""
        caught_up = (follower.log_end_offset == leader_leo
                     or now_ms - follower.last_caught_up_ms <= self.replica_lag_time_max_ms)
        return caught_up and self.broker_alive(replica_id)

    # -- ISR changes (leader side, KIP-497) --------------------------------------------

    def propose_isr_expansion(self, replica_id: int) -> frozenset[int] | None:
        """The ISR to propose if ``replica_id`` caught up to the HW and this epoch's start."""
        if (replica_id in self.partition_state.isr or not self.is_leader or self.log is None
                or self.partition_state.is_inflight or replica_id not in self.replicas):
            return None
        follower = self.followers.get(replica_id)
        if follower is None:
            return None
        if (follower.log_end_offset >= self.log.high_watermark
                and follower.log_end_offset >= self.leader_epoch_start_offset):
            self.partition_state = PendingExpandIsr(replica_id, CommittedPartitionState(self.isr))
            return self.partition_state.proposed_isr
        return None

    def propose_isr_shrink(self, now_ms: int, max_lag_ms: int) -> frozenset[int] | None:
        """The ISR to propose without followers that have not caught up for ``max_lag_ms``."""
        if not self.is_leader or self.log is None or self.partition_state.is_inflight:
            return None
        out_of_sync = {
            r for r in self.isr
            if r != self.broker_id and self._lagging(r, now_ms, max_lag_ms)
        }
        if not out_of_sync:
            return None
        self.partition_state = PendingShrinkIsr(frozenset(out_of_sync),
                                                CommittedPartitionState(self.isr))
        return self.partition_state.proposed_isr

    def _lagging(self, replica_id: int, now_ms: int, max_lag_ms: int) -> bool:
        follower = self.followers.get(replica_id)
        if follower is None:
            return True
        if follower.log_end_offset >= self.log.log_end_offset:  # type: ignore[union-attr]
            return False
        return now_ms - follower.last_caught_up_ms > max_lag_ms

    def apply_isr_change(self, leader_epoch: int, isr: list[int], partition_epoch: int) -> bool:
        """The controller confirmed an ISR; False if it is for another epoch (ignored)."""
        self.partition_state = CommittedPartitionState(self.isr)
        if leader_epoch != self.leader_epoch or not self.is_leader:
            return False
        self.partition_state = CommittedPartitionState(frozenset(isr))
        self.partition_epoch = partition_epoch
        return True

    def abandon_isr_change(self) -> None:
        """The controller refused the change: wait for its next LeaderAndIsr or retry."""
        self.partition_state = CommittedPartitionState(self.isr)

    def read_replica_candidates(self, fetch_offset: int, now_ms: int) -> list[ReplicaView]:
        """KIP-392: the in-sync followers whose log covers ``fetch_offset``, as the leader
        last saw them (Kafka's ``ReplicaManager.findPreferredReadReplica``)."""
        out = []
        for replica in self.replicas:
            follower = self.followers.get(replica)
            if replica == self.broker_id or replica not in self.isr or follower is None:
                continue
            if follower.log_start_offset <= fetch_offset <= follower.log_end_offset:
                out.append(ReplicaView(replica, follower.log_end_offset,
                                       now_ms - follower.last_caught_up_ms))
        return out

    def low_watermark(self, alive: set[int] | None = None) -> int:
        """The smallest log start offset over this leader and its (live) followers (Kafka's
        ``Partition.lowWatermarkIfLeader``); DeleteRecords completes once it reaches the requested offset."""
        assert self.log is not None
        low = self.log.log_start_offset
        for replica in self.replicas:
            if replica == self.broker_id or (alive is not None and replica not in alive):
                continue
            follower = self.followers.get(replica)
            low = min(low, follower.log_start_offset if follower else -1)
        return low

    def check_enough_replicas_reach_offset(self, required_offset: int,
                                           min_insync_replicas: int | None = None,
                                           ) -> ErrorCode | None:
        """Kafka's ``Partition.checkEnoughReplicasReachOffset`` for an acks=all produce: None
        while waiting; NOT_LEADER_OR_FOLLOWER if this broker does not lead; once the high
        watermark passed the offset, NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if the maximal
        ISR fell below the effective min.insync.replicas meanwhile."""
        if not self.is_leader or self.log is None:
            return ErrorCode.not_leader_or_follower
        if self.log.high_watermark < required_offset:
            return None
        in_sync = len(self.partition_state.maximal_isr)
        if in_sync < max(len(self.replicas), 1) \
                and in_sync < self.effective_min_isr(min_insync_replicas):
            return ErrorCode.not_enough_replicas_after_append
        return ErrorCode.none


"""The replica manager: this broker's partitions, produce and fetch, LeaderAndIsr/StopReplica.

The asyncio shell around :class:`~weir.replication.partition.Partition` and the storage
engine: appends as leader, waits in the produce purgatory for ``acks=all``, serves fetches
up to the high watermark (consumers) or log end (followers) with long polling in the fetch
purgatory, and applies the controller's role changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition
from weir.config import BrokerConfig, default_value
from weir.protocol.errors import ErrorCode, KafkaError
from weir.replication.alter_partition import AlterPartitionManager, IsrProposal, IsrResult
from weir.replication.delayed_produce import DelayedProduce
from weir.replication.fetcher import (
    Clock,
    EndPointFactory,
    FetcherSettings,
    ReplicaFetcherManager,
    wall_clock_ms,
)
from weir.replication.leader_endpoint import BrokerEndPoint
from weir.replication.local_reads import READ_COMMITTED, READ_UNCOMMITTED, LocalReads
from weir.replication.notifier import LeadershipListener, PartitionNotifier
from weir.replication.partition import LeaderState, Partition
from weir.replication.purgatory import Purgatory
from weir.replication.throttle import ReplicationThrottles
from weir.storage.log import Log, LogConfig
from weir.storage.log_manager import LogManager
from weir.storage.producer_state import AppendOrigin
from weir.storage.topic_ids import consistent

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
CONSUMER_REPLICA_ID = -1
IsrChangesFactory = Callable[[Callable[[IsrResult], None]], AlterPartitionManager]
"""Builds a replica manager's AlterPartitionManager, given where the answers go."""
LEADER_AND_ISR_SLICE = 500
"""Partitions of a LeaderAndIsr applied per turn of the event loop (~20-40 ms of it on
this machine class): see :meth:`ReplicaManager.apply_leader_and_isr_sliced`."""


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.none
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    message: str | None = None
    # KIP-467: (batch index, message) of each record that made the batch be refused
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)


@dataclass(slots=True)
class PartitionStateUpdate:
    """One partition of a LeaderAndIsr request, decoded from the wire by the handler."""

    state: LeaderState
    topic_id: Any
    is_new: bool


@dataclass
class ReplicationSettings:
    """The replica manager's settings; the field defaults are the key table's (``fetcher``
    None: the fetcher's defaults for this broker), :meth:`from_config` reads a broker config."""

    replica_lag_time_max_ms: int = default_value("replica.lag.time.max.ms")
    fetcher: FetcherSettings | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig, security: Any = None) -> ReplicationSettings:
        """``security``: the inter-broker listener's TLS/SASL, for the fetchers."""
        return cls(replica_lag_time_max_ms=config.replica_lag_time_max_ms,
                   fetcher=FetcherSettings.from_config(config, security))


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager,
                 topic_log_config: Callable[[str], LogConfig],
                 topic_min_isr: Callable[[str], int],
                 settings: ReplicationSettings | None = None, *,
                 clock: Clock = wall_clock_ms,
                 endpoint_factory: EndPointFactory | None = None,
                 isr_changes: IsrChangesFactory | None = None,
                 broker_alive: Callable[[int], bool] | None = None) -> None:
        """``clock`` (ms) and ``endpoint_factory`` (how a fetcher reaches a leader; default:
        the network) let the simulation run this manager on virtual time and network.
        ``isr_changes(on_result)`` builds the AlterPartitionManager (None: proposals stay
        local).  ``broker_alive`` (the metadata cache's; default: all are): a caught-up
        follower outside the ISR holds the HW back only while alive (isReplicaIsrEligible)."""
        self.broker_id = broker_id
        self.clock = clock
        self.settings = settings or ReplicationSettings()
        self.alter_partition: AlterPartitionManager | None = (
            None if isr_changes is None else isr_changes(self.on_isr_result))
        self.log_manager = log_manager
        self.topic_log_config = topic_log_config
        self.topic_min_isr = topic_min_isr
        self.partitions: dict[TopicPartition, Partition] = {}
        self.produce_purgatory = Purgatory()
        self.fetch_purgatory = Purgatory()
        # What a high-watermark, ISR or leadership change wakes (the purgatories' waiters,
        # the leadership listeners).
        self.notifier = PartitionNotifier(self.produce_purgatory, self.fetch_purgatory)
        self.controller_epoch = -1
        self.received_full_leader_and_isr = False
        # Kafka's replicaStateChangeLock, for the sliced LeaderAndIsr (one at a time).
        self._leader_and_isr_lock = asyncio.Lock()
        # Logs being created off the event loop (create_new_logs), by partition: the task
        # that creates and adopts them.
        self._creating: dict[TopicPartition, asyncio.Future[None]] = {}
        self._delete_records_waiting: set[TopicPartition] = set()
        # Replication throttling (reassignment, KIP-73): unbounded until the broker calls
        # self.throttles.configure(leader_rate, follower_rate, topic_config).
        self.throttles = ReplicationThrottles(broker_id)
        # The follower side: fetchers see this manager only as FollowerLogs.
        self.fetchers = ReplicaFetcherManager(
            self, self.settings.fetcher or FetcherSettings(replica_id=broker_id),
            quota=self.throttles, clock=clock, endpoint_factory=endpoint_factory)
        # Called as listener(tp, is_leader, leader_epoch) after each role change this broker
        # applies (e.g. the group coordinator loads/unloads __consumer_offsets partitions).
        self.leadership_listeners: list[LeadershipListener] = \
            self.notifier.leadership_listeners
        # Metrics (weir.server.metrics): IsrShrinks/IsrExpands/FailedIsrUpdates counts.
        self.isr_shrinks = self.isr_expands = self.failed_isr_updates = 0
        # Kafka's BrokerTopicMetrics (broker-wide): client appends in (bytes out: self.reads).
        self.bytes_in = self.messages_in = 0
        # Reads of the local logs for Fetch (consumers and followers), with the purgatory.
        self.reads = LocalReads(
            broker_id, self.partitions, self.partition, log_manager, self.throttles,
            self.fetch_purgatory, clock, on_high_watermark_change=self.on_high_watermark_change,
            propose_isr=self._submit, delete_records_waiting=self._delete_records_waiting)
        self.broker_alive: Callable[[int], bool] = broker_alive or (lambda _broker_id: True)

    # -- lookups ---------------------------------------------------------------------

    def partition(self, tp: TopicPartition) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{tp} is not hosted here")
        self.log_manager.check_online(tp)  # a failed log dir: KAFKA_STORAGE_ERROR (JBOD)
        return p

    def leader_log(self, tp: TopicPartition, current_leader_epoch: int = -1) -> tuple[Partition, Log]:
        p = self.partition(tp)
        return p, p.require_leader(current_leader_epoch)

    def hosted_topic_by_id(self, topic_id: Any) -> str | None:
        """The topic of a hosted partition whose LeaderAndIsr named ``topic_id`` (KIP-516).
        A follower's Fetch v13 can reach its leader before the leader's metadata cache has
        the topic: the controller sends LeaderAndIsr before UpdateMetadata."""
        for tp, p in self.partitions.items():
            if p.topic_id == topic_id:
                return tp.topic
        return None

    # -- controller requests ---------------------------------------------------------

    def check_controller_epoch(self, controller_epoch: int) -> None:
        if controller_epoch < self.controller_epoch:
            raise KafkaError(
                ErrorCode.stale_controller_epoch,
                f"controller epoch {controller_epoch} is older than {self.controller_epoch}",
            )
        self.controller_epoch = controller_epoch

    async def close(self) -> None:
        await self.fetchers.close()
        if self.alter_partition is not None:
            await self.alter_partition.close()

    async def create_new_logs(self, controller_epoch: int,
                              updates: dict[TopicPartition, PartitionStateUpdate]) -> None:
        """Create the logs of the new replicas a LeaderAndIsr names on a worker thread
        before it is applied, so a new topic's thousands of directories and segment files
        do not stall the event loop (what cannot be done there is done inline by
        :meth:`apply_leader_and_isr`, as before).

        Each partition's log is created once: a request naming partitions whose creation
        another request began waits for that one (Kafka applies LeaderAndIsr requests one
        at a time under ``replicaStateChangeLock``).  A creation outlives the request that
        began it: when the controller's request times out and is sent again on a new
        connection, the first copy's handler is cancelled with its connection, and its
        logs are still adopted (not left, open, to the garbage collector while the second
        copy opens every file again — a 10,000-partition topic creation would hold twice
        its descriptors)."""
        self.check_controller_epoch(controller_epoch)
        waits = {f for tp in updates if (f := self._creating.get(tp)) is not None}
        wanted = [(tp, self.topic_log_config(tp.topic), _topic_id_str(u.topic_id))
                  for tp, u in updates.items()
                  if u.is_new and tp not in self.partitions and tp not in self._creating
                  and self.broker_id in u.state.replicas]
        plan = self.log_manager.plan_new_logs(wanted)
        if plan:
            task = asyncio.ensure_future(self._open_and_adopt(plan))
            for tp, *_ in plan:
                self._creating[tp] = task
            waits.add(task)
        if waits:
            # shield: cancelling this request does not abandon the creations it waits for.
            await asyncio.shield(asyncio.gather(*waits))

    async def _open_and_adopt(
            self, plan: list[tuple[TopicPartition, Any, LogConfig, str | None]]) -> None:
        try:
            made = await asyncio.to_thread(self.log_manager.open_new_logs, plan, self.clock())
            self.log_manager.adopt_logs(made)
        finally:
            for tp, *_ in plan:
                self._creating.pop(tp, None)

    def apply_leader_and_isr(self, controller_epoch: int,
                             updates: dict[TopicPartition, PartitionStateUpdate],
                             full: bool,
                             live_leaders: dict[int, BrokerEndPoint] | None = None,
                             ) -> dict[TopicPartition, ErrorCode]:
        """Apply a LeaderAndIsr in one go (see :meth:`apply_leader_and_isr_sliced`)."""
        self.check_controller_epoch(controller_epoch)
        results: dict[TopicPartition, ErrorCode] = {}
        self._apply_slice(list(updates.items()), self.clock(), live_leaders or {}, results)
        self._leader_and_isr_applied(updates, full)
        return results

    async def apply_leader_and_isr_sliced(
            self, controller_epoch: int, updates: dict[TopicPartition, PartitionStateUpdate],
            full: bool, live_leaders: dict[int, BrokerEndPoint] | None = None,
            slice_size: int = LEADER_AND_ISR_SLICE) -> tuple[dict[TopicPartition, ErrorCode],
                                                             float, int]:
        """Apply a LeaderAndIsr ``slice_size`` partitions per turn of the event loop.

        Kafka's ``ReplicaManager.becomeLeaderOrFollower`` runs on one request thread under
        ``replicaStateChangeLock`` while the other request threads go on answering
        Metadata, Produce and Fetch; here the event loop answers the other connections'
        requests between slices, so a client's Metadata does not wait for a LeaderAndIsr
        of thousands of partitions.  Each partition's role change is still applied whole,
        and LeaderAndIsr requests one at a time (a lock, as Kafka's).  The application is
        shielded: a handler cancelled midway (its connection closed) does not leave the
        request half applied.  Returns (per-partition errors, event-loop milliseconds spent
        applying, slices).
        """
        if slice_size < 1:
            raise ValueError(f"slice_size must be at least 1, not {slice_size}")
        task = asyncio.ensure_future(
            self._apply_sliced(controller_epoch, updates, full, live_leaders or {}, slice_size))
        return await asyncio.shield(task)

    async def _apply_sliced(self, controller_epoch: int,
                            updates: dict[TopicPartition, PartitionStateUpdate], full: bool,
                            live_leaders: dict[int, BrokerEndPoint], slice_size: int,
                            ) -> tuple[dict[TopicPartition, ErrorCode], float, int]:
        async with self._leader_and_isr_lock:
            self.check_controller_epoch(controller_epoch)
            results: dict[TopicPartition, ErrorCode] = {}
            items = list(updates.items())
            busy = 0.0
            slices = 0
            for start in range(0, len(items), slice_size):
                if start:
                    await asyncio.sleep(0)  # other connections' requests run here
                t0 = time.perf_counter()
                self._apply_slice(items[start:start + slice_size], self.clock(), live_leaders,
                                  results)
                busy += time.perf_counter() - t0
                slices += 1
            t0 = time.perf_counter()
            self._leader_and_isr_applied(updates, full)
            busy += time.perf_counter() - t0
            return results, busy * 1000, slices

    def _apply_slice(self, items: list[tuple[TopicPartition, PartitionStateUpdate]], now: int,
                     live_leaders: dict[int, BrokerEndPoint],
                     results: dict[TopicPartition, ErrorCode]) -> None:
        for tp, update in items:
            try:
                results[tp] = self._apply_one(tp, update, now, live_leaders)
            except KafkaError as exc:
                # Kafka's state-change log: an inconsistent topic id is an error, the rest
                # (stale epochs, unknown partitions, offline dirs) warnings.
                log.log(logging.ERROR if exc.code == ErrorCode.inconsistent_topic_id
                        else logging.WARNING, "LeaderAndIsr for %s refused: %s", tp, exc.message)
                results[tp] = exc.code

    def _leader_and_isr_applied(self, updates: dict[TopicPartition, PartitionStateUpdate],
                                full: bool) -> None:
        # The new epochs' leader-epoch checkpoints, one batch on the storage thread instead
        # of one fsync'd file per partition on the event loop (see weir.storage.epoch_cache).
        self.log_manager.schedule_epoch_checkpoints(
            [p.log for tp in updates if (p := self.partitions.get(tp)) is not None
             and p.log is not None])
        if full and not self.received_full_leader_and_isr:
            self.received_full_leader_and_isr = True
            self._remove_strays(set(updates))

    def _apply_one(self, tp: TopicPartition, update: PartitionStateUpdate, now: int,
                   live_leaders: dict[int, BrokerEndPoint]) -> ErrorCode:
        state = update.state
        # Kafka's HostedPartition.Offline comes first: a replica in a failed log dir answers
        # KAFKA_STORAGE_ERROR, so the controller marks it offline (JBOD, KIP-112).
        self.log_manager.check_online(tp)
        p = self.partitions.get(tp)
        current_epoch = p.leader_epoch if p is not None else -1
        # KIP-516, checked before the epoch as Kafka's becomeLeaderOrFollower does: a log
        # holding another topic id belongs to an older topic of the same name.
        topic_id = _topic_id_str(update.topic_id)
        held = p.log if p is not None and p.log is not None else self.log_manager.get_log(tp)
        if held is not None and not consistent(topic_id, held.topic_id):
            raise KafkaError(ErrorCode.inconsistent_topic_id,
                             f"{tp}: the log holds topic id {held.topic_id}, the controller "
                             f"names {topic_id}")
        # Kafka's ReplicaManager.becomeLeaderOrFollower (ZooKeeper controller): only a newer
        # leader epoch is applied; an equal or older one is ignored as stale, and a state
        # whose replica list lacks this broker is ignored as an unknown partition.  An
        # equal epoch may still give a log without a topic id the controller's.
        if (state.leader_epoch == current_epoch and topic_id is not None
                and held is not None and held.topic_id is None):
            self.log_manager.get_or_create_log(tp, topic_id=topic_id)
            log.info("%s: topic id %s assigned at leader epoch %d", tp, topic_id, current_epoch)
            return ErrorCode.none
        if state.leader_epoch <= current_epoch:
            what = "equals" if state.leader_epoch == current_epoch else "is older than"
            raise KafkaError(ErrorCode.stale_controller_epoch,
                             f"{tp}: leader epoch {state.leader_epoch} {what} the current "
                             f"{current_epoch}")
        if self.broker_id not in state.replicas:
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             f"{tp}: broker {self.broker_id} is not in the assigned replicas "
                             f"{state.replicas}")
        if p is None:
            p = Partition(tp, self.broker_id, topic_id=update.topic_id)
            p.replica_lag_time_max_ms = self.settings.replica_lag_time_max_ms
            p.broker_alive = self._broker_alive
            p.min_insync_replicas = lambda topic=tp.topic: self.topic_min_isr(topic)
        if p.log is None:
            p.log = self.log_manager.get_or_create_log(
                tp, self.topic_log_config(tp.topic), topic_id=topic_id, is_new=update.is_new,
            )
        self.partitions[tp] = p
        if update.state.leader == self.broker_id:
            if p.make_leader(update.state, now, defer_checkpoint=True):
                self.fetchers.remove(tp)
                log.debug("became leader of %s at epoch %d (ISR %s, LEO %d)", tp,
                         p.leader_epoch, sorted(p.isr), p.log.log_end_offset)
        elif p.make_follower(update.state):
            self.fetchers.remove(tp)
            endpoint = live_leaders.get(p.leader)
            if endpoint is None:
                # KAFKA-1647 (ReplicaManager.makeFollowers): keep the replica, fetch once the
                # leader is alive.
                log.warning("%s: leader %d is not alive; not fetching yet", tp, p.leader)
            else:
                # Truncation to the divergence point happens in the fetcher (KIP-101/279).
                self.fetchers.add(tp, endpoint, p.leader_epoch, p.log.log_end_offset)
            log.debug("became follower of %s, leader %d epoch %d", tp, p.leader, p.leader_epoch)
        # Waiters on this partition complete now: a role change may have fenced them.
        self.notifier.leadership_changed(tp, p.is_leader, p.leader_epoch)
        return ErrorCode.none

    def _broker_alive(self, broker_id: int) -> bool:
        return self.broker_alive(broker_id)

    def _remove_strays(self, named: set[TopicPartition]) -> None:
        for tp in list(self.log_manager.all_logs()):
            if tp not in named:
                log.info("removing stray partition %s (not in the first full LeaderAndIsr)", tp)
                self.partitions.pop(tp, None)
                self.log_manager.delete_log(tp)

    def stop_replicas(self, controller_epoch: int,
                      partitions: dict[TopicPartition, tuple[int, bool]]) -> dict[TopicPartition, ErrorCode]:
        """StopReplica: each tp maps to (leader_epoch, delete)."""
        self.check_controller_epoch(controller_epoch)
        results = {}
        for tp, (leader_epoch, delete) in partitions.items():
            p = self.partitions.get(tp)
            if p is not None and 0 <= leader_epoch < p.leader_epoch:
                results[tp] = ErrorCode.fenced_leader_epoch
                continue
            self.fetchers.remove(tp)
            if p is not None:
                was_leader = p.is_leader
                p.leader = -1
                self.notifier.leadership_changed(tp, False, p.leader_epoch,
                                                 tell_listeners=was_leader)
            if delete:
                try:
                    self.log_manager.check_online(tp)
                except KafkaError as exc:  # in a failed log dir (JBOD): it cannot go yet
                    results[tp] = exc.code
                    continue
                self.partitions.pop(tp, None)
                if self.log_manager.get_log(tp) is not None:
                    self.log_manager.delete_log(tp)
            results[tp] = ErrorCode.none
        return results

    # -- produce ---------------------------------------------------------------------

    async def append(self, acks: int, timeout_ms: int,
                     entries: dict[TopicPartition, bytes],
                     origin: AppendOrigin = AppendOrigin.CLIENT,
                     verification: dict[TopicPartition, object | None] | None = None,
                     ) -> dict[TopicPartition, ProduceResult]:
        """:meth:`append_now` with its wait awaited: the final results."""
        results, wait = self.append_now(acks, timeout_ms, entries, origin, verification)
        if wait is not None:
            await wait
        return results

    def append_now(self, acks: int, timeout_ms: int, entries: dict[TopicPartition, bytes],
                   origin: AppendOrigin = AppendOrigin.CLIENT,
                   verification: dict[TopicPartition, object | None] | None = None,
                   ) -> tuple[dict[TopicPartition, ProduceResult],
                              Coroutine[Any, Any, None] | None]:
        """Kafka's ``ReplicaManager.appendRecords``: ``origin`` CLIENT for Produce,
        COORDINATOR for the group and transaction coordinators' writes and transaction
        markers (no sequence checks, control batches allowed).  ``verification``: with
        transaction verification on (KIP-890), the guard of each partition (None where the
        producer's transaction is already open there).

        The results, and None when they are final (``acks`` 0 or 1, or ``acks=all``
        replicated already, as with one replica); else the wait of the request's
        :class:`DelayedProduce` in the produce purgatory (a coroutine that completes the
        results)."""
        results: dict[TopicPartition, ProduceResult] = {}
        waiting = self._append_local(acks, entries, origin, verification, results)
        if not waiting:
            return results, None
        # Kafka's first DelayedProduce.tryComplete, right after the append (this broker
        # leads each partition in the same leadership: nothing waited in between).
        op = DelayedProduce(waiting, results, self.partitions)
        if op.try_complete():
            return results, None
        return results, self.produce_purgatory.watch(op, timeout_ms / 1000)

    def _append_local(self, acks: int, entries: dict[TopicPartition, bytes],
                      origin: AppendOrigin,
                      verification: dict[TopicPartition, object | None] | None,
                      results: dict[TopicPartition, ProduceResult]) -> dict[TopicPartition, int]:
        """Kafka's ``appendToLocalLog``: the results into ``results``; the offsets that
        ``acks=all`` partitions wait for."""
        waiting: dict[TopicPartition, int] = {}
        now = self.clock()
        for tp, records in entries.items():
            try:
                p, plog = self.leader_log(tp)
                if acks == -1 and len(p.partition_state.isr) < max(len(p.replicas), 1):
                    # (with every replica in sync any min.insync.replicas is met: it is
                    # capped at the replication factor)
                    p.check_min_isr(self.topic_min_isr(tp.topic))
                if verification is None:
                    info = plog.append_as_leader(records, p.leader_epoch, now, origin)
                else:
                    info = plog.append_as_leader(records, p.leader_epoch, now, origin,
                                                 verification=(verification.get(tp),))
                results[tp] = ProduceResult(ErrorCode.none, info.first_offset,
                                            info.log_append_time_ms, info.log_start_offset)
                if not info.duplicate:
                    self.bytes_in += len(records)
                    self.messages_in += info.last_offset - info.first_offset + 1
                    p.maybe_increment_high_watermark(now)
                    self.notifier.records_appended(tp)
                if acks == -1:
                    waiting[tp] = info.last_offset + 1
            except KafkaError as exc:
                results[tp] = ProduceResult(error=exc.code, message=exc.message,
                                            record_errors=getattr(exc, "record_errors", []))
        return waiting

    def start_transaction_verification(self, tp: TopicPartition, producer_id: int,
                                       sequence: int, epoch: int) -> object | None:
        """KIP-890: the guard of a verification this partition's leader starts for the
        producer, None if its transaction is already open here (no verification needed)."""
        _p, plog = self.leader_log(tp)
        return plog.producer_state.maybe_start_verification(producer_id, sequence, epoch,
                                                             self.clock())

    def on_high_watermark_change(self, tp: TopicPartition) -> None:
        self.notifier.high_watermark_changed(tp)

    # -- delete records ----------------------------------------------------------------

    async def delete_records(self, offsets: dict[TopicPartition, int], timeout_ms: int,
                             alive: Callable[[], set[int]]) -> dict[TopicPartition, tuple[ErrorCode, int]]:
        """Move log start offsets (offset -1: the high watermark); wait for the replicas."""
        results: dict[TopicPartition, tuple[ErrorCode, int]] = {}
        waiting: dict[TopicPartition, int] = {}
        for tp, offset in offsets.items():
            try:
                p, plog = self.leader_log(tp)
                target = plog.high_watermark if offset == -1 else offset
                if target < 0 or target > plog.high_watermark:
                    raise KafkaError(ErrorCode.offset_out_of_range,
                                     f"{tp}: {offset} is beyond the high watermark "
                                     f"{plog.high_watermark}")
                if target > plog.log_start_offset:
                    plog.delete_records_before(target)
                waiting[tp] = target
                results[tp] = (ErrorCode.none, p.low_watermark(alive()))
            except KafkaError as exc:
                results[tp] = (exc.code, -1)

        def status(tp: TopicPartition) -> tuple[ErrorCode, int] | None:
            """Kafka's DelayedDeleteRecords.tryComplete: None while waiting; an error (with no
            low watermark) once this broker no longer leads the partition."""
            p = self.partitions.get(tp)
            if p is None:
                return ErrorCode.unknown_topic_or_partition, -1
            if not p.is_leader or p.log is None:
                return ErrorCode.not_leader_or_follower, -1
            lw = p.low_watermark(alive())
            return (ErrorCode.none, lw) if lw >= waiting[tp] else None

        if waiting:
            self._delete_records_waiting.update(waiting)
            try:
                await self.fetch_purgatory.wait(
                    waiting, lambda: all(status(tp) is not None for tp in waiting),
                    timeout_ms / 1000)
            finally:
                for tp in waiting:
                    self._delete_records_waiting.discard(tp)
            for tp in waiting:
                final = status(tp)
                if final is None:
                    p = self.partitions[tp]
                    final = (ErrorCode.request_timed_out, p.low_watermark(alive()))
                results[tp] = final
        return results

    # -- follower side -----------------------------------------------------------------

    def follower_log(self, tp: TopicPartition) -> Log | None:
        """The log of a partition this broker follows (None if it leads or dropped it)."""
        p = self.partitions.get(tp)
        if p is None or p.is_leader or p.log is None:
            return None
        if p.log.offline_reason is not None:
            # A write or sync of it failed: its dir goes offline now (Kafka reports every
            # I/O error to the LogDirFailureChannel at once), which stops this fetch.
            with contextlib.suppress(KafkaError):
                self.log_manager.check_online(tp)
            return None
        return p.log

    def schedule_epoch_checkpoints(self, logs: list[Log]) -> None:
        """Checkpoints a follower's truncation left unwritten go to the storage thread."""
        self.log_manager.schedule_epoch_checkpoints(logs)

    def is_in_sync(self, tp: TopicPartition) -> bool:
        """Whether this broker is in the ISR of ``tp`` (its follower quota spares it)."""
        p = self.partitions.get(tp)
        return p is not None and self.broker_id in p.isr

    def on_follower_fetched(self, tp: TopicPartition, leader_hw: int,
                            leader_log_start: int) -> None:
        """After a fetch response: follower HW = min(leader's HW, own LEO); follow the start."""
        plog = self.follower_log(tp)
        if plog is None:
            return
        plog.update_high_watermark(min(leader_hw, plog.log_end_offset))
        start = min(leader_log_start, plog.high_watermark)
        if start > plog.log_start_offset:
            plog.delete_records_before(start)
        self.notifier.records_appended(tp)

    # -- ISR changes (leader side) -------------------------------------------------------

    def _submit(self, p: Partition, isr: frozenset[int] | None) -> None:
        if isr is None:
            return
        if self.alter_partition is None or p.topic_id is None:
            p.abandon_isr_change()
            return
        log.info("%s: proposing ISR %s (was %s)", p.tp, sorted(isr), sorted(p.isr))
        self.alter_partition.submit(IsrProposal(p.tp, p.topic_id, p.leader_epoch,
                                                p.partition_epoch, isr))

    def maybe_shrink_isr(self) -> None:
        """Periodic: propose removing followers that have not caught up in time."""
        now = self.clock()
        for p in self.partitions.values():
            if p.is_leader:
                self._submit(p, p.propose_isr_shrink(now, self.settings.replica_lag_time_max_ms))

    def on_isr_result(self, result: IsrResult) -> None:
        p = self.partitions.get(result.tp)
        if p is None:
            return
        if result.error != ErrorCode.none:
            log.info("%s: ISR change refused by the controller: %s", result.tp,
                     result.error.name)
            p.abandon_isr_change()
            self.failed_isr_updates += 1  # metrics
            return
        before = set(p.isr)  # metrics: for the shrink/expand counters below
        if p.apply_isr_change(result.leader_epoch, list(result.isr), result.partition_epoch):
            self.isr_shrinks += bool(before - p.isr)  # metrics
            self.isr_expands += bool(p.isr - before)  # metrics
            log.info("%s: ISR is now %s (partition epoch %d)", result.tp, sorted(p.isr),
                     p.partition_epoch)
            # As Kafka's Partition.maybeShrinkIsr/expandIsr: waiting fetches are retried
            # only if the high watermark moved (thousands of ISR changes retrying every
            # parked follower fetch each time took minutes of event loop at 10,000
            # partitions); waiting produces are cheap and may now fail on min.insync.replicas.
            self.notifier.isr_changed(result.tp,
                                      p.maybe_increment_high_watermark(self.clock()))

    # -- offsets ---------------------------------------------------------------------

    def list_offset(self, tp: TopicPartition, timestamp: int, current_leader_epoch: int,
                    replica_id: int, isolation_level: int = READ_UNCOMMITTED,
                    ) -> tuple[int, int, int]:
        """(offset, timestamp, leader_epoch) for ListOffsets; a read_committed consumer's
        latest offset is the last stable offset (KIP-98)."""
        _p, plog = self.leader_log(tp, current_leader_epoch)
        visible = (plog.last_stable_offset if isolation_level == READ_COMMITTED
                   else plog.high_watermark)
        if timestamp == EARLIEST_TIMESTAMP:
            offset = plog.log_start_offset
            return offset, -1, _epoch_at(plog, offset)
        if timestamp == LATEST_TIMESTAMP:
            offset = plog.log_end_offset if replica_id >= 0 else visible
            return offset, -1, _epoch_at(plog, offset)
        if timestamp == MAX_TIMESTAMP:
            found = plog.max_timestamp_and_offset()
            if found is None:
                return -1, -1, -1
            offset, ts = found
            return offset, ts, _epoch_at(plog, offset)
        found = plog.offset_for_timestamp(timestamp)
        if found is None or (replica_id < 0 and found[0] >= visible):
            return -1, -1, -1
        offset, ts = found
        return offset, ts, _epoch_at(plog, offset)


def _epoch_at(plog: Log, offset: int) -> int:
    epoch = plog.epoch_cache.epoch_for_offset(offset)
    return -1 if epoch is None else epoch


def _topic_id_str(topic_id: Any) -> str | None:
    """Kafka's ``Uuid.toString`` of a request's topic id; None for none or the zero id
    (``topicIdFromRequest``: a topic without an id)."""
    if topic_id is None or topic_id.int == 0:
        return None
    from weir.coordination.codecs import topic_id_to_str

    return topic_id_to_str(topic_id)

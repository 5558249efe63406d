"""Replica fetchers: one per source broker, carrying every partition this broker follows
there in one Fetch request (Kafka's ``AbstractFetcherThread`` / ``ReplicaFetcherThread``, as
an asyncio task).

Each partition is *truncating* (find the divergence point with OffsetForLeaderEpoch, see
:mod:`weir.replication.truncation`) or *fetching* (Kafka's ``ReplicaState``), and may be
*delayed* besides (backing off after an error such as a fenced epoch, waiting for the
controller's next LeaderAndIsr; Kafka's ``PartitionFetchState.delay``): a delayed partition
keeps its state, so a truncating one never fetches untruncated.  After each truncation the
fetch offset is the truncation point; a walk back that is not final (KIP-279) stays
truncating and asks again, as Kafka's ``AbstractFetcherThread``.  A response is applied only
if the partition is still fetched with the same state object (same leader epoch) and offset
it was asked for, so a partition removed or re-added while a request was in flight is never
corrupted.

The fetcher talks to the leader only through a
:class:`~weir.replication.leader_endpoint.LeaderEndPoint` (over the network, or simulated),
sees this broker's replicas only through :class:`FollowerLogs`, reads time only from its
injected clock, and is throttled by an injected :class:`FollowerQuota` (KIP-73).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from weir.asyncutil import cancel_and_wait
from weir.common import TopicPartition
from weir.config import BrokerConfig, default_value
from weir.protocol.errors import ErrorCode, KafkaError
from weir.replication import truncation
from weir.replication.leader_endpoint import (
    BrokerEndPoint,
    FetchedPartition,
    FetchParams,
    LeaderEndPoint,
    PartitionFetch,
    RemoteLeaderEndPoint,
)

if TYPE_CHECKING:
    from weir.storage.log import Log

__all__ = [
    "Clock",
    "EndPointFactory",
    "FetcherSettings",
    "FollowerLogs",
    "FollowerQuota",
    "PartitionFetchState",
    "ReplicaFetcher",
    "ReplicaFetcherManager",
    "ReplicaState",
    "wall_clock_ms",
]

log = logging.getLogger(__name__)

THROTTLE_PAUSE_S = 0.1  # every partition held back by the follower throttle: wait this long
# Bytes of fetched records a fetcher appends before it lets the event loop run other work.
# Kafka's fetcher is a thread of its own; here a response of replica.fetch.response.max.bytes
# (10 MiB, many partitions) would otherwise be appended in one loop step, stalling every
# request this broker serves as a leader meanwhile.  One partition's answer (at most
# replica.fetch.max.bytes) is still appended in one step: a batch is never split.
APPLY_YIELD_BYTES = 1 << 20

Clock = Callable[[], int]  # milliseconds


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class ReplicaState(enum.Enum):
    """Kafka's ``ReplicaState``: what the fetcher does next for a partition."""

    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass(slots=True)
class PartitionFetchState:
    """One followed partition in a fetcher (Kafka's ``PartitionFetchState``)."""

    tp: TopicPartition
    leader_epoch: int
    fetch_offset: int
    state: ReplicaState = ReplicaState.TRUNCATING
    delay_until_ms: int | None = None  # backing off until then (Kafka's ``delay``)
    lag: int = 0  # the leader's high watermark minus our fetch offset, after each response

    def is_delayed(self, now_ms: int) -> bool:
        return self.delay_until_ms is not None and now_ms < self.delay_until_ms

    def is_ready(self, state: ReplicaState, now_ms: int) -> bool:
        """In ``state`` and not backing off (Kafka's ``isReadyForFetch`` / ``isTruncating``)."""
        return self.state is state and not self.is_delayed(now_ms)


class FollowerLogs(Protocol):
    """What a fetcher needs of this broker's replicas (the replica manager, narrowed)."""

    def follower_log(self, tp: TopicPartition) -> Log | None:
        """The log of a partition this broker follows (None if it leads or dropped it)."""
        ...

    def is_in_sync(self, tp: TopicPartition) -> bool:
        """Whether this broker is in the partition's ISR (in-sync replicas are never
        throttled)."""
        ...

    def on_follower_fetched(self, tp: TopicPartition, leader_hw: int,
                            leader_log_start: int) -> None:
        """After records were applied: follow the leader's high watermark and log start."""
        ...

    def schedule_epoch_checkpoints(self, logs: list[Log]) -> None:
        """Write the leader-epoch checkpoints these logs' truncations left unwritten, later,
        off the event loop (the log manager's storage thread)."""
        ...


class FollowerQuota(Protocol):
    """The follower side of the replication quota (``ReplicationThrottles``, KIP-73)."""

    def follower_throttled(self, tp: TopicPartition, in_sync: bool, now_ms: int) -> bool: ...

    def record_follower(self, tp: TopicPartition, in_sync: bool, size: int,
                        now_ms: int) -> None: ...


class _Unthrottled:
    def follower_throttled(self, tp: TopicPartition, in_sync: bool, now_ms: int) -> bool:
        return False

    def record_follower(self, tp: TopicPartition, in_sync: bool, size: int,
                        now_ms: int) -> None:
        return None


@dataclass
class FetcherSettings:
    """A follower's fetch settings (Kafka's ``replica.fetch.*`` keys); the field defaults
    are the key table's, :meth:`from_config` reads a broker config."""

    replica_id: int
    max_wait_ms: int = default_value("replica.fetch.wait.max.ms")
    min_bytes: int = default_value("replica.fetch.min.bytes")
    max_bytes: int = default_value("replica.fetch.response.max.bytes")
    partition_max_bytes: int = default_value("replica.fetch.max.bytes")
    backoff_ms: int = default_value("replica.fetch.backoff.ms")
    socket_timeout_ms: int = default_value("replica.socket.timeout.ms")
    # SO_RCVBUF of the connection to the leader (-1: the OS's own, autotuned)
    receive_buffer_bytes: int = default_value("replica.socket.receive.buffer.bytes")
    # TLS/SASL of the inter-broker listener (weir.security.client.InterBrokerSecurity).
    security: Any = None

    @classmethod
    def from_config(cls, config: BrokerConfig, security: Any = None) -> FetcherSettings:
        return cls(
            replica_id=config.broker_id,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_response_max_bytes,
            partition_max_bytes=config.replica_fetch_max_bytes,
            backoff_ms=config.replica_fetch_backoff_ms,
            socket_timeout_ms=config.replica_socket_timeout_ms,
            receive_buffer_bytes=config.replica_socket_receive_buffer_bytes,
            security=security,
        )

    @property
    def fetch_params(self) -> FetchParams:
        return FetchParams(self.replica_id, self.max_wait_ms, self.min_bytes, self.max_bytes)

    def remote_endpoint(self, broker: BrokerEndPoint) -> LeaderEndPoint:
        """The default :class:`LeaderEndPoint`: the leader over the inter-broker listener."""
        return RemoteLeaderEndPoint(broker, client_id=f"replica-fetcher-{self.replica_id}",
                                    security=self.security,
                                    socket_timeout_ms=self.socket_timeout_ms,
                                    receive_buffer_bytes=self.receive_buffer_bytes)


class ReplicaFetcher:
    """Fetches every partition this broker follows on one leader broker."""

    def __init__(self, leader: LeaderEndPoint, logs: FollowerLogs, settings: FetcherSettings,
                 quota: FollowerQuota | None = None, clock: Clock = wall_clock_ms) -> None:
        self.leader = leader
        self.logs = logs
        self.settings = settings
        self.quota: FollowerQuota = quota if quota is not None else _Unthrottled()
        self.clock = clock
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()

    @property
    def source(self) -> BrokerEndPoint:
        return self.leader.broker

    # -- membership --------------------------------------------------------------------

    def add(self, tp: TopicPartition, leader_epoch: int, fetch_offset: int) -> None:
        self.partitions[tp] = PartitionFetchState(tp, leader_epoch, fetch_offset)
        self._wakeup.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"fetcher-{self.source.broker_id}")

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        await self.leader.close()

    # -- the loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self.do_work()
            except asyncio.CancelledError:
                raise
            except (ConnectionError, OSError, TimeoutError) as exc:
                log.info("fetcher for broker %d: %s; retrying", self.source.broker_id, exc)
                await self.leader.reset()
                await asyncio.sleep(self.settings.backoff_ms / 1000)
            except Exception:
                log.exception("fetcher for broker %d failed; retrying", self.source.broker_id)
                await self.leader.reset()
                await asyncio.sleep(self.settings.backoff_ms / 1000)

    async def do_work(self) -> None:
        """One round (Kafka's ``doWork``): truncate what must be, then fetch; idle until a
        partition is ready when none is."""
        if not self._ready(ReplicaState.TRUNCATING) and not self._ready(ReplicaState.FETCHING):
            self._wakeup.clear()
            await self._idle()
            return
        if self._ready(ReplicaState.TRUNCATING):
            await self.truncate()
        if self._ready(ReplicaState.FETCHING):
            await self.fetch()

    def _ready(self, state: ReplicaState) -> list[PartitionFetchState]:
        now = self.clock()
        return [st for st in self.partitions.values() if st.is_ready(state, now)]

    async def _idle(self) -> None:
        now = self.clock()
        delays = [st.delay_until_ms for st in self.partitions.values()
                  if st.delay_until_ms is not None and st.is_delayed(now)]
        timeout = max(min(delays) - now, 10) / 1000 if delays else None
        try:
            async with asyncio.timeout(timeout):
                await self._wakeup.wait()
        except TimeoutError:
            pass

    def _delay(self, st: PartitionFetchState, reason: str) -> None:
        log.info("%s: delaying fetch from broker %d: %s", st.tp, self.source.broker_id, reason)
        st.delay_until_ms = self.clock() + self.settings.backoff_ms

    def _still(self, st: PartitionFetchState, state: ReplicaState) -> bool:
        """The partition is still fetched here with this very state object, in ``state``."""
        return self.partitions.get(st.tp) is st and st.state is state

    # -- truncation (KIP-101/279) ------------------------------------------------------

    async def truncate(self) -> None:
        """Kafka's ``maybeTruncate``: ask the leader where each truncating partition's
        latest epoch ends, and truncate there."""
        asked: dict[TopicPartition, PartitionFetchState] = {}
        epochs: dict[TopicPartition, tuple[int, int]] = {}
        fallback: list[TopicPartition] = []
        for st in self._ready(ReplicaState.TRUNCATING):
            plog = self.logs.follower_log(st.tp)
            if plog is None:
                self.remove(st.tp)
                continue
            epoch = plog.epoch_cache.latest_epoch
            if epoch < 0:
                # No epoch known: KIP-101's fallback is the high watermark.
                plog.truncate_to(min(plog.high_watermark, plog.log_end_offset))
                self._start_fetching(st, plog.log_end_offset)
                fallback.append(st.tp)
                continue
            asked[st.tp] = st
            epochs[st.tp] = (st.leader_epoch, epoch)
        if not epochs:
            self._schedule_checkpoints(fallback)
            return
        answers = await self.leader.fetch_epoch_end_offsets(self.settings.replica_id, epochs)
        for tp, answer in answers.items():
            st = asked.get(tp)
            if st is None or not self._still(st, ReplicaState.TRUNCATING) \
                    or st.is_delayed(self.clock()):
                continue  # removed, re-added (another epoch) or delayed meanwhile
            if answer.error != ErrorCode.none:
                self._delay(st, f"OffsetForLeaderEpoch: {answer.error.name}")
                continue
            self._apply_epoch_answer(st, answer.leader_epoch, answer.end_offset)
        self._schedule_checkpoints([*fallback, *asked])

    def _schedule_checkpoints(self, tps: Iterable[TopicPartition]) -> None:
        dirty = [plog for tp in tps if (plog := self.logs.follower_log(tp)) is not None
                 and plog.epoch_cache.dirty]
        if dirty:
            self.logs.schedule_epoch_checkpoints(dirty)

    def _apply_epoch_answer(self, st: PartitionFetchState, leader_epoch: int, end_offset: int,
                            on_fetch: bool = False) -> None:
        """Truncate as the leader's (epoch, end offset) decides; the fetch offset becomes the
        truncation point.  From OffsetForLeaderEpoch, a walk back that is not final stays
        truncating (ask again with our now-latest epoch); from a fetch's diverging epoch
        (``on_fetch``) the partition keeps fetching, and the next fetch's last-fetched epoch
        lets the leader report the next divergence (Kafka's
        updateFetchOffsetAndMaybeMarkTruncationComplete with truncation on fetch)."""
        plog = self.logs.follower_log(st.tp)
        if plog is None:
            return
        decision = truncation.after_leader_epoch_answer(
            leader_epoch, end_offset, plog.epoch_cache, plog.log_end_offset,
            plog.high_watermark)
        if decision.offset < plog.log_end_offset:
            # Offsets in this range are not on the leader: after an unclean election (or
            # never-committed writes) this is the range of records discarded here.
            log.warning("%s: truncating to %d, discarding offsets %d..%d (leader epoch %d "
                        "ends at %d)", st.tp, decision.offset, decision.offset,
                        plog.log_end_offset - 1, leader_epoch, end_offset)
        truncation.apply(plog, decision)
        st.fetch_offset = plog.log_end_offset
        if decision.completed or on_fetch:
            self._start_fetching(st, plog.log_end_offset)

    def _start_fetching(self, st: PartitionFetchState, offset: int) -> None:
        st.fetch_offset = offset
        st.state = ReplicaState.FETCHING
        st.delay_until_ms = None

    # -- fetching --------------------------------------------------------------------

    async def fetch(self) -> None:
        """Kafka's ``maybeFetch`` + ``processFetchRequest``: one Fetch for every partition
        ready to fetch and not throttled; apply what came back."""
        asked: dict[TopicPartition, tuple[PartitionFetchState, int]] = {}
        wanted: dict[TopicPartition, PartitionFetch] = {}
        throttled = False
        for st in self._ready(ReplicaState.FETCHING):
            plog = self.logs.follower_log(st.tp)
            if plog is None:
                self.remove(st.tp)
                continue
            if self._throttled(st.tp):  # follower-side replication throttle
                throttled = True
                continue
            asked[st.tp] = (st, st.fetch_offset)
            wanted[st.tp] = PartitionFetch(
                fetch_offset=st.fetch_offset, current_leader_epoch=st.leader_epoch,
                last_fetched_epoch=plog.epoch_cache.latest_epoch,
                log_start_offset=plog.log_start_offset,
                partition_max_bytes=self.settings.partition_max_bytes,
                topic_id=plog.topic_id)  # KIP-516: the leader checks it against its log
        if not wanted:
            if throttled:
                await asyncio.sleep(THROTTLE_PAUSE_S)
            return
        answer = await self.leader.fetch(self.settings.fetch_params, wanted)
        if answer.error != ErrorCode.none:
            if answer.back_off:
                await asyncio.sleep(self.settings.backoff_ms / 1000)
            return
        applied = 0  # record bytes appended since the loop last ran other work
        for tp, part in answer.partitions.items():
            if applied >= APPLY_YIELD_BYTES:
                applied = 0
                await asyncio.sleep(0)  # the checks below see what changed meanwhile
            entry = asked.get(tp)
            if entry is None:
                continue
            st, offset = entry
            if not self._still(st, ReplicaState.FETCHING) or st.fetch_offset != offset \
                    or st.is_delayed(self.clock()):
                continue  # changed while the request was in flight (or the loop ran)
            try:
                await self._apply_fetched(st, part)
            except KafkaError as exc:
                self._delay(st, exc.message)
            applied += len(part.records)

    async def _apply_fetched(self, st: PartitionFetchState, part: FetchedPartition) -> None:
        if part.error == ErrorCode.offset_out_of_range:
            await self._handle_out_of_range(st)
            return
        if part.error != ErrorCode.none:
            self._delay(st, part.error.name)
            return
        plog = self.logs.follower_log(st.tp)
        if plog is None:
            self.remove(st.tp)
            return
        if part.diverging_epoch is not None:
            self._apply_epoch_answer(st, *part.diverging_epoch, on_fetch=True)
            self._schedule_checkpoints([st.tp])
            return
        if part.records:
            plog.append_as_follower(part.records, self.clock())
            self.quota.record_follower(st.tp, self.logs.is_in_sync(st.tp), len(part.records),
                                       self.clock())
        st.fetch_offset = plog.log_end_offset
        st.lag = max(part.high_watermark - st.fetch_offset, 0)
        self.logs.on_follower_fetched(st.tp, part.high_watermark, part.log_start_offset)

    def _throttled(self, tp: TopicPartition) -> bool:
        return self.quota.follower_throttled(tp, self.logs.is_in_sync(tp), self.clock())

    async def _handle_out_of_range(self, st: PartitionFetchState) -> None:
        """The leader's log no longer covers our fetch offset (Kafka's
        ``handleOutOfRangeError`` / ``fetchOffsetAndTruncate``).  The log is looked up again
        after each question to the leader: the partition may have been removed (its log
        deleted by StopReplica) or re-added while the answer was on its way."""
        replica_id = self.settings.replica_id
        leader_end = await self.leader.fetch_latest_offset(replica_id, st.tp, st.leader_epoch)
        plog = self._log_if_still_fetching(st)
        if plog is None:
            return
        if leader_end < plog.log_end_offset:
            log.warning("%s: leader's log ends at %d, below ours (%d); truncating", st.tp,
                        leader_end, plog.log_end_offset)
            plog.truncate_to(leader_end)
            st.fetch_offset = plog.log_end_offset
            return
        leader_start = await self.leader.fetch_earliest_offset(replica_id, st.tp,
                                                               st.leader_epoch)
        plog = self._log_if_still_fetching(st)
        if plog is None:
            return
        if leader_start > plog.log_end_offset:
            log.warning("%s: our log ends at %d, before the leader's start %d; starting over",
                        st.tp, plog.log_end_offset, leader_start)
            plog.truncate_fully_and_start_at(leader_start)
        st.fetch_offset = plog.log_end_offset

    def _log_if_still_fetching(self, st: PartitionFetchState) -> Log | None:
        if not self._still(st, ReplicaState.FETCHING):
            return None
        return self.logs.follower_log(st.tp)


EndPointFactory = Callable[[BrokerEndPoint], LeaderEndPoint]


class ReplicaFetcherManager:
    """Owns the fetchers; partitions move between them as leaders change (Kafka's
    ``AbstractFetcherManager``)."""

    def __init__(self, logs: FollowerLogs, settings: FetcherSettings,
                 quota: FollowerQuota | None = None, clock: Clock = wall_clock_ms,
                 endpoint_factory: EndPointFactory | None = None) -> None:
        self.logs = logs
        self.settings = settings
        self.quota = quota
        self.clock = clock
        self.endpoint_factory: EndPointFactory = endpoint_factory or settings.remote_endpoint
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._where: dict[TopicPartition, int] = {}
        self._closing: set[asyncio.Future[None]] = set()  # fetchers being closed

    def add(self, tp: TopicPartition, leader: BrokerEndPoint, leader_epoch: int,
            fetch_offset: int) -> None:
        self.remove(tp)
        fetcher = self.fetchers.get(leader.broker_id)
        if fetcher is not None and fetcher.source != leader:
            # The leader broker came back on another endpoint: start over.
            closing = asyncio.ensure_future(fetcher.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(self.endpoint_factory(leader), self.logs, self.settings,
                                     self.quota, self.clock)
            self.fetchers[leader.broker_id] = fetcher
        fetcher.add(tp, leader_epoch, fetch_offset)
        self._where[tp] = leader.broker_id

    def remove(self, tp: TopicPartition) -> None:
        source = self._where.pop(tp, None)
        if source is not None and source in self.fetchers:
            self.fetchers[source].remove(tp)

    def lag(self, tp: TopicPartition) -> int | None:
        source = self._where.get(tp)
        st = self.fetchers[source].partitions.get(tp) if source in self.fetchers else None
        return None if st is None else st.lag

    def abandon(self) -> list[asyncio.Task[None]]:
        """The process dies (a simulated crash): cancel every fetcher's task at once,
        without waiting or closing anything; returns the tasks (the caller keeps them
        referenced until they finish)."""
        tasks = [f._task for f in self.fetchers.values() if f._task is not None]
        for task in tasks:
            task.cancel()
        self.fetchers.clear()
        self._where.clear()
        return tasks

    async def close(self) -> None:
        await asyncio.gather(*(f.close() for f in self.fetchers.values()),
                             return_exceptions=True)
        self.fetchers.clear()
        self._where.clear()

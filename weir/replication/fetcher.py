"""Replica fetchers: one per source broker, carrying every partition this broker follows
there in one Fetch request (seed 002's ReplicaFetcherThread, as an asyncio task).

Each partition is *truncating* (find the divergence point with OffsetForLeaderEpoch, see
:mod:`weir.replication.truncation`), *fetching*, or *delayed* (backing off after an error
such as a fenced epoch, waiting for the controller's next LeaderAndIsr; it then resumes the
state it was delayed in, so a truncating partition never fetches untruncated).  After each
truncation the fetch offset is the truncation point; a walk back that is not final (KIP-279)
stays truncating and asks again, as Kafka's AbstractFetcherThread.  A response is applied
only if the partition is still fetched with the same state object (same leader epoch) and
offset it was asked for, so a partition removed or re-added while a request was in flight is
never corrupted.

Fetches use an incremental fetch session (KIP-227, :mod:`weir.replication.fetch_session_handler`)
as Kafka's fetcher does: after the first full request only partitions whose fetch offset or
epochs changed are named, and the leader answers only partitions with news.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.index import load_request_schema

from weir.asyncutil import cancel_and_wait
from weir.common import TopicPartition
from weir.config import BrokerConfig, default_value
from weir.protocol import codec
from weir.protocol.client import BrokerConnection
from weir.protocol.errors import ErrorCode, KafkaError
from weir.replication import truncation
from weir.replication.fetch_session_handler import FetchSessionHandler
from weir.replication.truncation import after_leader_epoch_answer

if TYPE_CHECKING:
    from weir.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 4

TRUNCATING = "truncating"
FETCHING = "fetching"
DELAYED = "delayed"
THROTTLE_PAUSE_S = 0.1  # every partition held back by the follower throttle: wait this long


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class LeaderEndpoint:
    broker_id: int
    host: str
    port: int


@dataclass(slots=True)
class FetchState:
    tp: TopicPartition
    leader_epoch: int
    fetch_offset: int
    state: str = TRUNCATING
    delay_until_ms: int = 0
    resume_state: str = TRUNCATING  # the state a delayed partition goes back to
    lag: int = 0  # the leader's high watermark minus our fetch offset, after each response


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
            security=security,
        )


@dataclass
class ReplicaFetcher:
    """Fetches every partition this broker follows on one leader broker."""

    source: LeaderEndpoint
    rm: ReplicaManager
    settings: FetcherSettings
    partitions: dict[TopicPartition, FetchState] = field(default_factory=dict)
    _task: asyncio.Task | None = None
    _conn: BrokerConnection | None = None
    _wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    session: FetchSessionHandler = field(default_factory=FetchSessionHandler)

    # -- membership --------------------------------------------------------------------

    def add(self, tp: TopicPartition, leader_epoch: int, fetch_offset: int) -> None:
        self.partitions[tp] = FetchState(tp, leader_epoch, fetch_offset)
        self._wakeup.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"fetcher-{self.source.broker_id}")

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    # -- the loop ----------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                if not self._ready(TRUNCATING) and not self._ready(FETCHING):
                    self._wakeup.clear()
                    await self._idle()
                    continue
                conn = await self._connection()
                if self._ready(TRUNCATING):
                    await self._truncate(conn)
                if self._ready(FETCHING):
                    await self._fetch(conn)
            except asyncio.CancelledError:
                raise
            except (ConnectionError, OSError, TimeoutError) as exc:
                log.info("fetcher for broker %d: %s; retrying", self.source.broker_id, exc)
                await self._drop_connection()
                await asyncio.sleep(self.settings.backoff_ms / 1000)
            except Exception:
                log.exception("fetcher for broker %d failed; retrying", self.source.broker_id)
                await self._drop_connection()
                await asyncio.sleep(self.settings.backoff_ms / 1000)

    def _ready(self, state: str) -> list[FetchState]:
        now = _now_ms()
        out = []
        for st in self.partitions.values():
            if st.state == DELAYED and now >= st.delay_until_ms:
                st.state = st.resume_state
            if st.state == state:
                out.append(st)
        return out

    async def _idle(self) -> None:
        delays = [st.delay_until_ms for st in self.partitions.values() if st.state == DELAYED]
        timeout = max(min(delays) - _now_ms(), 10) / 1000 if delays else None
        try:
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        except TimeoutError:
            pass

    async def _connection(self) -> BrokerConnection:
        if self._conn is None or not self._conn.connected:
            conn = BrokerConnection(self.source.host, self.source.port,
                                    client_id=f"replica-fetcher-{self.settings.replica_id}",
                                    security=self.settings.security)
            await conn.connect(timeout_s=self.settings.socket_timeout_ms / 1000)
            self._conn = conn
        return self._conn

    async def _drop_connection(self) -> None:
        self.session.handle_error()
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def _delay(self, st: FetchState, reason: str) -> None:
        log.info("%s: delaying fetch from broker %d: %s", st.tp, self.source.broker_id, reason)
        if st.state != DELAYED:
            st.resume_state = st.state
        st.state = DELAYED
        st.delay_until_ms = _now_ms() + self.settings.backoff_ms

    def _still(self, st: FetchState) -> bool:
        """The partition is still fetched here with this very state object."""
        return self.partitions.get(st.tp) is st

    # -- truncation (KIP-101/279) ------------------------------------------------------

    async def _truncate(self, conn: BrokerConnection) -> None:
        states = self._ready(TRUNCATING)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        asked: dict[TopicPartition, FetchState] = {}
        for st in states:
            plog = self.rm.follower_log(st.tp)
            if plog is None:
                self.remove(st.tp)
                continue
            epoch = plog.epoch_cache.latest_epoch
            if epoch < 0:
                # No epoch known: KIP-101's fallback is the high watermark.
                plog.truncate_to(min(plog.high_watermark, plog.log_end_offset))
                self._start_fetching(st, plog.log_end_offset)
                continue
            asked[st.tp] = st
            by_topic.setdefault(st.tp.topic, []).append({
                "partition": st.tp.partition, "current_leader_epoch": st.leader_epoch,
                "leader_epoch": epoch})
        if not by_topic:
            return
        cls = load_request_schema(23, OFFSET_FOR_LEADER_EPOCH_VERSION)
        request = codec.build(cls, replica_id=self.settings.replica_id, topics=[
            {"topic": t, "partitions": parts} for t, parts in by_topic.items()])
        response = await conn.request(request, self.settings.socket_timeout_ms / 1000)
        for topic in response.topics:
            for part in topic.partitions:
                st = asked.get(TopicPartition(topic.topic, int(part.partition)))
                if st is None or not self._still(st) or st.state != TRUNCATING:
                    continue  # removed, re-added (another epoch) or delayed meanwhile
                if part.error_code != ErrorCode.none:
                    self._delay(st, f"OffsetForLeaderEpoch: {part.error_code.name}")
                    continue
                self._apply_epoch_answer(st, int(part.leader_epoch), int(part.end_offset))

    def _apply_epoch_answer(self, st: FetchState, leader_epoch: int, end_offset: int,
                            on_fetch: bool = False) -> None:
        """Truncate as the leader's (epoch, end offset) decides; the fetch offset becomes the
        truncation point.  From OffsetForLeaderEpoch, a walk back that is not final stays
        truncating (ask again with our now-latest epoch); from a fetch's diverging epoch
        (``on_fetch``) the partition keeps fetching, and the next fetch's last-fetched epoch
        lets the leader report the next divergence (Kafka's
        updateFetchOffsetAndMaybeMarkTruncationComplete with truncation on fetch)."""
        plog = self.rm.follower_log(st.tp)
        if plog is None:
            return
        decision = after_leader_epoch_answer(leader_epoch, end_offset, plog.epoch_cache,
                                             plog.log_end_offset, plog.high_watermark)
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

    def _start_fetching(self, st: FetchState, offset: int) -> None:
        st.fetch_offset = offset
        st.state = FETCHING

    # -- fetching --------------------------------------------------------------------

    async def _fetch(self, conn: BrokerConnection) -> None:
        states = self._ready(FETCHING)
        asked: dict[TopicPartition, tuple[FetchState, int]] = {}
        wanted: dict[TopicPartition, dict[str, Any]] = {}
        throttled = False
        for st in states:
            plog = self.rm.follower_log(st.tp)
            if plog is None:
                self.remove(st.tp)
                continue
            if self._throttled(st.tp):  # follower-side replication throttle
                throttled = True
                continue
            asked[st.tp] = (st, st.fetch_offset)
            wanted[st.tp] = {
                "partition": st.tp.partition,
                "current_leader_epoch": st.leader_epoch,
                "fetch_offset": st.fetch_offset,
                "last_fetched_epoch": plog.epoch_cache.latest_epoch,
                "log_start_offset": plog.log_start_offset,
                "partition_max_bytes": self.settings.partition_max_bytes,
            }
        if not wanted:
            if throttled:
                await asyncio.sleep(THROTTLE_PAUSE_S)
            return
        data = self.session.build(wanted)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, fields in data.to_send.items():
            by_topic.setdefault(tp.topic, []).append(fields)
        forgotten: dict[str, list[int]] = {}
        for tp in data.to_forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        cls = load_request_schema(1, FETCH_VERSION)
        s = self.settings
        request = codec.build(
            cls, replica_id=s.replica_id, max_wait=datetime.timedelta(milliseconds=s.max_wait_ms),
            min_bytes=s.min_bytes, max_bytes=s.max_bytes, isolation_level=0,
            session_id=data.session_id, session_epoch=data.epoch, rack_id="",
            topics=[{"topic": t, "partitions": parts} for t, parts in by_topic.items()],
            forgotten_topics_data=[{"topic": t, "partitions": parts}
                                   for t, parts in forgotten.items()])
        timeout_s = (s.socket_timeout_ms + s.max_wait_ms) / 1000
        response = await conn.request(request, timeout_s)
        if not self.session.handle_response(int(response.error_code), int(response.session_id)):
            log.info("fetch session with broker %d: %s; the next fetch is full",
                     self.source.broker_id, response.error_code.name)
            if data.full:  # not a session problem: do not spin on it
                await asyncio.sleep(s.backoff_ms / 1000)
            return
        for topic in response.responses:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, int(part.partition_index))
                entry = asked.get(tp)
                if entry is None:
                    continue
                st, offset = entry
                if not self._still(st) or st.fetch_offset != offset or st.state != FETCHING:
                    continue  # changed while the request was in flight
                try:
                    await self._apply_fetched(st, part)
                except KafkaError as exc:
                    self._delay(st, exc.message)

    async def _apply_fetched(self, st: FetchState, part: Any) -> None:
        code = part.error_code
        if code == ErrorCode.offset_out_of_range:
            await self._handle_out_of_range(st)
            return
        if code != ErrorCode.none:
            self._delay(st, code.name)
            return
        plog = self.rm.follower_log(st.tp)
        if plog is None:
            self.remove(st.tp)
            return
        diverging = part.diverging_epoch
        if diverging is not None and int(diverging.epoch) >= 0:
            self._apply_epoch_answer(st, int(diverging.epoch), int(diverging.end_offset),
                                     on_fetch=True)
            return
        records = part.records
        if records:
            plog.append_as_follower(records, _now_ms())
            self._record_throttled(st.tp, len(records))
        st.fetch_offset = plog.log_end_offset
        leader_hw = int(part.high_watermark)
        st.lag = max(leader_hw - st.fetch_offset, 0)
        self.rm.on_follower_fetched(st.tp, leader_hw, int(part.log_start_offset))

    # -- replication throttle (follower side, see weir.replication.throttle) -------------

    def _in_sync(self, tp: TopicPartition) -> bool:
        p = self.rm.partitions.get(tp)
        return p is not None and self.settings.replica_id in p.isr

    def _throttled(self, tp: TopicPartition) -> bool:
        return self.rm.throttles.follower_throttled(tp, self._in_sync(tp), _now_ms())

    def _record_throttled(self, tp: TopicPartition, size: int) -> None:
        self.rm.throttles.record_follower(tp, self._in_sync(tp), size, _now_ms())

    async def _handle_out_of_range(self, st: FetchState) -> None:
        """The leader's log no longer covers our fetch offset (seed 002's out-of-range)."""
        plog = self.rm.follower_log(st.tp)
        if plog is None:
            return
        leader_end = await self._leader_offset(st, -1)
        if leader_end < plog.log_end_offset:
            log.warning("%s: leader's log ends at %d, below ours (%d); truncating", st.tp,
                        leader_end, plog.log_end_offset)
            plog.truncate_to(leader_end)
            st.fetch_offset = plog.log_end_offset
            return
        leader_start = await self._leader_offset(st, -2)
        if leader_start > plog.log_end_offset:
            log.warning("%s: our log ends at %d, before the leader's start %d; starting over",
                        st.tp, plog.log_end_offset, leader_start)
            plog.truncate_fully_and_start_at(leader_start)
        st.fetch_offset = plog.log_end_offset

    async def _leader_offset(self, st: FetchState, timestamp: int) -> int:
        conn = await self._connection()
        cls = load_request_schema(2, LIST_OFFSETS_VERSION)
        request = codec.build(cls, replica_id=self.settings.replica_id, isolation_level=0,
                              topics=[{"name": st.tp.topic, "partitions": [
                                  {"partition_index": st.tp.partition,
                                   "current_leader_epoch": st.leader_epoch,
                                   "timestamp": timestamp}]}])
        response = await conn.request(request, self.settings.socket_timeout_ms / 1000)
        part = response.topics[0].partitions[0]
        if part.error_code != ErrorCode.none:
            raise KafkaError(part.error_code, f"ListOffsets from leader: {part.error_code.name}")
        return int(part.offset)


class ReplicaFetcherManager:
    """Owns the fetchers; partitions move between them as leaders change."""

    def __init__(self, rm: ReplicaManager, settings: FetcherSettings) -> None:
        self.rm = rm
        self.settings = settings
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._where: dict[TopicPartition, int] = {}
        self._closing: set[asyncio.Future[None]] = set()  # fetchers being closed

    def add(self, tp: TopicPartition, leader: LeaderEndpoint, leader_epoch: int,
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
            fetcher = ReplicaFetcher(leader, self.rm, self.settings)
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

    async def close(self) -> None:
        await asyncio.gather(*(f.close() for f in self.fetchers.values()),
                             return_exceptions=True)
        self.fetchers.clear()
        self._where.clear()

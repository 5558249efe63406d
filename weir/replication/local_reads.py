"""Reads of the local logs for Fetch: Kafka's ``ReplicaManager.fetchMessages`` and
``readFromLocalLog``, with ``DelayedFetch``'s long polling in the fetch purgatory.

:class:`LocalReads` is a component the :class:`~weir.replication.replica_manager.ReplicaManager`
builds and holds (``replica_manager.reads``; the Fetch handler calls it): a consumer reads up
to the high watermark (or the last stable offset, KIP-98), from the leader or, KIP-392, from
a follower; a follower reads to the log end, and its fetch moves its position, the ISR and
the high watermark.  Its dependencies come in through its constructor: the partitions and
their lookup, the log manager, the throttles, the clock, the fetch purgatory, and the
replica manager's reactions to a follower's fetch (a high-watermark change, an ISR
expansion proposal).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.fetch_response import FileRegion
from weir.replication.read_replica import ReplicaView
from weir.replication.read_replica import preferred_read_replica as select_read_replica
from weir.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from weir.replication.partition import Partition
    from weir.replication.purgatory import Purgatory
    from weir.replication.throttle import ReplicationThrottles
    from weir.storage.log import Log
    from weir.storage.log_manager import LogManager

READ_UNCOMMITTED = 0
READ_COMMITTED = 1  # KIP-98 isolation.level: consumers read up to the LSO


@dataclass(slots=True)
class FetchPartition:
    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1
    # KIP-516: the topic id a Fetch v13+ names (Kafka's Uuid.toString), None before v13
    topic_id: str | None = None


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | FileRegion | None = None  # a region of a segment file: sent with sendfile
    diverging_epoch: tuple[int, int] | None = None
    size: int = 0
    last_stable_offset: int = -1
    # read_committed only: the aborted transactions overlapping the records (KIP-98)
    aborted_transactions: list[AbortedTxn] | None = None


class LocalReads:
    """The Fetch half of the replica manager (see the module's docstring)."""

    def __init__(self, broker_id: int, partitions: dict[TopicPartition, Partition],
                 partition: Callable[[TopicPartition], Partition], log_manager: LogManager,
                 throttles: ReplicationThrottles, fetch_purgatory: Purgatory,
                 clock: Callable[[], int], *,
                 on_high_watermark_change: Callable[[TopicPartition], None],
                 propose_isr: Callable[[Partition, frozenset[int] | None], None],
                 delete_records_waiting: set[TopicPartition]) -> None:
        """``partitions``: the replica manager's own map (read, never changed here);
        ``partition(tp)``: the hosted partition or UNKNOWN_TOPIC_OR_PARTITION /
        KAFKA_STORAGE_ERROR; ``propose_isr``: sends an ISR expansion a follower's fetch
        made (KIP-497); ``delete_records_waiting``: partitions whose DeleteRecords waits for
        the followers' log start offsets."""
        self.broker_id = broker_id
        self.partitions = partitions
        self.partition = partition
        self.log_manager = log_manager
        self.throttles = throttles
        self.fetch_purgatory = fetch_purgatory
        self.clock = clock
        self.on_high_watermark_change = on_high_watermark_change
        self._submit = propose_isr
        self._delete_records_waiting = delete_records_waiting
        # Kafka's BrokerTopicMetrics (broker-wide): fetched bytes out to consumers and,
        # separately, to follower replicas.  Read by weir.server.metrics.
        self.bytes_out = self.replication_bytes_out = 0

    async def fetch(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                    requests: list[FetchPartition],
                    followers_serve_consumers: bool = False,
                    isolation_level: int = READ_UNCOMMITTED) -> dict[TopicPartition, FetchResult]:
        """``followers_serve_consumers``: a consumer may read from a follower (KIP-392, Fetch
        v11+), up to the follower's high watermark.  ``isolation_level`` READ_COMMITTED: a
        consumer reads up to the last stable offset and gets the aborted transactions."""
        followers_ok = followers_serve_consumers  # shorter name for the reads below
        committed = isolation_level == READ_COMMITTED and replica_id < 0
        results, total, urgent = self._read_all(replica_id, max_bytes, requests, followers_ok,
                                                committed=committed)
        if max_wait_ms <= 0 or total >= min_bytes or urgent or not requests:
            return self._count_out(replica_id, results, total)

        # Kafka's DelayedFetch.tryComplete: a notification of one partition looks at that
        # partition only; the bytes available elsewhere are those of the read above.
        sizes = {tp: r.size for tp, r in results.items()}
        by_tp = {r.tp: r for r in requests}
        available = total
        # A follower asking for at least one byte (replica.fetch.min.bytes=1) has enough as
        # soon as the log ends past its fetch offset: no read needed to know (the answer's
        # read below finds any error there as this one would).  Not with a leader
        # replication throttle, which may serve it nothing (Kafka's DelayedFetch does not
        # count a throttled follower's bytes).
        any_new_is_enough = replica_id >= 0 and min_bytes <= 1 \
            and not self.throttles.leader.bounded
        partitions = self.partitions

        def enough(tp: TopicPartition) -> bool:
            nonlocal available
            req = by_tp.get(tp)
            if req is None:
                return False
            if any_new_is_enough:
                p = partitions.get(tp)
                plog = None if p is None else p.log
                if plog is not None and plog.log_end_offset > req.fetch_offset:
                    return True
            _probe, size, urgent = self._read_all(replica_id, max_bytes, [req], followers_ok,
                                                  sizes_only=True, committed=committed)
            if urgent:
                return True
            available += size - sizes.get(tp, 0)
            sizes[tp] = size
            return available >= min_bytes

        await self.fetch_purgatory.wait(by_tp, enough, max_wait_ms / 1000, per_key=True)
        # Kafka's DelayedFetch.onComplete reads again "from the purgatory": a follower's
        # fetch position was recorded when its fetch arrived (Partition.fetchRecords with
        # updateFetchState false), not a second time now.
        results, total, _urgent = self._read_all(replica_id, max_bytes, requests, followers_ok,
                                                 committed=committed, update_fetch_state=False)
        return self._count_out(replica_id, results, total)

    def _count_out(self, replica_id: int, results: dict[TopicPartition, FetchResult],
                   size: int) -> dict[TopicPartition, FetchResult]:
        """BytesOutPerSec / ReplicationBytesOutPerSec: the bytes a fetch answers with."""
        if replica_id >= 0:
            self.replication_bytes_out += size
        else:
            self.bytes_out += size
        return results

    def _read_all(self, replica_id: int, max_bytes: int, requests: list[FetchPartition],
                  followers_ok: bool, sizes_only: bool = False, committed: bool = False,
                  update_fetch_state: bool = True
                  ) -> tuple[dict[TopicPartition, FetchResult], int, bool]:
        """Kafka's ``readFromLocalLog``: (the results, their bytes, whether the fetch must be
        answered now: a partition has an error or a diverging epoch (KIP-320: the follower
        must truncate first), as Kafka's fetchMessages/DelayedFetch decide).

        ``update_fetch_state``: record a follower's fetch position (not on the re-read of a
        fetch completed from the purgatory; never on a ``sizes_only`` probe)."""
        results: dict[TopicPartition, FetchResult] = {}
        budget = max_bytes
        urgent = False
        now = self.clock()
        # A log dir that failed, or a log whose own I/O failed, makes its partitions
        # KAFKA_STORAGE_ERROR; with no dir offline only the second needs looking at.
        any_offline = bool(self.log_manager.offline_dirs)
        update = update_fetch_state and not sizes_only
        for req in requests:
            try:
                if replica_id >= 0:
                    result = self._read_for_follower(replica_id, req, budget, budget == max_bytes,
                                                     sizes_only, now, update, any_offline)
                else:
                    result = self._read_one(replica_id, req, budget, first=budget == max_bytes,
                                            sizes_only=sizes_only, now=now,
                                            followers_ok=followers_ok, committed=committed)
            except KafkaError as exc:
                result = FetchResult(error=exc.code)
                p = self.partitions.get(req.tp)
                if p is not None and p.log is not None:
                    result.high_watermark = p.log.high_watermark
                    result.last_stable_offset = p.log.last_stable_offset
                    result.log_start_offset = p.log.log_start_offset
            if result.error or result.diverging_epoch is not None:
                urgent = True
            budget -= result.size
            results[req.tp] = result
        return results, max_bytes - budget, urgent

    def _read_for_follower(self, replica_id: int, req: FetchPartition, budget: int,
                           first: bool, sizes_only: bool, now: int, update: bool,
                           any_offline: bool) -> FetchResult:
        """One partition of a follower's fetch (Kafka's ``Partition.fetchRecords`` from a
        follower): to the log end, with the follower's position recorded (``update``) and the
        high watermark moved by it (``updateFollowerFetchState``, ``maybeIncrementLeaderHW``).
        An idle partition (the follower at our log end) is the common case of a broker with
        thousands of partitions, so this path does no more than it must for it."""
        tp = req.tp
        p = self.partitions.get(tp)
        if p is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{tp} is not hosted here")
        plog = p.log
        # KIP-516 (Kafka's readFromLog, before leadership), inline: every partition of
        # every follower fetch (v13) passes here.
        if (req.topic_id is not None and plog is not None and plog.topic_id != req.topic_id
                and plog.topic_id is not None):
            raise _inconsistent_topic_id(req, plog)
        # A log dir that failed, or a log whose own I/O failed: KAFKA_STORAGE_ERROR (JBOD).
        if any_offline or plog is None or plog.offline_reason is not None:
            self.log_manager.check_online(tp)
        plog = p.require_leader(req.current_leader_epoch)
        fetch_offset = req.fetch_offset
        leo = plog.log_end_offset
        if req.last_fetched_epoch >= 0:  # KIP-320: has the follower's log diverged?
            epoch, end = plog.epoch_cache.end_offset_for(req.last_fetched_epoch, leo)
            if epoch != req.last_fetched_epoch or end < fetch_offset:
                return FetchResult(high_watermark=plog.high_watermark,
                                   log_start_offset=plog.log_start_offset,
                                   last_stable_offset=plog.last_stable_offset,
                                   diverging_epoch=(epoch, end))
        if update:
            if p.update_follower_fetch(replica_id, fetch_offset, now, req.log_start_offset,
                                       leo):
                self.on_high_watermark_change(tp)
            elif tp in self._delete_records_waiting:
                self.fetch_purgatory.notify(tp)  # the low watermark may have moved
            if replica_id not in p.partition_state.isr:
                self._submit(p, p.propose_isr_expansion(replica_id))
        result = FetchResult(high_watermark=plog.high_watermark,
                             log_start_offset=plog.log_start_offset,
                             last_stable_offset=plog.last_stable_offset, records=b"")
        if fetch_offset == leo:
            return result  # nothing new
        # Leader-side replication throttle: an out-of-sync follower of a throttled replica
        # gets no data while the leader quota is exceeded (sizes too, so it long-polls).
        in_sync = replica_id in p.isr
        if self.throttles.leader_throttled(tp, in_sync, now):
            return result
        if budget <= 0 and not first:
            return result
        read = plog.read(fetch_offset, min(req.partition_max_bytes, max(budget, 0)),
                         max_offset=None, min_one_batch=first)
        result.size = read.size
        if not sizes_only:
            self.throttles.record_leader(tp, in_sync, read.size, now)  # throttle accounting
            if read.size:
                result.records = FileRegion(str(read.file_path), read.position, read.size,
                                            read.inode)
        return result

    def _read_one(self, replica_id: int, req: FetchPartition, budget: int, first: bool,
                  sizes_only: bool, now: int, followers_ok: bool,
                  committed: bool = False) -> FetchResult:
        """One partition of a consumer's fetch: up to the high watermark (or the last stable
        offset for ``read_committed``), from the leader or, KIP-392, from this follower."""
        p = self.partition(req.tp)
        plog = p.log
        if (req.topic_id is not None and plog is not None and plog.topic_id != req.topic_id
                and plog.topic_id is not None):
            raise _inconsistent_topic_id(req, plog)
        if not p.is_leader and followers_ok and p.log is not None and p.leader >= 0:
            p.check_client_epoch(req.current_leader_epoch)
            plog = p.log
        else:
            plog = p.require_leader(req.current_leader_epoch)
        result = FetchResult(high_watermark=plog.high_watermark,
                             log_start_offset=plog.log_start_offset,
                             last_stable_offset=plog.last_stable_offset)
        if committed:
            result.aborted_transactions = []
        upper = plog.last_stable_offset if committed else plog.high_watermark
        if req.fetch_offset == upper:
            result.records = b""
            return result
        if budget <= 0 and not first:
            result.records = b""
            return result
        read = plog.read(req.fetch_offset, min(req.partition_max_bytes, max(budget, 0)),
                         max_offset=upper, min_one_batch=first)
        result.size = read.size
        if sizes_only or not read.size:
            result.records = b""
        else:
            result.records = FileRegion(str(read.file_path), read.position, read.size,
                                        read.inode)
            if committed:  # KIP-98: what the consumer must drop from these records
                result.aborted_transactions = plog.collect_aborted_transactions(
                    req.fetch_offset, read.last_offset + 1)
        return result

    def preferred_read_replica(self, tp: TopicPartition, fetch_offset: int,
                               racks: dict[int, str | None], client_rack: str | None) -> int:
        """KIP-392: the in-sync replica in the consumer's rack holding ``fetch_offset``, or -1
        (read from this leader)."""
        p = self.partitions.get(tp)
        if p is None or not p.is_leader or p.log is None:
            return -1
        leader = ReplicaView(self.broker_id, p.log.log_end_offset, 0)
        candidates = p.read_replica_candidates(fetch_offset, self.clock())
        return select_read_replica(leader, candidates, racks, client_rack)


def _inconsistent_topic_id(req: FetchPartition, plog: Log) -> KafkaError:
    """Kafka's ``readFromLog`` check, before leadership: a fetch naming another topic id
    than the log's is answered INCONSISTENT_TOPIC_ID (see weir.storage.topic_ids)."""
    return KafkaError(ErrorCode.inconsistent_topic_id,
                      f"{req.tp}: the fetch names topic id {req.topic_id}, the log holds "
                      f"{plog.topic_id}")

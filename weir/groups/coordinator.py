"""The group coordinator: the asyncio shell around :class:`weir.groups.state.Group`.

It owns the ``__consumer_offsets`` partitions this broker leads (the shared coordinator shell,
:mod:`weir.coordinator_runtime`, loads each by scanning its log when leadership arrives and
drops it when leadership goes), parks JoinGroup/SyncGroup requests until the state machine
answers them, writes group metadata and offset commits as record batches through its
:class:`~weir.coordinator_runtime.CoordinatorLog` (``acks=-1``), and drives the clock (session
expiry, rebalance deadlines, offset retention).  It sees the broker only through its
collaborators: its settings, a metadata view, that log and a clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from weir.asyncutil import parked
from weir.common import TopicPartition
from weir.config import BrokerConfig, default_value
from weir.coordinator_runtime import (
    SYSTEM_CLOCK,
    Clock,
    CoordinatorLog,
    CoordinatorPartition,
    CoordinatorShell,
    Loading,
    MetadataView,
    read_batches,
)
from weir.groups import codec
from weir.groups.codec import OFFSETS_TOPIC, GroupKey, OffsetAndMetadata, OffsetKey
from weir.groups.state import (
    Group,
    GroupConfig,
    GroupState,
    JoinRequest,
    JoinResult,
    Outcome,
    SyncResult,
)
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import parse_header
from weir.records.builder import build_batch
from weir.records.control import read_marker
from weir.records.records import iter_records

__all__ = ["GroupCoordinator", "GroupCoordinatorSettings", "Loading", "OffsetsPartition"]

log = logging.getLogger(__name__)

TICK_S = 0.05

# How append errors reach clients: offset writes as Kafka's
# GroupMetadataManager.maybeConvertOffsetCommitError (REQUEST_TIMED_OUT passes through)...
_WRITE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
}
# ...and group metadata as GroupMetadataManager.storeGroup: a timed-out write sends the
# members back to JoinGroup (REBALANCE_IN_PROGRESS).
_GROUP_WRITE_ERRORS = {
    **_WRITE_ERRORS,
    ErrorCode.request_timed_out: ErrorCode.rebalance_in_progress,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
}


_LOADING_AS_REBALANCE = {ErrorCode.coordinator_load_in_progress: ErrorCode.rebalance_in_progress}


@dataclass(frozen=True)
class GroupCoordinatorSettings:
    """The broker keys the group coordinator reads (Kafka's GroupConfig and OffsetConfig)."""

    broker_id: int
    group: GroupConfig
    offsets_topic_num_partitions: int = default_value("offsets.topic.num.partitions")
    offsets_retention_check_interval_ms: int = default_value(
        "offsets.retention.check.interval.ms")
    offsets_retention_minutes: int = default_value("offsets.retention.minutes")
    offsets_commit_timeout_ms: int = default_value("offsets.commit.timeout.ms")
    offset_metadata_max_bytes: int = default_value("offset.metadata.max.bytes")

    @classmethod
    def from_config(cls, config: BrokerConfig) -> GroupCoordinatorSettings:
        return cls(
            broker_id=config.broker_id,
            group=GroupConfig.from_config(config),
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            offsets_retention_minutes=config.offsets_retention_minutes,
            offsets_commit_timeout_ms=config.offsets_commit_timeout_ms,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
        )


@dataclass
class OffsetsPartition(CoordinatorPartition):
    """One ``__consumer_offsets`` partition this broker leads, and the groups it holds."""

    groups: dict[str, Group] = field(default_factory=dict)
    # Transactional offset commits (TxnOffsetCommit) written but not yet decided, per
    # producer id → group → partition, as Kafka's GroupMetadata.pendingTransactionalOffsetCommits.
    pending_txn: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = field(
        default_factory=dict)


_Loaded = tuple[dict[str, Group], dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]]]


class GroupCoordinator(CoordinatorShell[OffsetsPartition, _Loaded]):
    topic = OFFSETS_TOPIC

    def __init__(self, settings: GroupCoordinatorSettings, metadata: MetadataView,
                 log: CoordinatorLog, *, clock: Clock = SYSTEM_CLOCK,
                 create_offsets_topic: Callable[[], Awaitable[None]] | None = None) -> None:
        """``log`` appends to and reads the ``__consumer_offsets`` partitions;
        ``create_offsets_topic`` creates the topic (the broker passes the topic
        administration's: Kafka's ``AutoTopicCreationManager`` role)."""
        super().__init__(broker_id=settings.broker_id, metadata=metadata,
                         default_partitions=settings.offsets_topic_num_partitions,
                         clock=clock, create_topic=create_offsets_topic)
        self.settings = settings
        self.group_config = settings.group
        self.log = log
        self._joins: dict[tuple[str, str], asyncio.Future] = {}
        self._syncs: dict[tuple[str, str], asyncio.Future] = {}

    def _now(self) -> int:
        return self.clock.now_ms()

    # -- the coordinator shell's part ----------------------------------------------------------

    def _periodic_jobs(self) -> tuple[float, Any, list[tuple[float, Any]]]:
        retention_every = self.settings.offsets_retention_check_interval_ms / 1000
        return TICK_S, self._tick, [(retention_every, self.expire_offsets)]

    def _next_deadline_ms(self, now_ms: int) -> int | None:
        """The earliest group deadline still ahead (a member's last heartbeat + session
        timeout, a pending member id, a join or sync timeout, the initial rebalance delay):
        the shell ticks then, so a member leaves exactly at its session deadline, as Kafka's
        heartbeat purgatory expires its DelayedHeartbeat, not up to a tick later."""
        return min((t for part in self.loaded_partitions() for group in part.groups.values()
                    for t in group.deadlines() if t > now_ms), default=None)

    def _tick(self, now: int) -> None:
        for part in self.loaded_partitions():
            for group in list(part.groups.values()):
                deadline = group.next_deadline()
                if deadline is not None and deadline <= now:
                    self._apply(group, group.tick(now))

    def _new_partition(self, index: int, epoch: int) -> OffsetsPartition:
        return OffsetsPartition(index, epoch)

    def _on_unloaded(self, part: OffsetsPartition) -> None:
        log.info("unloading %s-%d (%d groups)", OFFSETS_TOPIC, part.index, len(part.groups))
        for group in part.groups.values():
            self._apply(group, group.mark_dead(self._now()))

    def _install(self, part: OffsetsPartition, state: _Loaded, elapsed_ms: float) -> None:
        part.groups, part.pending_txn = state
        log.info("loaded %s-%d: %d groups in %.0f ms", OFFSETS_TOPIC, part.index,
                 len(part.groups), elapsed_ms)

    def partition_for(self, group_id: str) -> int:
        return codec.partition_for(group_id, self.num_partitions())

    async def _scan(self, tp: TopicPartition) -> _Loaded:
        """Replay the partition's log (the latest record of each key wins); transactional
        offset commits wait for their transaction's marker (Kafka's loadGroupsAndOffsets).
        Returns the groups and the transactional commits still undecided."""
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        records: dict[str, codec.GroupRecord | None] = {}
        pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        async for batch in read_batches(self.log.log(tp)):
            try:
                header = parse_header(batch)
                if header.is_control:
                    _replay_marker(batch, header.producer_id, pending, offsets)
                    continue
                txn = (pending.setdefault(header.producer_id, {})
                       if header.is_transactional else None)
                for rec in iter_records(batch):
                    self._replay(rec, offsets if txn is None else txn, records)
            except (KafkaError, codec.CorruptGroupRecord) as exc:
                # Kafka's GroupMetadataManager skips keys it cannot read; a record that
                # cannot be decoded at all is skipped the same way, loudly.
                log.error("%s: skipping a corrupt record batch at offset %d: %s",
                          tp, parse_header(batch).base_offset, exc)
        now = self._now()
        groups: dict[str, Group] = {}
        live = {g for g, o in offsets.items() if o} | {g for g, r in records.items() if r}
        for group_id in live:
            rec = records.get(group_id)
            group = (Group.from_record(group_id, rec, self.group_config, now) if rec
                     else Group(group_id, self.group_config, now))
            group.offsets = offsets.get(group_id, {})
            groups[group_id] = group
        for per_producer in pending.values():  # undecided commits need their group too
            for group_id in per_producer:
                if group_id not in groups:
                    groups[group_id] = Group(group_id, self.group_config, now)
        return groups, {pid: txn for pid, txn in pending.items() if txn}

    @staticmethod
    def _replay(rec: Any, offsets: dict, records: dict) -> None:
        if rec.key is None:
            return
        key = codec.decode_key(rec.key)
        if isinstance(key, OffsetKey):
            per_group = offsets.setdefault(key.group, {})
            if rec.value is None:
                per_group.pop(key.tp, None)
            else:
                per_group[key.tp] = replace(codec.decode_offset_value(rec.value),
                                            record_offset=rec.offset)
        elif isinstance(key, GroupKey):
            records[key.group] = (None if rec.value is None
                                  else codec.decode_group_value(rec.value))

    # -- transactional offset commits (KIP-98) ----------------------------------------------

    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 member_id: str, instance_id: str | None, generation: int,
                                 offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the commits are written as a transactional batch of the producer
        and stay pending until the transaction's marker decides them (Kafka's
        GroupCoordinator.handleTxnCommitOffsets / GroupMetadata.prepareTxnOffsetCommit)."""
        try:
            group = self.group(group_id, create=True)
        except KafkaError as exc:
            return dict.fromkeys(offsets, exc.code)
        assert group is not None
        if group.state == GroupState.DEAD:
            return dict.fromkeys(offsets, ErrorCode.coordinator_not_available)
        if generation >= 0 or member_id or instance_id is not None:
            # KIP-447: a producer naming its consumer's generation is checked like a commit.
            error = group.validate_commit(member_id, instance_id, generation, self._now())
            if error != ErrorCode.none:
                return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        valid = self._valid_commits(offsets, results)
        if not valid:
            return results
        index = self.partition_for(group_id)
        entries = [(codec.encode_offset_key(group_id, tp), codec.encode_offset_value(o))
                   for tp, o in valid.items()]
        error, base = await self._write(index, entries,
                                        txn=(producer_id, producer_epoch))
        part = self.partitions.get(index)
        for i, (tp, o) in enumerate(valid.items()):
            results[tp] = error
            if error == ErrorCode.none and part is not None:
                pending = part.pending_txn.setdefault(producer_id, {}).setdefault(group_id, {})
                pending[tp] = replace(o, record_offset=base + i)
        return results

    def on_txn_marker(self, tp: TopicPartition, producer_id: int, committed: bool) -> None:
        """Hook for the WriteTxnMarkers handler, called once a transaction marker is appended
        to a ``__consumer_offsets`` partition: the producer's pending transactional offsets
        there become committed offsets (COMMIT) or are dropped (ABORT), as Kafka's
        GroupMetadata.completePendingTxnOffsetCommit."""
        if tp.topic != OFFSETS_TOPIC:
            return
        part = self.partitions.get(tp.partition)
        if part is None:
            return
        pending = part.pending_txn.pop(producer_id, {})
        if not committed:
            return
        for group_id, per_tp in pending.items():
            group = part.groups.get(group_id)
            if group is None:
                group = part.groups[group_id] = Group(group_id, self.group_config, self._now())
            for commit_tp, o in per_tp.items():
                group.apply_offset(commit_tp, o)

    def has_pending_txn_offsets(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction has an undecided commit of ``tp`` for the group (OffsetFetch's
        ``require_stable``, KIP-447: UNSTABLE_OFFSET_COMMIT)."""
        part = self.partitions.get(self.partition_for(group_id))
        if part is None:
            return False
        return any(tp in txn.get(group_id, {}) for txn in part.pending_txn.values())

    # -- looking groups up ---------------------------------------------------------------

    def _partition_of(self, group_id: str) -> OffsetsPartition:
        if not group_id:
            raise KafkaError(ErrorCode.invalid_group_id, "the group id is empty")
        return self.loaded_partition(self.partition_for(group_id), f"group {group_id!r}")

    def group(self, group_id: str, create: bool = False) -> Group | None:
        """The group (raising NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS)."""
        part = self._partition_of(group_id)
        group = part.groups.get(group_id)
        if group is None and create:
            group = part.groups[group_id] = Group(group_id, self.group_config, self._now())
        return group

    def all_groups(self) -> list[Group]:
        return [g for p in self.loaded_partitions() for g in p.groups.values()]

    # -- FindCoordinator -------------------------------------------------------------------

    async def find_coordinator(self, group_id: str) -> tuple[ErrorCode, int, str, int]:
        """(error, node id, host, port) of the group's coordinator."""
        error, node = await self.coordinator_for(
            lambda count: codec.partition_for(group_id, count))
        if error != ErrorCode.none:
            return error, -1, "", -1
        b = self.metadata.brokers[node]
        return ErrorCode.none, b.id, b.host, b.port

    # -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -----------------------------------

    async def join(self, group_id: str, req: JoinRequest) -> JoinResult:
        try:
            group = self.group(group_id, create=not req.member_id)
        except KafkaError as exc:
            return JoinResult(exc.code, req.member_id)
        if group is None:
            return JoinResult(ErrorCode.unknown_member_id, req.member_id)
        immediate, member_id, outcome = group.join(req, self._now())
        future = None
        if immediate is None:
            future = self._park(self._joins, (group_id, member_id),
                                JoinResult(ErrorCode.rebalance_in_progress, member_id))
        self._apply(group, outcome)
        if future is None:
            return immediate
        parked()  # waits for the rebalance, like Kafka's DelayedJoin / pending sync
        return await future

    async def sync(self, group_id: str, member_id: str, instance_id: str | None,
                   generation: int, protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> SyncResult:
        try:
            group = self.group(group_id)
        except KafkaError as exc:
            # Kafka's handleSyncGroup: a loading coordinator lost the rebalance in progress;
            # REBALANCE_IN_PROGRESS sends the member back to JoinGroup without a new lookup.
            return SyncResult(_LOADING_AS_REBALANCE.get(exc.code, exc.code))
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        immediate, outcome = group.sync(member_id, instance_id, generation, protocol_type,
                                        protocol_name, assignments, self._now())
        future = None
        if immediate is None:
            future = self._park(self._syncs, (group_id, member_id),
                                SyncResult(ErrorCode.rebalance_in_progress))
        self._apply(group, outcome)
        if future is None:
            return immediate
        parked()  # waits for the rebalance, like Kafka's DelayedJoin / pending sync
        return await future

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation: int) -> ErrorCode:
        try:
            group = self.group(group_id)
        except KafkaError as exc:
            # Kafka's handleHeartbeat answers a loading coordinator's heartbeats blindly.
            return ErrorCode.none if exc.code == ErrorCode.coordinator_load_in_progress else exc.code
        if group is None:
            return ErrorCode.unknown_member_id
        return group.heartbeat(member_id, instance_id, generation, self._now())

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(group-level error, per-member errors) for members given as (member id, instance id)."""
        try:
            group = self.group(group_id)
        except KafkaError as exc:
            return exc.code, [exc.code] * len(members)
        if group is None:
            return ErrorCode.unknown_member_id, [ErrorCode.unknown_member_id] * len(members)
        errors = []
        for member_id, instance_id in members:
            error, outcome = group.leave(member_id, instance_id, self._now())
            self._apply(group, outcome)
            errors.append(error)
        return ErrorCode.none, errors

    def _park(self, table: dict, key: tuple[str, str], superseded: Any) -> asyncio.Future:
        old = table.get(key)
        if old is not None and not old.done():
            old.set_result(superseded)
        future = asyncio.get_running_loop().create_future()
        table[key] = future
        return future

    def _apply(self, group: Group, outcome: Outcome) -> None:
        if any(r.error == ErrorCode.none for r in outcome.joins.values()):
            log.info("group %s: generation %d with %d members (leader %s, protocol %s)",
                     group.group_id, group.generation, len(group.members), group.leader,
                     group.protocol)
        for table, results in ((self._joins, outcome.joins), (self._syncs, outcome.syncs)):
            for member_id, result in results.items():
                future = table.pop((group.group_id, member_id), None)
                if future is not None and not future.done():
                    future.set_result(result)
        if outcome.store_for_sync is not None:
            self._spawn(self._store_for_sync(group, outcome.store_for_sync))
        elif outcome.store:
            self._spawn(self._store_group(group))

    async def _store_group(self, group: Group) -> ErrorCode:
        if group.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available  # deleted or unloaded meanwhile
        entry = (codec.encode_group_key(group.group_id),
                 codec.encode_group_value(group.to_record()))
        error, _base = await self._write(self.partition_for(group.group_id), [entry],
                                         _GROUP_WRITE_ERRORS)
        if error != ErrorCode.none:
            log.warning("writing metadata of group %s failed: %s", group.group_id, error.name)
        return error

    async def _store_for_sync(self, group: Group, generation: int) -> None:
        error = await self._store_group(group)
        self._apply(group, group.on_stored(generation, error, self._now()))

    async def _write(self, index: int, entries: list[tuple[bytes, bytes | None]],
                     errors: dict[ErrorCode, ErrorCode] = _WRITE_ERRORS,
                     txn: tuple[int, int] | None = None) -> tuple[ErrorCode, int]:
        """Append keyed records to our partition ``index``: (mapped error, base offset).
        ``txn`` (producer id, epoch) makes it a transactional batch of that producer."""
        tp = TopicPartition(OFFSETS_TOPIC, index)
        if index not in self.partitions:
            return ErrorCode.not_coordinator, -1
        pid, epoch = txn if txn is not None else (-1, -1)
        batch = build_batch([v for _, v in entries], keys=[k for k, _ in entries],
                            timestamp_ms=self._now(), producer_id=pid, producer_epoch=epoch,
                            transactional=txn is not None)
        error, base = await self.log.append(tp, batch, self.settings.offsets_commit_timeout_ms)
        return errors.get(error, error), base

    # -- offsets --------------------------------------------------------------------------

    async def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None,
                             generation: int,
                             offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, ErrorCode]:
        try:
            group = self.group(group_id, create=generation < 0)
        except KafkaError as exc:
            return dict.fromkeys(offsets, exc.code)
        if group is None:
            return dict.fromkeys(offsets, ErrorCode.illegal_generation)
        error = group.validate_commit(member_id, instance_id, generation, self._now())
        if error != ErrorCode.none:
            return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        valid = self._valid_commits(offsets, results)
        if valid:
            entries = [(codec.encode_offset_key(group_id, tp), codec.encode_offset_value(o))
                       for tp, o in valid.items()]
            group.add_pending_offsets(valid, 1)
            try:
                error, base = await self._write(self.partition_for(group_id), entries)
            finally:
                group.add_pending_offsets(valid, -1)
            if error != ErrorCode.none and base >= 0:
                group.unsettled_offsets.update(valid)
            for i, (tp, o) in enumerate(valid.items()):
                results[tp] = error
                if error == ErrorCode.none:
                    group.apply_offset(tp, replace(o, record_offset=base + i))
                    group.unsettled_offsets.discard(tp)
        return results

    def _valid_commits(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                       results: dict[TopicPartition, ErrorCode]) -> dict[TopicPartition, OffsetAndMetadata]:
        max_meta = self.settings.offset_metadata_max_bytes
        valid = {}
        for tp, o in offsets.items():
            if self.metadata.partition(tp) is None:
                results[tp] = ErrorCode.unknown_topic_or_partition
            elif len(o.metadata.encode()) > max_meta:
                results[tp] = ErrorCode.offset_metadata_too_large
            else:
                valid[tp] = o
        return valid

    def fetch_offsets(self, group_id: str, tps: list[TopicPartition] | None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of ``tps`` (None: all the group has); raises coordinator errors."""
        group = self.group(group_id)
        stored = group.offsets if group is not None else {}
        if tps is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in tps}

    async def delete_offsets(self, group_id: str,
                             tps: list[TopicPartition]) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        try:
            group = self.group(group_id)
        except KafkaError as exc:
            return exc.code, {}
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found, {}
        subscribed = group.subscribed_topics()
        if subscribed is None:
            return ErrorCode.non_empty_group, {}
        results = {tp: ErrorCode.group_subscribed_to_topic for tp in tps if tp.topic in subscribed}
        doomed = [tp for tp in tps if tp not in results]
        if doomed:
            entries = [(codec.encode_offset_key(group_id, tp), None) for tp in doomed]
            error, base = await self._write(self.partition_for(group_id), entries)
            for i, tp in enumerate(doomed):
                results[tp] = error
                if error == ErrorCode.none:
                    group.apply_offset(tp, None, removed_at=base + i)
        return ErrorCode.none, results

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results = {}
        for group_id in group_ids:
            try:
                group = self.group(group_id)
            except KafkaError as exc:
                results[group_id] = exc.code
                continue
            if group is None or group.state == GroupState.DEAD:
                results[group_id] = ErrorCode.group_id_not_found
            elif group.state != GroupState.EMPTY:
                results[group_id] = ErrorCode.non_empty_group
            else:
                results[group_id] = await self._tombstone_group(group)
        return results

    async def _tombstone_group(self, group: Group, tps: list[TopicPartition] | None = None) -> ErrorCode:
        """Delete offsets ``tps`` (all when None) and, if none remain, the group itself."""
        doomed = list(group.offsets) if tps is None else tps
        remove_group = group.state == GroupState.EMPTY and (
            tps is None or not set(group.offsets) - set(tps))
        entries: list[tuple[bytes, bytes | None]] = [
            (codec.encode_offset_key(group.group_id, tp), None) for tp in doomed]
        if remove_group:
            entries.append((codec.encode_group_key(group.group_id), None))
        if not entries:
            return ErrorCode.none
        index = self.partition_for(group.group_id)
        error, base = await self._write(index, entries)
        if error == ErrorCode.none:
            for i, tp in enumerate(doomed):
                group.apply_offset(tp, None, removed_at=base + i)
                group.unsettled_offsets.discard(tp)
            if remove_group:
                group.mark_dead(self._now())
                part = self.partitions.get(index)
                if part is not None and part.groups.get(group.group_id) is group:
                    del part.groups[group.group_id]
        return error

    def on_partitions_deleted(self, tps: Iterable[TopicPartition]) -> asyncio.Task | None:
        """Kafka's ``GroupCoordinator.onPartitionsDeleted``: an UpdateMetadata that deletes
        partitions (leader -2) removes their committed offsets from every group this broker
        coordinates, with tombstones in ``__consumer_offsets``, and a group left Empty with
        no offsets is deleted too (``GroupMetadataManager.cleanupGroupMetadata``), so a topic
        created again under the same name does not inherit the old offsets.  The tombstones
        are written by a task of this shell; returns it (None when nothing is to remove),
        its result each affected group's write error (NONE: its offsets are gone for good).

        A commit still being written is removed too (Kafka drops the group's
        pendingOffsetCommits): its record is already in the log, so the tombstone written
        after it wins, now and on any later load; so is one whose write failed after it
        reached the log (it may be replicated yet, and a new coordinator would load it).  Every group's tombstones are appended at
        once, before a commit to a topic re-created under the same name can be."""
        gone = set(tps)
        doomed = []
        for group in self.all_groups():
            offsets = [tp for tp in dict.fromkeys([*group.offsets, *group.pending_offsets,
                                                   *sorted(group.unsettled_offsets)])
                       if tp in gone]
            if offsets:
                doomed.append((group, offsets))
        if not doomed:
            return None
        writes = [(group, offsets, self._spawn(self._tombstone_group(group, offsets)))
                  for group, offsets in doomed]

        async def clean() -> dict[str, ErrorCode]:
            errors = {}
            for group, offsets, write in writes:
                error = errors[group.group_id] = await write
                if error != ErrorCode.none:
                    log.warning("could not remove %d offsets of deleted partitions from group "
                                "%s: %s", len(offsets), group.group_id, error.name)
            return errors
        return self._spawn(clean())

    async def expire_offsets(self, now: int) -> None:
        """``offsets.retention.minutes``: an Empty group's offsets expire that long after it
        became Empty (a group without a protocol: after each commit); offsets of topics a
        consumer group no longer subscribes to expire that long after their commit."""
        retention = self.settings.offsets_retention_minutes * 60_000
        for group in self.all_groups():
            expired = _expired_offsets(group, now, retention)
            if expired is None:
                continue
            error = await self._tombstone_group(group, expired)
            if error == ErrorCode.none and expired:
                log.info("expired %d offsets of group %s", len(expired), group.group_id)


def _expired_offsets(group: Group, now: int, retention_ms: int) -> list[TopicPartition] | None:
    """Offsets to delete (an empty list with an Empty group: drop the group); None: nothing."""
    if group.state == GroupState.EMPTY:
        if group.protocol_type is not None:
            if group.state_timestamp + retention_ms > now:
                return None
            return list(group.offsets)
        expired = [tp for tp, o in group.offsets.items() if o.commit_timestamp + retention_ms <= now]
        if not expired and group.offsets:
            return None
        return expired
    subscribed = group.subscribed_topics()
    if not subscribed:
        return None
    expired = [tp for tp, o in group.offsets.items()
               if tp.topic not in subscribed and o.commit_timestamp + retention_ms <= now]
    return expired or None


def _replay_marker(batch: bytes, producer_id: int, pending: dict, offsets: dict) -> None:
    """A transaction marker while loading: the producer's pending commits are applied
    (COMMIT, unless a later plain commit is already there) or dropped (ABORT)."""
    marker = read_marker(batch)
    if marker is None:
        return  # not a transaction marker
    txn = pending.pop(producer_id, {})
    if not marker.committed:
        return
    for group_id, per_tp in txn.items():
        current = offsets.setdefault(group_id, {})
        for tp, o in per_tp.items():
            if tp not in current or current[tp].record_offset < o.record_offset:
                current[tp] = o

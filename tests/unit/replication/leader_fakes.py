"""An in-memory leader for the replica fetcher's tests: a :class:`LeaderEndPoint` answering
from real leader ``Log`` objects (as Kafka's MockLeaderEndPoint does), plus the follower's
side (:class:`Followed`, a ``FollowerLogs``) and a settable clock."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.replication.leader_endpoint import (
    BrokerEndPoint,
    EpochEndOffset,
    FetchAnswer,
    FetchedPartition,
    FetchParams,
    PartitionFetch,
)
from weir.storage.log import Log, LogConfig


def open_log(path: Path) -> Log:
    return Log.open(path, LogConfig.from_dict({}), clean_shutdown=False, now_ms=0)


def write(log: Log, epochs: list[int], value: bytes = b"v") -> None:
    """Append one single-record batch per entry of ``epochs``, as leader of that epoch."""
    for epoch in epochs:
        if log.epoch_cache.latest_epoch < epoch:
            log.epoch_cache.assign(epoch, log.log_end_offset)
        log.append_as_leader(build_batch([value]), epoch, now_ms=0)


def all_bytes(log: Log) -> bytes:
    if log.log_end_offset == log.log_start_offset:
        return b""
    return log.read(log.log_start_offset, 1 << 30, max_offset=None).read_bytes()


@dataclass
class Clock:
    now: int = 1_000

    def __call__(self) -> int:
        return self.now


@dataclass
class InMemoryLeader:
    """The leader broker: its logs, its leader epoch per partition, and faults to inject."""

    logs: dict[TopicPartition, Log]
    epoch: dict[TopicPartition, int]
    broker_id: int = 1
    fail_next: list[BaseException] = field(default_factory=list)  # raised by the next calls
    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)  # per-partition
    fetches: list[dict[TopicPartition, PartitionFetch]] = field(default_factory=list)
    epoch_questions: list[dict[TopicPartition, tuple[int, int]]] = field(default_factory=list)
    resets: int = 0
    closed: bool = False

    @property
    def broker(self) -> BrokerEndPoint:
        return BrokerEndPoint(self.broker_id, "leader", 9092)

    async def _maybe_fail(self) -> None:
        await asyncio.sleep(0)  # a real leader answers later: let other tasks run
        if self.fail_next:
            raise self.fail_next.pop(0)

    def _check(self, tp: TopicPartition, current_epoch: int) -> Log:
        if tp in self.errors:
            raise KafkaError(self.errors[tp], "injected")
        if tp not in self.logs:
            raise KafkaError(ErrorCode.not_leader_or_follower, "not hosted")
        if current_epoch < self.epoch[tp]:
            raise KafkaError(ErrorCode.fenced_leader_epoch, "fenced")
        if current_epoch > self.epoch[tp]:
            raise KafkaError(ErrorCode.unknown_leader_epoch, "unknown epoch")
        return self.logs[tp]

    async def fetch(self, params: FetchParams,
                    partitions: dict[TopicPartition, PartitionFetch]) -> FetchAnswer:
        await self._maybe_fail()
        self.fetches.append(dict(partitions))
        out = {}
        for tp, p in partitions.items():
            try:
                log = self._check(tp, p.current_leader_epoch)
            except KafkaError as exc:
                out[tp] = FetchedPartition(error=exc.code)
                continue
            if p.last_fetched_epoch >= 0:
                epoch, end = log.epoch_cache.end_offset_for(p.last_fetched_epoch,
                                                            log.log_end_offset)
                if epoch != p.last_fetched_epoch or end < p.fetch_offset:
                    out[tp] = FetchedPartition(high_watermark=log.high_watermark,
                                               log_start_offset=log.log_start_offset,
                                               diverging_epoch=(epoch, end))
                    continue
            if not log.log_start_offset <= p.fetch_offset <= log.log_end_offset:
                out[tp] = FetchedPartition(error=ErrorCode.offset_out_of_range)
                continue
            records = b""
            if p.fetch_offset < log.log_end_offset:
                records = log.read(p.fetch_offset, p.partition_max_bytes,
                                   max_offset=None).read_bytes()
            out[tp] = FetchedPartition(high_watermark=log.high_watermark,
                                       log_start_offset=log.log_start_offset, records=records)
        return FetchAnswer(out)

    async def fetch_epoch_end_offsets(self, replica_id: int,
                                      partitions: dict[TopicPartition, tuple[int, int]],
                                      ) -> dict[TopicPartition, EpochEndOffset]:
        await self._maybe_fail()
        self.epoch_questions.append(dict(partitions))
        out = {}
        for tp, (current, asked) in partitions.items():
            try:
                log = self._check(tp, current)
            except KafkaError as exc:
                out[tp] = EpochEndOffset(exc.code)
                continue
            epoch, end = log.epoch_cache.end_offset_for(asked, log.log_end_offset)
            out[tp] = EpochEndOffset(ErrorCode.none, epoch, end)
        return out

    async def fetch_earliest_offset(self, replica_id: int, tp: TopicPartition,
                                    current_leader_epoch: int) -> int:
        await self._maybe_fail()
        return self._check(tp, current_leader_epoch).log_start_offset

    async def fetch_latest_offset(self, replica_id: int, tp: TopicPartition,
                                  current_leader_epoch: int) -> int:
        await self._maybe_fail()
        return self._check(tp, current_leader_epoch).log_end_offset

    async def reset(self) -> None:
        self.resets += 1

    async def close(self) -> None:
        self.closed = True


@dataclass
class Followed:
    """This broker's follower replicas (a ``FollowerLogs``): logs, ISR membership, and the
    high-watermark rule of ReplicaManager.on_follower_fetched."""

    logs: dict[TopicPartition, Log]
    in_sync: set[TopicPartition] = field(default_factory=set)
    fetched: list[tuple[TopicPartition, int, int]] = field(default_factory=list)
    checkpointed: list[Log] = field(default_factory=list)

    def follower_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def is_in_sync(self, tp: TopicPartition) -> bool:
        return tp in self.in_sync

    def schedule_epoch_checkpoints(self, logs: list[Log]) -> None:
        self.checkpointed.extend(logs)
        for log in logs:
            log.epoch_cache.flush()

    def on_follower_fetched(self, tp: TopicPartition, leader_hw: int,
                            leader_log_start: int) -> None:
        self.fetched.append((tp, leader_hw, leader_log_start))
        log = self.logs[tp]
        log.update_high_watermark(min(leader_hw, log.log_end_offset))

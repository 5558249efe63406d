"""The data half of one simulated broker process: real partitions and logs, the fetcher.

Everything that decides is Weir's own code: :class:`~weir.replication.partition.Partition`
(roles, follower fetch states, maximal ISR, high watermark, ISR proposals),
:func:`weir.replication.truncation.after_leader_epoch_answer` (KIP-101/279) and real
:class:`~weir.storage.log.Log` objects on disk.  What this module adds is the shell the
broker's :class:`~weir.replication.replica_manager.ReplicaManager` and fetcher are, driven by
the simulated clock and network: the leader side of Fetch / OffsetForLeaderEpoch / Produce
(with the produce purgatory's completion rule) and a follower fetch loop per partition
(truncating, then fetching).  The state here dies with the process; the log files do not.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.controller.events import IsrChange
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.batch import HEADER_SIZE, iter_headers
from weir.records.builder import build_batch
from weir.replication import truncation
from weir.replication.partition import LeaderState, Partition, delayed_produce_status
from weir.storage.log import Log, LogConfig, parse_topic_partition

if TYPE_CHECKING:
    from weir.sim.data import DataPlane
    from weir.sim.node import SimNode

__all__ = ["LOG_CONFIG", "FetchState", "SimReplicas", "decode_records", "read_all"]

LOG_CONFIG = LogConfig.from_dict({"segment.bytes": 1200})  # small: rolls, multi-segment cuts
TRUNCATING = "truncating"
FETCHING = "fetching"
UNKNOWN_BROKER_EPOCH = -1  # what AlterPartitionManager sends


@dataclass
class FetchState:
    """One partition in this broker's fetcher (see weir.replication.fetcher)."""

    leader: int
    leader_epoch: int
    state: str = TRUNCATING
    offset: int = 0
    token: int = 0  # the request in flight; an answer to another token is stale


@dataclass
class PendingProduce:
    """An acks=all append waiting for the high watermark (the produce purgatory)."""

    tp: TopicPartition
    partition: Partition  # the partition as it was led at the append
    generation: int  # its leadership generation then
    required_offset: int
    records: list[tuple[int, bytes]]
    deadline_ms: int
    reply: Callable[[ErrorCode, list[tuple[int, bytes]]], None]


@dataclass
class Disk:
    """What survives a process crash besides the log directories: the checkpoint files."""

    root: Path
    high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    recovery_points: dict[TopicPartition, int] = field(default_factory=dict)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def decode_records(buf: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in uncompressed v2 batches."""
    out = []
    for header in iter_headers(buf):
        pos = header.position + HEADER_SIZE
        for _ in range(header.records_count):
            length, pos = read_varint(buf, pos)
            end = pos + length
            p = pos + 1  # attributes
            _, p = read_varint(buf, p)  # timestamp delta
            delta, p = read_varint(buf, p)
            key_len, p = read_varint(buf, p)
            p += max(key_len, 0)
            value_len, p = read_varint(buf, p)
            out.append((header.base_offset + delta, buf[p:p + max(value_len, 0)]))
            pos = end
    return out


def read_all(log: Log, max_offset: int | None = None, start: int | None = None) -> bytes:
    """The log's bytes from ``start`` (default: the log start; the batch holding it),
    across segments, of whole batches below ``max_offset``."""
    chunks = []
    offset = log.log_start_offset if start is None else max(start, log.log_start_offset)
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 30, max_offset=max_offset)
        if not read.size:
            break
        chunks.append(read.read_bytes())
        offset = read.last_offset + 1
    return b"".join(chunks)


class SimReplicas:
    """Partitions, logs, fetch states and produce waiters of one broker incarnation."""

    def __init__(self, plane: DataPlane, node: SimNode, disk: Disk) -> None:
        self.plane = plane
        self.node = node
        self.disk = disk
        self.partitions: dict[TopicPartition, Partition] = {}
        self.logs: dict[TopicPartition, Log] = {}
        self.versions: dict[TopicPartition, int] = {}  # changes with any content change
        self.generations: dict[TopicPartition, int] = {}  # changes unless it only grew
        self._decoded: dict[TopicPartition, tuple[int, int, dict[int, bytes]]] = {}
        self.fetch: dict[TopicPartition, FetchState] = {}
        self.waiting: list[PendingProduce] = []

    @property
    def now(self) -> int:
        return self.plane.sim.now

    # -- logs --------------------------------------------------------------------------

    def open_logs(self, live_topics: set[str]) -> None:
        """Start-up: load every log directory (recovering unflushed tails), drop strays."""
        self.disk.root.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.disk.root.iterdir()):
            tp = parse_topic_partition(path.name)
            if tp is None:
                continue
            if tp.topic not in live_topics:
                shutil.rmtree(path)
                continue
            self.logs[tp] = Log.open(path, LOG_CONFIG, clean_shutdown=False, now_ms=self.now,
                                     recovery_point=self.disk.recovery_points.get(tp, 0),
                                     high_watermark=self.disk.high_watermarks.get(tp))
            self.mutated(tp, rewritten=True)

    def log_for(self, tp: TopicPartition) -> Log:
        log = self.logs.get(tp)
        if log is None:
            log = Log.open(self.disk.root / str(tp), LOG_CONFIG, clean_shutdown=True,
                           now_ms=self.now)
            self.logs[tp] = log
            self.mutated(tp, rewritten=True)
        return log

    def mutated(self, tp: TopicPartition, rewritten: bool = False) -> None:
        """Note a change of a log's content: appended only, or ``rewritten`` (truncated,
        reopened, deleted)."""
        self.versions[tp] = version = self.plane.next_version()
        if rewritten or tp not in self.generations:
            self.generations[tp] = version

    def checkpoint(self) -> None:
        """Flush every log (OS writeback / log.flush.interval) and write the checkpoints."""
        for tp, log in sorted(self.logs.items()):
            log.flush()
            self.disk.recovery_points[tp] = log.recovery_point
            self.disk.high_watermarks[tp] = log.high_watermark

    def close(self, lose_unflushed: bool) -> list[tuple[TopicPartition, int, bytes]]:
        """The process dies.  With ``lose_unflushed`` the machine loses power too: each
        log's active segment keeps its flushed bytes plus a random (possibly torn) part of
        the rest.  Returns the records that were in a log and are no longer on disk."""
        lost: list[tuple[TopicPartition, int, bytes]] = []
        for tp, log in sorted(self.logs.items()):
            cut: tuple[Path, int] | None = None
            if lose_unflushed:
                cut, gone_from = self._power_cut(log)
                if gone_from < log.log_end_offset:
                    lost.extend((tp, off, value) for off, value in self.records(tp).items()
                                if off >= gone_from)
            log.close()
            if cut is not None:
                os.truncate(cut[0], cut[1])
        self.logs.clear()
        self.partitions.clear()
        self.fetch.clear()
        self.waiting.clear()
        return lost

    def _power_cut(self, log: Log) -> tuple[tuple[Path, int] | None, int]:
        """Where the active segment is cut: (file, size) and the first offset lost."""
        active = log.active_segment
        recovery_point = log.recovery_point
        durable = 0
        if recovery_point > active.base_offset:
            header = active.find_batch(recovery_point)
            durable = header.position if header is not None else active.size
        if durable >= active.size:
            return None, log.log_end_offset
        rng = self.plane.sim.rng
        size = durable if rng.random() < 0.5 else rng.randint(durable, active.size)
        gone_from = log.log_end_offset
        for header in active.headers_from(0):
            if header.position + header.size > size:
                gone_from = header.base_offset
                break
        return (active.log_path, size), gone_from

    def records(self, tp: TopicPartition) -> dict[int, bytes]:
        """offset -> value of a log's records, read from its files (decoding only what was
        appended since the last call unless the log was rewritten)."""
        log = self.logs[tp]
        generation = self.generations[tp]
        decoded = self._decoded.get(tp)
        if decoded is None or decoded[0] != generation:
            decoded = (generation, log.log_start_offset, {})
        _, upto, values = decoded
        if upto < log.log_end_offset:
            values.update(decode_records(read_all(log, start=upto)))
        self._decoded[tp] = (generation, log.log_end_offset, values)
        return values

    # -- controller requests -----------------------------------------------------------

    def leader_and_isr(self, tp: TopicPartition, p: Any, controller_epoch: int,
                       topic_id: Any) -> None:
        """Apply one LeaderAndIsr partition state, as ReplicaManager._apply_one does."""
        state = LeaderState(leader=p.leader, leader_epoch=p.leader_epoch, isr=list(p.isr),
                            replicas=list(p.replicas), partition_epoch=p.partition_epoch,
                            controller_epoch=controller_epoch)
        part = self.partitions.get(tp) or Partition(tp, self.node.id, topic_id=topic_id)
        try:
            part.check_epoch(state)
        except KafkaError:
            return
        if part.log is None:
            part.log = self.log_for(tp)
        self.partitions[tp] = part
        if state.leader == self.node.id:
            if part.make_leader(state, self.now):
                self.fetch.pop(tp, None)
        elif part.make_follower(state):
            self.fetch.pop(tp, None)
            if part.leader >= 0:
                st = FetchState(part.leader, part.leader_epoch)
                self.fetch[tp] = st
                self.plane.schedule_fetch(self, tp, st, 0)
        self.complete_waiting()

    def stop_replica(self, tp: TopicPartition, leader_epoch: int, delete: bool) -> None:
        """StopReplica, fenced by leader epoch as ReplicaManager.stop_replicas does."""
        part = self.partitions.get(tp)
        if part is not None and 0 <= leader_epoch < part.leader_epoch:
            return
        self.fetch.pop(tp, None)
        if part is not None:
            part.leader = -1
        if delete:
            self.partitions.pop(tp, None)
            log = self.logs.pop(tp, None)
            if log is not None:
                log.delete()
            self.disk.high_watermarks.pop(tp, None)
            self.disk.recovery_points.pop(tp, None)
            self.mutated(tp, rewritten=True)
        self.complete_waiting()

    # -- leader side ---------------------------------------------------------------------

    def serve_produce(self, tp: TopicPartition, values: list[bytes], min_isr: int,
                      timeout_ms: int,
                      reply: Callable[[ErrorCode, list[tuple[int, bytes]]], None]) -> None:
        """acks=all Produce: append as leader, wait until the high watermark passes it."""
        try:
            part = self._partition(tp)
            log = part.require_leader()
            part.check_min_isr(min_isr)
            info = log.append_as_leader(build_batch(values, timestamp_ms=self.now),
                                        part.leader_epoch, self.now)
        except KafkaError as exc:
            reply(exc.code, [])
            return
        self.mutated(tp)
        part.maybe_increment_high_watermark()
        records = [(info.first_offset + i, v) for i, v in enumerate(values)]
        self.waiting.append(PendingProduce(tp, part, part.leadership_generation,
                                           info.last_offset + 1,
                                           records, self.now + timeout_ms, reply))
        self.plane.sim.schedule(timeout_ms, self.complete_waiting)
        self.complete_waiting()

    def complete_waiting(self) -> None:
        """The produce purgatory's check (ReplicaManager._await_replication's status)."""
        still = []
        for w in self.waiting:
            code = self._produce_status(w)
            if code is None and self.now >= w.deadline_ms:
                code = ErrorCode.request_timed_out
            if code is None:
                still.append(w)
            else:
                w.reply(code, w.records if code == ErrorCode.none else [])
        self.waiting = still

    def _produce_status(self, w: PendingProduce) -> ErrorCode | None:
        return delayed_produce_status(self.partitions.get(w.tp), w.partition, w.generation,
                                      w.required_offset, self.plane.config.min_insync_replicas)

    def _partition(self, tp: TopicPartition) -> Partition:
        part = self.partitions.get(tp)
        if part is None:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"{tp} not hosted")
        return part

    def serve_epoch(self, tp: TopicPartition, current_epoch: int,
                    asked_epoch: int) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch on the leader (as the handler answers it)."""
        try:
            log = self._partition(tp).require_leader(current_epoch)
        except KafkaError as exc:
            return exc.code, -1, -1
        epoch, end = log.epoch_cache.end_offset_for(asked_epoch, log.log_end_offset)
        return ErrorCode.none, epoch, end

    def serve_fetch(self, replica_id: int, tp: TopicPartition, current_epoch: int,
                    offset: int, last_epoch: int, log_start: int) -> dict[str, Any]:
        """A follower's Fetch on the leader (ReplicaManager._read_one for replicas)."""
        try:
            part = self._partition(tp)
            log = part.require_leader(current_epoch)
        except KafkaError as exc:
            return {"error": exc.code}
        if last_epoch >= 0:
            epoch, end = log.epoch_cache.end_offset_for(last_epoch, log.log_end_offset)
            if epoch != last_epoch or end < offset:
                return {"error": ErrorCode.none, "diverging": (epoch, end),
                        "hw": log.high_watermark}
        if offset > log.log_end_offset:
            return {"error": ErrorCode.offset_out_of_range, "leo": log.log_end_offset}
        if part.update_follower_fetch(replica_id, offset, self.now, log_start):
            self.complete_waiting()
        self._submit(part, part.propose_isr_expansion(replica_id))
        records = b""
        if offset < log.log_end_offset:
            read = log.read(offset, self.plane.config.fetch_max_bytes, max_offset=None)
            records = read.read_bytes()
        return {"error": ErrorCode.none, "records": records, "hw": log.high_watermark,
                "log_start": log.log_start_offset}

    # -- ISR changes -------------------------------------------------------------------

    def propose_shrinks(self, max_lag_ms: int) -> None:
        for _tp, part in sorted(self.partitions.items()):
            if part.is_leader:
                self._submit(part, part.propose_isr_shrink(self.now, max_lag_ms))

    def _submit(self, part: Partition, isr: frozenset[int] | None) -> None:
        if isr is None:
            return
        sim = self.plane.sim
        assignment = sim.zk.topics.get(part.tp.topic)
        if assignment is None:
            part.abandon_isr_change()
            return
        members = tuple(sorted(isr))
        self.plane.stats["isr_proposals"] += 1
        change = IsrChange(part.leader_epoch, part.partition_epoch, members,
                           tuple(UNKNOWN_BROKER_EPOCH for _ in members))
        token = sim.next_token()
        self.node.broker.alter_in_flight[part.tp] = token
        sim.send_alter_partition(self.node, assignment.topic_id, part.tp, change, token)

    def isr_answer(self, tp: TopicPartition, outcome: Any) -> None:
        """ReplicaManager.on_isr_result (``outcome`` None: no answer in time)."""
        part = self.partitions.get(tp)
        if part is None:
            return
        if not hasattr(outcome, "isr"):
            part.abandon_isr_change()
            return
        if part.apply_isr_change(outcome.leader_epoch, list(outcome.isr), outcome.zk_version):
            part.maybe_increment_high_watermark()
            self.complete_waiting()

    # -- follower side (the fetcher) -----------------------------------------------------

    def follower_log(self, tp: TopicPartition, st: FetchState) -> Log | None:
        part = self.partitions.get(tp)
        if self.fetch.get(tp) is not st or part is None or part.is_leader:
            return None
        return part.log

    def apply_epoch_answer(self, tp: TopicPartition, st: FetchState, leader_epoch: int,
                           end_offset: int) -> None:
        """The fetcher's truncation step (KIP-101/279) with Weir's decision function."""
        log = self.follower_log(tp, st)
        if log is None:
            return
        decision = truncation.after_leader_epoch_answer(
            leader_epoch, end_offset, log.epoch_cache, log.log_end_offset, log.high_watermark)
        if truncation.apply(log, decision):
            self.plane.stats["truncations"] += 1
            self.mutated(tp, rewritten=True)
        if decision.completed:
            st.state, st.offset = FETCHING, log.log_end_offset
        else:
            st.state = TRUNCATING

    def truncate_without_epochs(self, tp: TopicPartition, st: FetchState) -> None:
        log = self.follower_log(tp, st)
        if log is None:
            return
        if log.truncate_to(min(log.high_watermark, log.log_end_offset)):
            self.mutated(tp, rewritten=True)
        st.state, st.offset = FETCHING, log.log_end_offset

    def apply_fetched(self, tp: TopicPartition, st: FetchState, answer: dict[str, Any]) -> bool:
        """A Fetch answer; True if records arrived."""
        log = self.follower_log(tp, st)
        if log is None:
            return False
        if answer["error"] == ErrorCode.offset_out_of_range:
            if answer["leo"] < log.log_end_offset:
                log.truncate_to(answer["leo"])
                self.mutated(tp, rewritten=True)
            st.offset = log.log_end_offset
            return False
        if "diverging" in answer:
            self.apply_epoch_answer(tp, st, *answer["diverging"])
            return False
        records = answer["records"]
        if records:
            log.append_as_follower(records, self.now)
            self.mutated(tp)
        st.offset = log.log_end_offset
        log.update_high_watermark(min(answer["hw"], log.log_end_offset))
        return bool(records)

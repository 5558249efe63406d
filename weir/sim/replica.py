"""The data half of one simulated broker process: the production replica manager.

Each broker incarnation runs Weir's real :class:`~weir.replication.replica_manager.ReplicaManager`
(LeaderAndIsr / StopReplica, appends with the produce purgatory, follower reads with the
fetch purgatory, high watermark, ISR proposals), its real
:class:`~weir.replication.fetcher.ReplicaFetcherManager` and fetchers, and a real
:class:`~weir.storage.log_manager.LogManager` over the broker's directory, on the
simulation's virtual-time event loop (:mod:`weir.sim.vloop`).  What this module adds is only
the wiring to the simulated world:

* :class:`SimLeaderEndPoint`, the fetchers' ``LeaderEndPoint``: each question goes through
  the simulated network (lost, delayed, reordered, duplicated) to the leader broker's own
  ``ReplicaManager`` (``fetch`` as a follower, ``leader_log`` + the epoch cache as the
  OffsetForLeaderEpoch handler answers, ``list_offset``), and a lost message shows as the
  request timing out, as a socket timeout would;
* the production :class:`~weir.replication.alter_partition.AlterPartitionManager`, built by
  the replica manager itself, reaches the controller through
  :meth:`~weir.sim.node.SimNode.connect_frames`: its AlterPartition requests travel as
  encoded frames and its answers are decoded by the client's own code;
* :class:`SimDeferredWriter`, the log manager's storage thread (leader-epoch checkpoints,
  partition.metadata) made deterministic: jobs are written a random simulated time later,
  and a crash loses those still pending, as a process death would.

The clock of every part is the loop's virtual clock; the state here dies with the process,
the log directories do not.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.coordination.errors import ControllerMovedError
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.fetch_response import FileRegion
from weir.records.builder import build_batch
from weir.records.records import iter_records
from weir.replication.alter_partition import AlterPartitionManager, IsrResult
from weir.replication.fetcher import FetcherSettings, PartitionFetchState
from weir.replication.leader_endpoint import (
    BrokerEndPoint,
    EpochEndOffset,
    FetchAnswer,
    FetchedPartition,
    FetchParams,
    PartitionFetch,
)
from weir.replication.local_reads import FetchPartition
from weir.replication.log_dir_failure import handle_log_dir_failure
from weir.replication.partition import LeaderState, Partition
from weir.replication.replica_manager import (
    PartitionStateUpdate,
    ReplicaManager,
    ReplicationSettings,
)
from weir.sim.node import SIM_PORT_BASE
from weir.storage.log import Log, LogConfig, parse_topic_partition
from weir.storage.log_manager import LogManager

if TYPE_CHECKING:
    from weir.sim.data import DataPlane
    from weir.sim.node import SimNode

__all__ = ["LOG_CONFIG", "SimLeaderEndPoint", "SimReplicas", "read_all"]

LOG_CONFIG = LogConfig.from_dict({"segment.bytes": 1200})  # small: rolls, multi-segment cuts
ALTER_PARTITION_TIMEOUT_MS = 500
"""How long the simulated AlterPartitionManager waits for the controller's answer."""
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1


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


def _region_bytes(records: Any) -> bytes:
    """The bytes a Fetch answer carries (a file region is read now, as sendfile would)."""
    if isinstance(records, FileRegion):
        with open(records.path, "rb") as f:
            return os.pread(f.fileno(), records.size, records.position)
    return bytes(records or b"")


class SimDeferredWriter:
    """``LogManager.deferred`` under simulation: deterministic, and lost with the process."""

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane
        self._pending: list[Any] = []
        self.dead = False

    def submit(self, jobs: Any) -> None:
        if not jobs or self.dead:
            return
        self._pending.extend(jobs)
        self.plane.sim.schedule(self.plane.sim.rng.randint(1, 200), self.drain)

    def pending(self) -> int:
        return len(self._pending)

    def drain(self, timeout_s: float | None = None) -> bool:
        jobs, self._pending = self._pending, []
        if not self.dead:
            for job in jobs:
                job.flush(if_dir_exists=True)
        return True

    def close(self, timeout_s: float = 30.0) -> None:
        self.drain()


class SimLeaderEndPoint:
    """A fetcher's leader broker, reached through the simulated network."""

    def __init__(self, follower: SimReplicas, leader_id: int) -> None:
        self.follower = follower
        self.leader_id = leader_id

    @property
    def broker(self) -> BrokerEndPoint:
        return BrokerEndPoint(self.leader_id, f"broker-{self.leader_id}", 9092)

    async def _call(self, serve: Callable[[ReplicaManager], Coroutine[Any, Any, Any]],
                    timeout_ms: int) -> Any:
        plane = self.follower.plane
        if self.follower.dead:
            # A dead process sends nothing.  Its fetcher was cancelled at the crash; this
            # only runs if the cancellation raced with an answer that was being delivered.
            raise ConnectionError(f"broker {self.follower.node.id}: the process is dead")
        plane.stats["fetch_rounds"] += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        leader = plane.sim.nodes[self.leader_id]
        src = self.follower.node

        def arrive(at: SimReplicas) -> None:
            def answered(task: asyncio.Task[Any]) -> None:
                if task.cancelled():
                    return
                exc = task.exception()
                if exc is not None:
                    plane.sim.violation(f"broker {at.node.id} failed to serve broker "
                                        f"{src.id}: {exc!r}")
                    return
                value = task.result()
                plane.send(at.node.id, src, lambda _r: fut.done() or fut.set_result(value))
            at.spawn(serve(at.rm)).add_done_callback(answered)
        plane.send(src.id, leader, arrive, may_duplicate=True)
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation
        # that races with the answer arriving, and the crashed process's fetcher would go
        # on as a zombie fetching for a broker that has restarted.
        async with asyncio.timeout(timeout_ms / 1000):
            return await fut

    async def fetch(self, params: FetchParams,
                    partitions: dict[TopicPartition, PartitionFetch]) -> FetchAnswer:
        requests = [FetchPartition(tp, p.fetch_offset, p.partition_max_bytes,
                                   p.current_leader_epoch, p.last_fetched_epoch,
                                   p.log_start_offset, topic_id=p.topic_id)
                    for tp, p in partitions.items()]

        async def serve(rm: ReplicaManager) -> FetchAnswer:
            results = await rm.reads.fetch(params.replica_id, params.max_wait_ms, params.min_bytes,
                                     params.max_bytes, requests)
            return FetchAnswer({tp: FetchedPartition(
                error=r.error, high_watermark=r.high_watermark,
                log_start_offset=r.log_start_offset, records=_region_bytes(r.records),
                diverging_epoch=r.diverging_epoch) for tp, r in results.items()})
        settings = self.follower.rm.fetchers.settings
        return await self._call(serve, settings.socket_timeout_ms + params.max_wait_ms)

    async def fetch_epoch_end_offsets(self, replica_id: int,
                                      partitions: dict[TopicPartition, tuple[int, int]],
                                      ) -> dict[TopicPartition, EpochEndOffset]:
        async def serve(rm: ReplicaManager) -> dict[TopicPartition, EpochEndOffset]:
            out = {}
            for tp, (current, asked) in partitions.items():
                try:  # as the OffsetForLeaderEpoch handler answers
                    _p, plog = rm.leader_log(tp, current)
                except KafkaError as exc:
                    out[tp] = EpochEndOffset(exc.code)
                    continue
                epoch, end = plog.epoch_cache.end_offset_for(asked, plog.log_end_offset)
                out[tp] = EpochEndOffset(ErrorCode.none, epoch, end)
            return out
        return await self._call(serve, self.follower.rm.fetchers.settings.socket_timeout_ms)

    async def _list_offset(self, replica_id: int, tp: TopicPartition, epoch: int,
                           timestamp: int) -> int:
        async def serve(rm: ReplicaManager) -> int | ErrorCode:
            try:
                return rm.list_offset(tp, timestamp, epoch, replica_id)[0]
            except KafkaError as exc:
                return exc.code
        answer = await self._call(serve, self.follower.rm.fetchers.settings.socket_timeout_ms)
        if isinstance(answer, ErrorCode):
            raise KafkaError(answer, f"ListOffsets from leader: {answer.name}")
        return answer

    async def fetch_earliest_offset(self, replica_id: int, tp: TopicPartition,
                                    current_leader_epoch: int) -> int:
        return await self._list_offset(replica_id, tp, current_leader_epoch, EARLIEST_TIMESTAMP)

    async def fetch_latest_offset(self, replica_id: int, tp: TopicPartition,
                                  current_leader_epoch: int) -> int:
        return await self._list_offset(replica_id, tp, current_leader_epoch, LATEST_TIMESTAMP)

    async def reset(self) -> None:
        return None

    async def close(self) -> None:
        return None


class SimReplicas:
    """One broker incarnation's replica manager, log manager and tasks."""

    def __init__(self, plane: DataPlane, node: SimNode, root: Path) -> None:
        self.plane = plane
        self.node = node
        self.root = root
        self._tasks: dict[asyncio.Task[Any], None] = {}  # ordered: replayable cancels
        self.dead = False  # this incarnation crashed (see close)
        self._decoded: dict[TopicPartition, tuple[Log, int, int, dict[int, bytes]]] = {}
        self._generation: dict[TopicPartition, tuple[Log, int, int, int]] = {}
        config = plane.config
        self.deferred = SimDeferredWriter(plane)
        # One log dir, or several (JBOD, KIP-112) for runs with disk faults (weir.sim.disk).
        self.log_dirs = [root] if config.log_dirs == 1 else [
            root / f"dir-{i}" for i in range(config.log_dirs)]
        self.log_manager = LogManager(self.log_dirs, LOG_CONFIG, deferred=self.deferred)
        settings = ReplicationSettings(
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            fetcher=FetcherSettings(replica_id=node.id, max_wait_ms=config.fetch_max_wait_ms,
                                    max_bytes=config.fetch_max_bytes,
                                    partition_max_bytes=config.fetch_max_bytes,
                                    backoff_ms=config.fetch_backoff_ms,
                                    socket_timeout_ms=config.fetch_timeout_ms))
        self.rm = ReplicaManager(node.id, self.log_manager, lambda _topic: LOG_CONFIG,
                                 lambda _topic: config.min_insync_replicas, settings,
                                 clock=lambda: plane.sim.now,
                                 endpoint_factory=lambda b: SimLeaderEndPoint(self, b.broker_id),
                                 isr_changes=self._alter_partition_manager)
        self.log_manager.dir_failure_listeners.append(self._on_log_dir_failure)

    def _alter_partition_manager(self, on_result: Callable[[IsrResult], None]
                                 ) -> AlterPartitionManager:
        """The production AlterPartitionManager (KIP-497), over the simulated network to
        whichever broker ZooKeeper names as controller; an answer not back in time sends
        the proposals again, as a socket timeout would."""
        node, sim = self.node, self.plane.sim

        def controller() -> tuple[int, str, int] | None:
            holder = sim.zk.controller
            return None if holder is None else (
                holder[0], f"broker-{holder[0]}", SIM_PORT_BASE + holder[0])
        return AlterPartitionManager(node.id, lambda: node.epoch, controller, on_result,
                                     backoff_ms=20, timeout_ms=ALTER_PARTITION_TIMEOUT_MS,
                                     connect=node.connect_frames)

    @property
    def now(self) -> int:
        return self.plane.sim.now

    @property
    def partitions(self) -> dict[TopicPartition, Partition]:
        return self.rm.partitions

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        """The logs the broker can serve: not in an offline dir, and none of whose I/O
        failed (its dir goes offline when the broker next looks at it)."""
        return {tp: log for tp, log in self.log_manager.all_logs().items()
                if log.offline_reason is None}

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A task of this process (cancelled when it dies)."""
        process = self.node.process
        task = (self.plane.sim.loop.create_task(coro) if process is None
                else process.spawn(self.plane.sim.loop, coro))
        self._tasks[task] = None
        task.add_done_callback(lambda t: self._tasks.pop(t, None))
        return task

    # -- logs --------------------------------------------------------------------------

    def open_logs(self, live_topics: set[str]) -> None:
        """Start-up: drop the directories of deleted topics, then the log manager loads the
        rest (recovering unflushed tails from the checkpoints it wrote)."""
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            for path in sorted(log_dir.iterdir()):
                tp = parse_topic_partition(path.name)
                if tp is not None and tp.topic not in live_topics:
                    shutil.rmtree(path)
        self.log_manager.startup(self.now)

    # -- a log dir failing (weir.sim.disk injects the I/O errors) ----------------------

    def _on_log_dir_failure(self, log_dir: Path, reason: str) -> None:
        """The LogManager's dir-failure listener, the production handler (KIP-112)."""
        self.plane.stats["log_dirs_offline"] += 1
        handle_log_dir_failure(self.rm, None, log_dir, reason,
                               notify_controller=lambda: self.spawn(self._propagate()),
                               halt=self._halt)

    async def _propagate(self) -> None:
        """``/log_dir_event_notification/log_dir_event_<seq>`` for the controller, retried
        across a ZooKeeper session expiry as the ZooKeeper client does."""
        node, sim = self.node, self.plane.sim
        while True:
            try:
                assert node.zk is not None
                await sim.run_zk(node, node.zk.propagate_log_dir_event, node.id)
                return
            except ControllerMovedError:  # the session expired: after the reconnect
                await asyncio.sleep(0.02)

    def _halt(self) -> None:
        """Every log dir failed: the process halts (Kafka's ``Exit.halt``); its session
        expires later, as a kill's does."""
        node, incarnation = self.node, self.node.incarnation
        self.plane.sim.schedule(0, lambda: node.alive and node.incarnation == incarnation
                                and self.plane.sim._kill(node, "halt (all log dirs failed) of"))

    def generation(self, tp: TopicPartition) -> int:
        """Changes whenever the log of ``tp`` is replaced or loses records (truncated, its
        start moved, reopened); stays while it only grows."""
        log = self.logs.get(tp)
        seen = self._generation.get(tp)
        if log is None:
            self._generation.pop(tp, None)
            return -1
        if seen is not None and seen[0] is log and seen[1] == log.log_start_offset \
                and log.log_end_offset >= seen[2]:
            self._generation[tp] = (log, seen[1], log.log_end_offset, seen[3])
            return seen[3]
        if seen is not None and seen[0] is log and log.log_end_offset < seen[2]:
            self.plane.stats["truncations"] += 1
        number = self.plane.next_version()
        self._generation[tp] = (log, log.log_start_offset, log.log_end_offset, number)
        return number

    def checkpoint(self) -> None:
        """Flush every log (OS writeback / log.flush.interval) and write the checkpoints."""
        self.node.run(self._checkpoint)

    def _checkpoint(self) -> None:
        for tp, log in sorted(self.logs.items()):
            try:
                log.flush()
            except KafkaError:  # a failed fsync: the dir goes offline (LogManager's guard)
                with contextlib.suppress(KafkaError):
                    self.log_manager.check_online(tp)
        self.log_manager.checkpoint_recovery_points()
        self.log_manager.checkpoint_log_start_offsets()
        self.log_manager.checkpoint_high_watermarks()

    def close(self, lose_unflushed: bool) -> list[tuple[TopicPartition, int, bytes]]:
        """The process dies.  With ``lose_unflushed`` the machine loses power too: each
        log's active segment keeps its flushed bytes plus a random (possibly torn) part of
        the rest.  Returns the records that were in a log and are no longer on disk."""
        self.dead = True
        if self.plane.sim.disks is not None:  # the failed disk is back at the next start
            self.plane.sim.disks.repair(self.log_dirs)
        dying = list(self._tasks)
        for task in dying:
            task.cancel()
        dying.extend(self.rm.fetchers.abandon())
        self.plane.bury(dying)
        self.deferred.dead = True  # its pending writes die with the process
        lost: list[tuple[TopicPartition, int, bytes]] = []
        serving = self.logs
        for logs in self.log_manager.logs_by_dir().values():
            for log, _future in logs:  # failed or in an offline dir: files stay as they were
                if serving.get(log.topic_partition) is not log:
                    log.close()
        for tp, log in sorted(serving.items()):
            cut: tuple[Path, int] | None = None
            if lose_unflushed:
                cut, gone_from = self._power_cut(log)
                if gone_from < log.log_end_offset:
                    lost.extend((tp, off, value) for off, value in self.records(tp).items()
                                if off >= gone_from)
            log.close()
            if cut is not None:
                os.truncate(cut[0], cut[1])
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
        generation = self.generation(tp)
        decoded = self._decoded.get(tp)
        if decoded is None or decoded[0] is not log or decoded[1] != generation:
            decoded = (log, generation, log.log_start_offset, {})
        _, _, upto, values = decoded
        if upto < log.log_end_offset:
            values.update((r.offset, r.value or b"")
                          for r in iter_records(read_all(log, start=upto)))
        self._decoded[tp] = (log, generation, log.log_end_offset, values)
        return values

    def fetch_state(self, tp: TopicPartition) -> tuple[int, PartitionFetchState] | None:
        """(leader broker, fetch state) of a partition this broker's fetchers follow."""
        for leader, fetcher in self.rm.fetchers.fetchers.items():
            st = fetcher.partitions.get(tp)
            if st is not None:
                return leader, st
        return None

    # -- controller requests -----------------------------------------------------------

    def leader_and_isr(self, tp: TopicPartition, p: Any, controller_epoch: int,
                       topic_id: Any) -> ErrorCode:
        """One LeaderAndIsr partition state, applied by ReplicaManager.apply_leader_and_isr."""
        state = LeaderState(leader=p.leader, leader_epoch=p.leader_epoch, isr=list(p.isr),
                            replicas=list(p.replicas), partition_epoch=p.partition_epoch,
                            controller_epoch=controller_epoch)
        live = {p.leader: BrokerEndPoint(p.leader, f"broker-{p.leader}", 9092)} \
            if p.leader >= 0 else {}
        try:
            return self.rm.apply_leader_and_isr(
                controller_epoch, {tp: PartitionStateUpdate(state, topic_id, is_new=False)},
                full=False, live_leaders=live)[tp]
        except KafkaError:
            return ErrorCode.none  # a stale controller epoch: the request's answer says so

    def stop_replica(self, tp: TopicPartition, leader_epoch: int, delete: bool) -> None:
        """StopReplica, by ReplicaManager.stop_replicas."""
        try:
            self.rm.stop_replicas(self.rm.controller_epoch, {tp: (leader_epoch, delete)})
        except KafkaError:
            return
        self._generation.pop(tp, None)
        self._decoded.pop(tp, None)

    # -- produce -----------------------------------------------------------------------

    def serve_produce(self, tp: TopicPartition, values: list[bytes], timeout_ms: int,
                      reply: Callable[[ErrorCode, list[tuple[int, bytes]]], None],
                      producer: tuple[int, int, int] | None = None) -> None:
        """An acks=all Produce, by ReplicaManager.append and its produce purgatory;
        ``producer``: (producer id, epoch, base sequence) of an idempotent producer's batch.
        The reply's records carry the offsets the response gave (``base_offset`` on)."""
        async def produce() -> None:
            pid, epoch, sequence = producer or (-1, -1, -1)
            batch = build_batch(values, timestamp_ms=self.now, producer_id=pid,
                                producer_epoch=epoch, base_sequence=sequence)
            result = (await self.rm.append(-1, timeout_ms, {tp: batch}))[tp]
            records = ([(result.base_offset + i, v) for i, v in enumerate(values)]
                       if result.error == ErrorCode.none else [])
            reply(result.error, records)
        self.spawn(produce())

    # -- ISR changes ------------------------------------------------------------------

    def propose_shrinks(self) -> None:
        self.rm.maybe_shrink_isr()

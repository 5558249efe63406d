"""The data half of one simulated broker process: the simulation's wiring around the
production replica manager of the broker's :class:`~weir.server.broker_core.BrokerCore`.

Each broker incarnation runs Weir's real :class:`~weir.replication.replica_manager.ReplicaManager`
(built by its ``BrokerCore``: LeaderAndIsr / StopReplica through the real handlers, appends
with the produce purgatory, follower reads with the fetch purgatory, high watermark, ISR
proposals through the production AlterPartitionManager), its real fetchers and a real
:class:`~weir.storage.log_manager.LogManager` over the broker's directory, on the
simulation's virtual-time event loop (:mod:`weir.sim.vloop`).  What this module adds is only
the wiring to the simulated world:

* :class:`SimLeaderEndPoint`, the fetchers' endpoint: the production
  :class:`~weir.replication.leader_endpoint.RemoteLeaderEndPoint` (Fetch with its
  incremental fetch session, OffsetForLeaderEpoch, ListOffsets, encoded and decoded by the
  client's code) whose connection is the simulated network
  (:meth:`~weir.sim.node.SimNode.connect_frames`, lossy: messages may be lost, delayed,
  reordered or served twice); the leader answers through its own ``BrokerCore.serve_frame``;
* :class:`SimDeferredWriter`, the log manager's storage thread (leader-epoch checkpoints,
  partition.metadata) made deterministic: jobs are written a random simulated time later,
  and a crash loses those still pending, as a process death would;
* :class:`SimReplicas`, the data plane's view of one incarnation's logs (what the
  invariants read, power loss, produce).

The clock of every part is the loop's virtual clock; the state here dies with the process,
the log directories do not.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.records.builder import build_batch
from weir.records.records import iter_records
from weir.replication.fetcher import PartitionFetchState
from weir.replication.leader_endpoint import BrokerEndPoint, RemoteLeaderEndPoint
from weir.replication.partition import Partition
from weir.replication.replica_manager import ReplicaManager
from weir.storage.log import Log
from weir.storage.log_manager import LogManager

if TYPE_CHECKING:
    from weir.protocol.client import FrameConnection
    from weir.sim.data import DataPlane
    from weir.sim.node import SimNode
    from weir.sim.world import World

__all__ = ["SimDeferredWriter", "SimLeaderEndPoint", "SimReplicas", "read_all"]


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


class SimDeferredWriter:
    """``LogManager.deferred`` under simulation: deterministic, and lost with the process."""

    def __init__(self, sim: World) -> None:
        self.sim = sim
        self._pending: list[Any] = []
        self.dead = False

    def submit(self, jobs: Any) -> None:
        if not jobs or self.dead:
            return
        self._pending.extend(jobs)
        self.sim.schedule(self.sim.rng.randint(1, 200), self.drain)

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


class SimLeaderEndPoint(RemoteLeaderEndPoint):
    """A fetcher's leader broker: the production endpoint, over the simulated network."""

    def __init__(self, node: SimNode, leader: BrokerEndPoint) -> None:
        settings = node.sim.config
        super().__init__(leader, client_id=f"replica-fetcher-{node.id}",
                         socket_timeout_ms=settings.fetch_timeout_ms)
        self._node = node

    async def _connection(self) -> Any:
        conn = self._frames
        if conn is None or not conn.connected:
            conn = self._node.connect_frames(self.broker.host, self.broker.port, lossy=True)
            await conn.connect(timeout_s=self.socket_timeout_ms / 1000)
            self._frames = conn
        return conn

    _frames: FrameConnection | None = None

    async def close(self) -> None:
        self._frames = None


class SimReplicas:
    """The data plane's view of one broker incarnation: its ``BrokerCore``'s replica
    manager and log manager, and the tasks the data plane starts on it."""

    def __init__(self, plane: DataPlane, node: SimNode) -> None:
        assert node.core is not None
        self.plane = plane
        self.node = node
        self.rm: ReplicaManager = node.core.replica_manager
        self.log_manager: LogManager = node.core.log_manager
        self.log_dirs = node.log_dirs
        self._tasks: dict[asyncio.Task[Any], None] = {}  # ordered: replayable cancels
        self.dead = False  # this incarnation crashed (see close)
        self._decoded: dict[TopicPartition, tuple[Log, int, int, dict[int, bytes]]] = {}
        self._generation: dict[TopicPartition, tuple[Log, int, int, int]] = {}
        # Counted after the core's own listener (the production handler, KIP-112) ran.
        self.log_manager.dir_failure_listeners.append(self._on_log_dir_failure)

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

    def _on_log_dir_failure(self, log_dir: Path, reason: str) -> None:
        self.plane.stats["log_dirs_offline"] += 1

    def generation(self, tp: TopicPartition) -> int:
        """Changes whenever the log of ``tp`` is replaced or loses records (truncated, its
        start moved, reopened); stays while it only grows.  A truncation is told by the
        log's own count (``Log.truncations``), not by its end going back: a follower that
        truncates and re-fetches past its old end between two looks has rewritten records
        below that end."""
        log = self.logs.get(tp)
        seen = self._generation.get(tp)
        if log is None:
            self._generation.pop(tp, None)
            return -1
        if seen is not None and seen[0] is log and seen[1] == log.log_start_offset \
                and seen[2] == log.truncations:
            return seen[3]
        if seen is not None and seen[0] is log and seen[2] != log.truncations:
            self.plane.stats["truncations"] += 1
        number = self.plane.next_version()
        self._generation[tp] = (log, log.log_start_offset, log.truncations, number)
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

"""Disk errors in the simulation: one log dir of a broker fails (Kafka's
LogDirFailureChannel, JBOD, KIP-112).

:class:`FaultyDisks` is the :mod:`weir.storage.file_io` seam of every simulated broker's
log segments: it passes each ``pwrite``, ``pread`` and ``fsync`` to the operating system,
except that from a seeded moment the chosen kind of operation on one log dir of one broker
raises ``OSError(EIO)``, and from its first failure every operation on that dir does (the
disk is gone).  Only the broker process's own I/O fails (:func:`weir.sim.process.current`):
the simulation's consumer and invariants read the files as an observer.  The rest is the
production code: ``storage_op`` turns the error into KAFKA_STORAGE_ERROR, the
``LogManager`` takes the dir offline, ``handle_log_dir_failure`` stops the dir's replicas
and the broker writes ``/log_dir_event_notification`` (or halts if no dir is left), the
controller sends LeaderAndIsr, the broker answers KAFKA_STORAGE_ERROR for those replicas,
the controller marks them OfflineReplica, takes them out of the ISR and elects new leaders.

:class:`DiskFaults` injects the faults while the simulation injects others (sim brokers
have ``SimConfig.log_dirs`` dirs), stops arming new ones when faults stop, and halfway
through the settle phase checks the invariant :class:`OfflineReplicasFenced`; then the
brokers with a failed dir restart (the disk is back, its files as they were) and the
cluster must converge as usual.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from weir.sim import process
from weir.sim.invariants import Invariant
from weir.storage import file_io

if TYPE_CHECKING:
    from weir.sim.world import World

__all__ = ["OPERATIONS", "DiskFaults", "FaultyDisks", "OfflineReplicasFenced"]

OPERATIONS = ("write", "fsync", "read")


class FaultyDisks:
    """The segments' :class:`~weir.storage.file_io.FileIo` under simulation."""

    def __init__(self, sim: World) -> None:
        self.sim = sim
        self.armed: dict[Path, tuple[int, str]] = {}  # log dir -> (broker, operation)
        self.broken: dict[Path, int] = {}  # log dir -> broker

    def _check(self, path: Path, operation: str) -> None:
        log_dir = path.parent.parent  # <log dir>/<topic>-<partition>/<segment file>
        if log_dir in self.broken:
            broker = self.broken[log_dir]
        elif self.armed.get(log_dir, (0, ""))[1] == operation:
            broker = self.armed[log_dir][0]
        else:
            return
        node = self.sim.nodes[broker]
        if node.process is None or process.current() is not node.process:
            return  # an observer's read, or another process's
        if log_dir not in self.broken:
            del self.armed[log_dir]
            self.broken[log_dir] = broker
            self.sim.faults.append(f"{self.sim.now}: {operation} in {log_dir.name} of broker "
                                   f"{broker} fails (EIO)")
            if self.sim.data is not None:
                self.sim.data.stats["disk_errors"] += 1
        raise OSError(errno.EIO, f"simulated I/O error ({operation})", str(path))

    def pwrite(self, path: Path, fd: int, data: bytes | bytearray, position: int) -> int:
        self._check(path, "write")
        return os.pwrite(fd, data, position)

    def pread(self, path: Path, fd: int, size: int, position: int) -> bytes:
        self._check(path, "read")
        return os.pread(fd, size, position)

    def fsync(self, path: Path, fd: int) -> None:
        self._check(path, "fsync")
        os.fsync(fd)

    def repair(self, log_dirs: Iterable[Path]) -> None:
        """The broker process died: its disks work again when it restarts."""
        for log_dir in log_dirs:
            self.armed.pop(log_dir, None)
            self.broken.pop(log_dir, None)


class OfflineReplicasFenced(Invariant):
    """Once the controller has had time to handle a log dir failure (checked when faults
    have stopped for a while): no replica in an offline log dir of a live broker leads its
    partition or is in its ISR - unless it is the last ISR member of a partition left
    without a leader, which Kafka's OfflineReplica transition keeps (unclean election
    off)."""

    name = "offline replicas fenced"

    def check(self, sim: World) -> list[str]:
        out = []
        for node in sim.nodes.values():
            replicas = node.replicas
            if not node.alive or replicas is None:
                continue
            lm = replicas.log_manager
            offline = lm.offline_dirs
            for tp in sorted(replicas.partitions):
                log_dir = lm.log_dir_of(tp)
                state = sim.zk.states.get(tp)
                if log_dir not in offline or state is None or tp.topic in sim.zk.to_delete:
                    continue
                if state.leader == node.id:
                    out.append(f"broker {node.id} still leads {tp} from offline {log_dir.name}")
                elif node.id in state.isr and not (state.leader < 0 and state.isr == [node.id]):
                    out.append(f"broker {node.id} still in the ISR {state.isr} of {tp} with "
                               f"its replica in offline {log_dir.name}")
        return out


class DiskFaults:
    """Injects disk errors and checks :class:`OfflineReplicasFenced` (module docstring)."""

    def __init__(self, sim: World) -> None:
        if sim.config.log_dirs < 2:
            raise ValueError("disk faults need SimConfig.log_dirs >= 2 (JBOD)")
        self.sim = sim
        self.disks = FaultyDisks(sim)
        self.invariant = OfflineReplicasFenced()
        self._previous = file_io.install(self.disks)
        cfg = sim.config
        sim.schedule(sim.rng.randint(*cfg.disk_fault_every_ms), self._inject)
        sim.schedule(cfg.fault_ms, self.disks.armed.clear)
        sim.schedule(cfg.fault_ms + cfg.settle_ms // 2, self._check_and_restart)

    def close(self) -> None:
        file_io.install(self._previous)

    def repair(self, log_dirs: Iterable[Path]) -> None:
        self.disks.repair(log_dirs)

    def _inject(self) -> None:
        sim, cfg = self.sim, self.sim.config
        if sim.now >= cfg.fault_ms:
            return
        sim.schedule(sim.rng.randint(*cfg.disk_fault_every_ms), self._inject)
        alive = [n for n in sim.nodes.values() if n.alive and n.replicas is not None]
        if not alive:
            return
        node = sim.rng.choice(alive)
        assert node.replicas is not None
        dirs = [d for d in node.replicas.log_manager.online_dirs
                if d not in self.disks.broken and d not in self.disks.armed]
        if not dirs:
            return
        log_dir = sim.rng.choice(dirs)
        operation = sim.rng.choice(OPERATIONS)
        self.disks.armed[log_dir] = (node.id, operation)
        sim.faults.append(f"{sim.now}: disk of broker {node.id} {log_dir.name} will fail "
                          f"on {operation}")

    def _check_and_restart(self) -> None:
        sim = self.sim
        for message in self.invariant.check(sim):
            sim.violation(f"{self.invariant.name}: {message}")
        for node in sim.nodes.values():
            if node.alive and node.replicas is not None \
                    and node.replicas.log_manager.offline_dirs:
                sim.kill(node, "restart with its failed disk back:")
                sim.schedule(sim.config.session_timeout_ms + 1, lambda n=node: sim.restart(n))

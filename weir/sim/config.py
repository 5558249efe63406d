"""The knobs of one simulated run (:class:`SimConfig`) and the data path's defaults
(:func:`data_config`), below every other module of the simulation."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["SimConfig", "data_config"]


@dataclass(frozen=True)
class SimConfig:
    """Knobs of one run (times in simulated milliseconds)."""

    brokers: int = 4
    topics: int = 3
    partitions: int = 4
    replication: int = 3
    fault_ms: int = 6000
    settle_ms: int = 4000
    session_timeout_ms: int = 150
    fault_every_ms: tuple[int, int] = (80, 400)
    isr_tick_ms: int = 40
    rebalance_interval_s: int = 1  # leader.imbalance.check.interval.seconds
    controller_socket_timeout_ms: int = 3000  # controller.socket.timeout.ms
    converge_ms: int = 6000  # after settle_ms: how long convergence may still take
    max_steps: int = 2_000_000
    reassignments: bool = True  # inject reassignments (an ISR change can then complete one)
    # -- the data path (weir.sim.data); off: the controller-only simulation -----------------
    data: bool = False
    min_insync_replicas: int = 2
    power_loss_ratio: float = 0.5  # of broker kills, those that also lose unflushed bytes
    flush_every_ms: tuple[int, int] = (40, 250)  # OS writeback + checkpoint files
    data_drop_ratio: float = 0.01  # data-path messages lost outright
    fetch_timeout_ms: int = 150
    fetch_backoff_ms: int = 40
    data_duplicate_ratio: float = 0.01  # fetcher requests delivered twice
    data_reorder_ratio: float = 0.02  # data-path messages overtaking earlier ones on a link
    fetch_max_wait_ms: int = 20  # replica.fetch.wait.max.ms: the fetch purgatory's long poll
    fetch_max_bytes: int = 400
    produce_every_ms: tuple[int, int] = (2, 10)
    produce_timeout_ms: int = 600
    replica_lag_time_max_ms: int = 300
    data_dir: str | None = None  # where the runs' log directories go (default: a temp dir)
    # -- disk errors (weir.sim.disk; with data): log dirs per broker, and the faults ---------
    log_dirs: int = 1
    disk_faults: bool = False
    disk_fault_every_ms: tuple[int, int] = (300, 1200)
    groups: bool = False  # consumer groups on the data path (weir.sim.groups)
    # idempotent producers retrying batches across leader changes (weir.sim.idempotent)
    idempotent_producers: bool = False
    # transactional producers and the transaction coordinators (weir.sim.txn)
    transactions: bool = False


def data_config(**overrides: Any) -> SimConfig:
    """The configuration of data-path runs: a smaller cluster, real logs, producers."""
    base = SimConfig(data=True, topics=2, partitions=2, fault_ms=3000, settle_ms=3000,
                     fault_every_ms=(30, 150), flush_every_ms=(100, 800))
    return dataclasses.replace(base, **overrides)

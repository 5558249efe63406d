"""The broker process (Kafka's KafkaServer): builds the broker's parts, wires them together,
and starts and stops them in order.  What each part does lives in its own module (see
weir/server/README.md): registration (weir.server.registration), controlled shutdown
(weir.server.controlled_shutdown), the periodic jobs (weir.server.scheduler), topic configs
(weir.server.topic_configs), config change notifications (weir.server.config_changes) and
signals (weir.server.signals).

Startup follows Kafka's order: ZooKeeper session → log recovery → listener bound →
registration in ``/brokers/ids`` (the broker epoch) → controller election.  SIGTERM or SIGINT
shuts down cleanly: stop serving, checkpoint high watermarks and recovery points, write the
clean-shutdown marker, close the session.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from typing import Any

from weir.config import BrokerConfig
from weir.coordination.zk import ZkClient
from weir.server import event_loop, gc_tuning, gil_tuning, listeners, malloc_tuning, signals
from weir.server.broker_core import BrokerCore
from weir.server.metrics import MetricsServer, MetricsSource, broker_state
from weir.server.network import ListenerBindError
from weir.server.scheduler import Scheduler
from weir.storage import meta_properties
from weir.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from weir.storage.dir_lock import LogDirLockedError

log = logging.getLogger(__name__)

def _process_age_s() -> float:
    """Seconds since this process started (``/proc/self/stat``'s start time; CPU time, a
    lower bound, where there is no ``/proc``)."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            started_ticks = int(stat.read().rpartition(")")[2].split()[19])
            since_boot_s = float(uptime.read().split()[0])
        return max(0.0, since_boot_s - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.process_time()


_PROCESS_START = time.perf_counter() - _process_age_s()
"""``perf_counter`` at the process's start: the interpreter and the imports show in the
start-up line as "process start"."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    """The broker process's shell: the ZooKeeper session, the listeners, the periodic jobs
    and the order of start and stop around one :class:`~weir.server.broker_core.BrokerCore`
    (its parts, built whole)."""

    def __init__(self, config: BrokerConfig) -> None:
        zk = ZkClient(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.get("zookeeper.connection.timeout.ms")
            or config.zookeeper_session_timeout_ms,
        )
        zk.inter_broker_listener = config.inter_broker_listener_name
        self.core = core = BrokerCore(config, zk, now_ms=_now_ms, halt=lambda: halt(1),
                                      socket_servers=lambda: self.socket_servers)
        self.broker_id: int = core.broker_id
        # The parts, by name (read-only aliases of the core's).
        self.zk = zk
        self.inter_broker_security = core.inter_broker_security
        self.scram_credentials = core.scram_credentials
        self.metadata = core.metadata
        self.log_manager = core.log_manager
        self.topic_configs = core.topic_configs
        self.log_cleaner = core.log_cleaner
        self.replica_manager = core.replica_manager
        self.fetch_sessions = core.fetch_sessions
        self.producer_ids = core.producer_ids
        self.group_coordinator = core.group_coordinator
        self.txn_coordinator = core.txn_coordinator
        self.txn_verifier = core.txn_verifier
        self.log_dir_mover = core.log_dir_mover
        self.tables = core.tables
        self.authorizer = core.authorizer
        self.dynamic_configs = core.dynamic_configs
        self.config_changes = core.config_changes
        self.registration = core.registration
        self.controlled_shutdown = core.controlled_shutdown
        self.services = core.services
        self.metrics_server: MetricsServer | None = None  # when metrics.http.port is set
        self.scheduler = Scheduler()
        self.socket_servers = listeners.socket_servers(self.services, config)  # per listener
        self.socket_server = self.socket_servers[0]
        self._stopping = asyncio.Event()

    @property
    def config(self) -> BrokerConfig:
        """The effective configuration (dynamic configs replace it)."""
        return self.core.config

    @property
    def broker_epoch(self) -> int:
        return self.registration.broker_epoch

    @property
    def controller(self) -> Any:
        """The ControllerService once started (None before)."""
        return self.services.controller

    @property
    def cluster_id(self) -> str:
        return self.services.cluster_id

    def metrics_source(self) -> MetricsSource:
        """The read-only view /metrics collects from."""
        return MetricsSource(
            replica_manager=self.replica_manager, log_manager=self.log_manager,
            min_isr=self.topic_configs.min_isr,
            state=lambda: broker_state(self._stopping.is_set(), self.registration.broker_epoch),
            controller=lambda: self.controller, fetch_sessions=self.fetch_sessions,
            log_cleaner=self.log_cleaner)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, *, freeze_heap: bool = False) -> None:
        """Start every part and register.  ``freeze_heap`` (a broker process, not a test
        running brokers in its own process): the heap is frozen out of the cyclic GC once
        the logs are loaded (:func:`gc_tuning.freeze_startup_heap`)."""
        loop = asyncio.get_running_loop()
        steps: list[tuple[str, float]] = [("process start", time.perf_counter())]
        # Kafka's LogManager.lockLogDirs: no other process may be using these dirs; before
        # ZooKeeper, meta.properties or any log is touched (LogDirLockedError otherwise).
        await asyncio.to_thread(self.log_manager.lock_dirs)
        await asyncio.to_thread(self.zk.start)
        await asyncio.to_thread(self.zk.ensure_paths)
        self.services.cluster_id = await asyncio.to_thread(
            self.zk.get_or_create_cluster_id)
        # Kafka's BrokerMetadataCheckpoint: the log dirs must be this broker's, of this
        # cluster, before anything in them is loaded (weir.storage.meta_properties).
        meta_properties.check(
            await asyncio.to_thread(meta_properties.read_all, self.log_manager.log_dirs),
            self.broker_id, self.services.cluster_id)
        steps.append(("ZooKeeper", time.perf_counter()))
        await self.dynamic_configs.reload()  # before recovery, as Kafka's DynamicBrokerConfig
        steps.append(("dynamic configs", time.perf_counter()))
        if freeze_heap:  # the imports' heap: collected and frozen while it is small
            gc_tuning.freeze_startup_heap()
        with gc_tuning.paused():  # only long-lived objects: no collections (gc_tuning)
            self.log_manager.startup(_now_ms())
            if freeze_heap:  # the loaded logs out of every later full collection
                gc_tuning.freeze_built_while_paused()
        await asyncio.to_thread(meta_properties.write_missing, self.log_manager.online_dirs,
                                self.broker_id, self.services.cluster_id)
        self.log_cleaner.start()
        steps.append(("logs", time.perf_counter()))
        if self.authorizer is not None:  # ACLs loaded before the first request is served
            await self.authorizer.start()
        for server in self.socket_servers:
            await server.start()
        await self.registration.register()
        steps.append(("registration", time.perf_counter()))
        log.info("broker %d registered %.2f s after its start (%s)", self.broker_id,
                 steps[-1][1] - _PROCESS_START, ", ".join(
                     f"{name} {end - begin:.2f} s" for (_, begin), (name, end)
                     in zip([("", _PROCESS_START), *steps], steps, strict=False)))
        self.zk.add_session_listener(
            lambda state: loop.call_soon_threadsafe(self.registration.on_session_state, state))
        self.config_changes.start()
        await self.core.start_controller()
        self.group_coordinator.start()  # the group coordinator's clock
        self.txn_coordinator.start()  # transaction timeouts and id expiry
        self._schedule_jobs()
        self.scheduler.start()
        self.tables.start()
        cfg = self.config
        if cfg.metrics_http_port >= 0:  # Prometheus /metrics (weir.server.metrics)
            self.metrics_server = MetricsServer.for_broker(
                self.metrics_source(), self.broker_id, cfg.listener_host, cfg.metrics_http_port,
                collectors=(self.tables,))
            await self.metrics_server.start()
        log.info("broker %d started (epoch %d) on %s:%d", self.broker_id, self.broker_epoch,
                 cfg.advertised_host, self.socket_server.port)

    def _schedule_jobs(self) -> None:
        """The periodic jobs (Kafka's KafkaScheduler tasks of ReplicaManager and LogManager)."""
        cfg, rm, lm = self.config, self.replica_manager, self.log_manager
        jobs = self.scheduler
        # The checkpoints' offsets are read on the loop, their files written and fsynced on
        # the scheduler's I/O thread (an fsync on the loop stalled every connection).
        jobs.schedule("highwatermark-checkpoint",
                      cfg.replica_high_watermark_checkpoint_interval_ms,
                      lambda: jobs.write_each(lm.checkpoint_writes(REPLICATION_OFFSET_CHECKPOINT),
                                              lm.mark_dir_failed))
        jobs.schedule("recovery-point-checkpoint", cfg.log_flush_offset_checkpoint_interval_ms,
                      lambda: jobs.write_each(lm.checkpoint_writes(RECOVERY_POINT_CHECKPOINT),
                                              lm.mark_dir_failed))
        jobs.schedule("isr-expiration", max(cfg.replica_lag_time_max_ms // 2, 100),
                      rm.maybe_shrink_isr)
        jobs.schedule("kafka-log-retention", cfg.log_retention_check_interval_ms,
                      lambda: lm.run_retention(_now_ms()))
        jobs.schedule("kafka-log-flusher",
                      min(cfg.get("log.flush.scheduler.interval.ms") or 1000, 1000),
                      lambda: lm.flush_due(_now_ms()))
        expiration_ms = cfg.get("producer.id.expiration.ms")
        jobs.schedule("producer-id-expiration",  # producer.id.expiration.ms (KIP-98 state)
                      cfg.get("producer.id.expiration.check.interval.ms"),
                      lambda: lm.remove_expired_producers(_now_ms(), expiration_ms))

    async def run_until_stopped(self) -> None:
        await self._stopping.wait()

    def request_stop(self) -> None:
        self.registration.stopping()
        self._stopping.set()

    async def stop(self) -> None:
        log.info("broker %d shutting down", self.broker_id)
        marks = [("start", time.perf_counter())]
        self.registration.stopping()
        if self.config.controlled_shutdown_enable and self.broker_epoch >= 0:
            await self.controlled_shutdown.run()
        marks.append(("controlled shutdown", time.perf_counter()))
        await self.scheduler.stop()
        await self.registration.stop()
        await self.config_changes.stop()
        await self.core.stop_background()
        if self.controller is not None:
            await self.controller.stop()
        await self.group_coordinator.stop()
        await self.txn_coordinator.stop()
        await self.txn_verifier.close()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        for server in self.socket_servers:
            await server.stop()
        if self.authorizer is not None:
            await self.authorizer.stop()
        marks.append(("services and listeners", time.perf_counter()))
        await self.log_dir_mover.close()
        await self.tables.stop()
        await self.dynamic_configs.stop()  # a cleaner restart in flight
        await self.log_cleaner.stop()
        await self.replica_manager.close()
        marks.append(("replica fetchers", time.perf_counter()))
        # LogManager.shutdown flushes every log, then writes the recovery-point, log-start
        # and high-watermark checkpoints (Kafka: ReplicaManager.shutdown's high-watermark
        # checkpoint, then LogManager.shutdown's); one high-watermark write, not two (a
        # 10,000-line file each).
        self.log_manager.shutdown()
        marks.append(("logs", time.perf_counter()))
        await asyncio.to_thread(self.zk.stop)
        marks.append(("ZooKeeper", time.perf_counter()))
        log.info("broker %d stopped cleanly in %.2f s (%s)", self.broker_id,
                 marks[-1][1] - marks[0][1],
                 ", ".join(f"{name} {(t - marks[i][1]) * 1000:.0f} ms"
                           for i, (name, t) in enumerate(marks[1:])))


def halt(code: int) -> None:
    """Kafka's ``Exit.halt``: end the process now, without shutdown hooks or a controlled
    shutdown (there is nothing left to serve)."""
    logging.shutdown()
    os._exit(code)


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)


async def _main(config: BrokerConfig, *, exit_when_stopped: bool = False) -> int:
    broker = Broker(config)
    signals.install(asyncio.get_running_loop(), broker.request_stop)
    try:
        await broker.start(freeze_heap=True)
    except LogDirLockedError as exc:
        # Another broker process owns these dirs: one line, and nothing to clean up (no
        # log was loaded and nothing was written; a stop here would write checkpoints).
        log.error("broker %d not started: %s", config.broker_id, exc)
        return 1
    except Exception as exc:
        if isinstance(exc, ListenerBindError):  # a one-line reason, no traceback
            log.error("broker %d failed to start: %s", config.broker_id, exc)
        else:
            log.exception("broker %d failed to start", config.broker_id)
        try:
            await broker.stop()
        except Exception:
            log.exception("cleanup after a failed start also failed")
        return 1
    # Full GC collections stall the loop; keep them off the startup heap (see gc_tuning:
    # the imports and the logs were frozen before registering; this walks only what
    # start-up made since).
    gc_tuning.tune_thresholds()
    gc_tuning.log_slow_collections(logging.getLogger("weir.server.gc"))
    log.info("froze %d startup objects out of the cyclic GC", gc_tuning.freeze_startup_heap())
    await broker.run_until_stopped()
    await broker.stop()
    if exit_when_stopped:
        # Everything is durable and ZooKeeper is closed: exit now, as Kafka's Exit.exit,
        # instead of tearing down the event loop, its executor and a heap of 10,000
        # partitions object by object (seconds at that scale, all before the process is
        # seen to exit).
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def run_broker(config: BrokerConfig) -> int:
    """Run one broker until SIGTERM/SIGINT; the exit code of the process (the process
    exits as soon as a clean stop is done)."""
    configure_logging()
    try:
        log.info("thread switch interval: %.2f ms (gil_tuning)", gil_tuning.apply() * 1000)
    except ValueError as exc:
        log.error("broker %d not started: %s", config.broker_id, exc)
        return 1
    if not malloc_tuning.keep_freed_memory():
        log.info("C allocator left with its defaults (no glibc mallopt)")
    log.info("event loop: %s", event_loop.loop_factory()[0])
    return event_loop.run(_main(config, exit_when_stopped=True))

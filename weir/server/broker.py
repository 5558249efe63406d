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
import functools
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from weir.asyncutil import cancel_and_wait
from weir.config import BrokerConfig
from weir.coordination.zk import ZkClient
from weir.coordinator_runtime import ReplicaManagerLog
from weir.groups.coordinator import GroupCoordinator, GroupCoordinatorSettings
from weir.protocol.client import BrokerConnection
from weir.replication.log_dir_failure import handle_log_dir_failure
from weir.replication.log_dir_mover import CopyQuota, LogDirMover
from weir.replication.replica_manager import ReplicaManager, ReplicationSettings
from weir.security.credentials import ScramCredentialStore
from weir.server import admin, event_loop, gc_tuning, gil_tuning, listeners, malloc_tuning, signals
from weir.server.authz import create_authorizer
from weir.server.config_changes import ConfigChangeListener
from weir.server.context import BrokerServices
from weir.server.controlled_shutdown import ControlledShutdown
from weir.server.dynamic_config import DynamicBrokerConfigs
from weir.server.fetch_session import FetchSessionCache
from weir.server.metadata_cache import MetadataCache
from weir.server.metrics import MetricsServer, MetricsSource, broker_state
from weir.server.network import ListenerBindError
from weir.server.producer_ids import ProducerIdManager
from weir.server.reconfigurables import broker_reconfigurables
from weir.server.registration import BrokerRegistration
from weir.server.scheduler import Scheduler
from weir.server.topic_configs import TopicConfigs
from weir.server.txn_verification import TxnVerifier
from weir.storage import meta_properties
from weir.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from weir.storage.dir_lock import LogDirLockedError
from weir.storage.log import LogConfig
from weir.storage.log_cleaner import CleanerConfig, LogCleaner
from weir.storage.log_manager import LogManager
from weir.tables.service import TableService
from weir.transactions.coordinator import (
    TransactionCoordinator,
    TransactionCoordinatorSettings,
)
from weir.transactions.markers import MarkerSender

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
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config  # the effective configuration (dynamic configs replace it)
        self.broker_id: int = config.broker_id
        self.zk = ZkClient(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.get("zookeeper.connection.timeout.ms")
            or config.zookeeper_session_timeout_ms,
        )
        # Listeners and security (weir.server.listeners): the inter-broker client's TLS/SASL,
        # brokers' host/port read from ZooKeeper on the inter-broker listener, SCRAM users.
        self.inter_broker_security = listeners.inter_broker_security(config)
        self.zk.inter_broker_listener = config.inter_broker_listener_name
        self.scram_credentials = ScramCredentialStore(self.zk)
        self.metadata = MetadataCache()
        self.log_manager = LogManager(config.log_dir_paths,
                                      LogConfig.from_config(config))
        # Topic overrides and effective topic configs (weir.server.topic_configs).
        self.topic_configs = TopicConfigs(lambda: self.config, self.zk, self.log_manager)
        self.log_manager.dir_failure_listeners.append(self._on_log_dir_failure)
        # Log compaction (weir.storage.log_cleaner): Kafka's LogCleaner and its threads.
        self.log_cleaner = LogCleaner(self.log_manager, CleanerConfig.from_config(config))
        self.topic_configs.log_cleaner = self.log_cleaner
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.topic_configs.log_config,
            self.topic_configs.min_isr,
            ReplicationSettings.from_config(config, self.inter_broker_security),
        )
        # A caught-up follower outside the ISR holds the high watermark back only while its
        # broker is alive (Kafka's isReplicaIsrEligible in ZooKeeper mode).
        self.replica_manager.broker_alive = lambda broker_id: broker_id in self.metadata.brokers
        # Replication throttles (reassignment): static rates now, dynamic ones from
        # /config/brokers when they change.
        self.replica_manager.throttles.configure(
            config.leader_replication_throttled_rate, config.follower_replication_throttled_rate,
            self.topic_configs.topic_config)
        # Incremental fetch sessions (KIP-227), Kafka's FetchManager.
        self.fetch_sessions = FetchSessionCache(
            max_entries=config.get("max.incremental.fetch.session.cache.slots"))
        self.producer_ids = ProducerIdManager(self.zk, self.broker_id)
        # The coordinators of __consumer_offsets (Kafka's GroupCoordinator) and of
        # __transaction_state (KIP-98) follow leadership of their topic's partitions.
        coordinator_log = ReplicaManagerLog(self.replica_manager)
        self.group_coordinator = GroupCoordinator(
            GroupCoordinatorSettings.from_config(config), self.metadata, coordinator_log,
            create_offsets_topic=lambda: admin.create_offsets_topic(self.services))
        self.replica_manager.leadership_listeners.append(self.group_coordinator.on_leadership)
        self.txn_coordinator = TransactionCoordinator(
            TransactionCoordinatorSettings.from_config(config), self.metadata, coordinator_log,
            self.producer_ids,
            MarkerSender(self.broker_id, self.metadata, config.inter_broker_listener_name,
                         self.inter_broker_security),
            create_topic=lambda: admin.create_transaction_state_topic(self.services))
        self.replica_manager.leadership_listeners.append(self.txn_coordinator.on_leadership)
        # KIP-890: partition leaders verify transactional appends with the coordinator.
        self.txn_verifier = TxnVerifier(
            self.broker_id, self.metadata, config.inter_broker_listener_name,
            self.txn_coordinator.partition_for, self.inter_broker_security)
        # JBOD (KIP-113): replica moves between this broker's log dirs; a future log left
        # on disk resumes copying once LeaderAndIsr brings its partition online.
        self.log_dir_mover = LogDirMover(self.replica_manager, self.log_manager, CopyQuota(
            config.get("replica.alter.log.dirs.io.max.bytes.per.second")))
        self.replica_manager.leadership_listeners.append(
            lambda tp, _leader, _epoch: self.log_dir_mover.start(tp))
        # Topic tables (weir.tables, docs/tables.md): each led partition of a topic with
        # weir.iceberg.mode=key_value is appended to its Iceberg table by a worker process.
        self.tables = TableService(self.replica_manager.partitions,
                                   self.topic_configs.topic_config, lambda: self.config)
        self.replica_manager.leadership_listeners.append(self.tables.on_leadership)
        self.metrics_server: MetricsServer | None = None  # when metrics.http.port is set
        # ACL authorizer (weir.server.authz): None unless authorizer.class.name is set.
        self.authorizer = create_authorizer(config, self.zk)
        # Dynamic broker configs (/config/brokers/<id> and <default>): keep self.config at the
        # effective configuration and reconfigure the running parts.
        self.dynamic_configs = DynamicBrokerConfigs(
            self.broker_id, self.zk, lambda: self.config, self._publish_config,
            broker_reconfigurables(
                topic_configs=self.topic_configs, throttles=self.replica_manager.throttles,
                servers=lambda: self.socket_servers,
                alter_log_dirs_quota=self.log_dir_mover.quota, cleaner=self.log_cleaner,
                controller=lambda: self.controller, registration=lambda: self.registration))
        self.config_changes = ConfigChangeListener(
            self.zk, self.dynamic_configs, self.topic_configs, self.scram_credentials)
        self.registration = BrokerRegistration(
            self.zk, self.broker_id, config.zookeeper_session_timeout_ms,
            lambda: listeners.registration(self.config, self.socket_servers, self.broker_id))
        self.controlled_shutdown = ControlledShutdown(
            self.broker_id, broker_epoch=lambda: self.registration.broker_epoch,
            live_brokers=lambda: set(self.metadata.brokers),
            controller_endpoint=self._controller_endpoint,
            max_retries=config.controlled_shutdown_max_retries,
            retry_backoff_ms=config.controlled_shutdown_retry_backoff_ms,
            socket_timeout_ms=config.controller_socket_timeout_ms,
            security=self.inter_broker_security)
        self.scheduler = Scheduler()
        self.services = BrokerServices(
            broker_id=self.broker_id, config_source=lambda: self.config, metadata=self.metadata,
            replica_manager=self.replica_manager, log_manager=self.log_manager,
            log_dir_mover=self.log_dir_mover, topic_configs=self.topic_configs,
            dynamic_configs=self.dynamic_configs, group_coordinator=self.group_coordinator,
            txn_coordinator=self.txn_coordinator, txn_verifier=self.txn_verifier,
            producer_ids=self.producer_ids, fetch_sessions=self.fetch_sessions,
            scram_credentials=self.scram_credentials, authorizer=self.authorizer,
            registration=self.registration, zk=self.zk)
        self.socket_servers = listeners.socket_servers(self.services, config)  # per listener
        self.socket_server = self.socket_servers[0]
        self._stopping = asyncio.Event()
        self._background: set[asyncio.Task] = set()  # log dir failure notifications

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
        self.replica_manager.start_isr_changes(lambda: self.registration.broker_epoch,
                                               self._controller_endpoint)
        self.replica_manager.alter_partition.security = self.inter_broker_security
        self.zk.add_session_listener(
            lambda state: loop.call_soon_threadsafe(self.registration.on_session_state, state))
        self.config_changes.start()
        from weir.controller.channel import ControllerChannelManager
        from weir.controller.service import ControllerService

        self.services.controller = ControllerService(
            self.broker_id, self.zk, self.config,
            channel_factory=functools.partial(
                ControllerChannelManager,
                connect=functools.partial(BrokerConnection,
                                          security=self.inter_broker_security)))
        await self.controller.start()
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

    def _controller_endpoint(self) -> tuple[int, str, int] | None:
        controller = self.metadata.brokers.get(self.metadata.controller_id)
        if controller is None:
            return None
        return controller.id, controller.host, controller.port

    async def run_until_stopped(self) -> None:
        await self._stopping.wait()

    def request_stop(self) -> None:
        self.registration.stopping()
        self._stopping.set()

    def _publish_config(self, config: BrokerConfig) -> None:
        """The effective configuration after a dynamic config change."""
        self.config = config

    def _on_log_dir_failure(self, log_dir: Path, reason: str) -> None:
        """Kafka's ``ReplicaManager.handleLogDirFailure`` (weir.replication.log_dir_failure):
        JBOD (KIP-112) takes the dir's replicas offline and tells the controller; a broker
        with no log dir left halts."""
        handle_log_dir_failure(self.replica_manager, self.log_dir_mover, log_dir, reason,
                               notify_controller=self._notify_log_dir_event,
                               halt=lambda: halt(1))

    def _notify_log_dir_event(self) -> None:
        task = asyncio.get_running_loop().create_task(self._propagate_log_dir_event())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _propagate_log_dir_event(self) -> None:
        """``/log_dir_event_notification/log_dir_event_<seq>`` for the controller (Kafka's
        ``KafkaZkClient.propagateLogDirEvent``)."""
        try:
            path = await asyncio.to_thread(self.zk.propagate_log_dir_event, self.broker_id)
            log.info("log dir failure notification %s written", path)
        except Exception:
            log.exception("could not write the log dir failure notification")

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
        await cancel_and_wait(*self._background)
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

"""The broker process: wires ZooKeeper, storage, the replica manager, the controller and the
socket server together, and runs the periodic tasks (checkpoints, retention, flush).

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
import signal
import sys
import time
from pathlib import Path
from typing import Any

from weir.asyncutil import cancel_and_wait
from weir.config import BrokerConfig, topic_config
from weir.coordination import paths
from weir.coordination.errors import BrokerIdInUseError
from weir.coordination.zk import ZkClient
from weir.protocol.client import BrokerConnection
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import ControlledShutdownRequest
from weir.replication.log_dir_failure import take_dir_offline
from weir.replication.log_dir_mover import CopyQuota, LogDirMover
from weir.replication.replica_manager import ReplicaManager, ReplicationSettings
from weir.security.credentials import ScramCredentialStore
from weir.server import admin, gc_tuning, listeners
from weir.server.authz import create_authorizer
from weir.server.dynamic_config import DynamicBrokerConfigs
from weir.server.fetch_session import FetchSessionCache
from weir.server.metadata_cache import MetadataCache
from weir.server.producer_ids import ProducerIdManager
from weir.storage.log import LogConfig
from weir.storage.log_cleaner import CleanerConfig, LogCleaner
from weir.storage.log_manager import LogManager

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
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
        self.topic_overrides: dict[str, dict[str, str]] = {}
        self._effective_configs: dict[str, dict[str, Any]] = {}
        self.log_manager = LogManager(
            config.log_dir_paths, LogConfig.from_dict(topic_config(config, {}))
        )
        self.log_manager.dir_failure_listeners.append(self._on_log_dir_failure)
        # Log compaction (weir.storage.log_cleaner): Kafka's LogCleaner and its threads.
        self.log_cleaner = LogCleaner(self.log_manager, CleanerConfig.from_config(config))
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.topic_log_config, self.topic_min_isr,
            ReplicationSettings.from_config(config, self.inter_broker_security),
        )
        # A caught-up follower outside the ISR holds the high watermark back only while its
        # broker is alive (Kafka's isReplicaIsrEligible in ZooKeeper mode).
        self.replica_manager.broker_alive = lambda broker_id: broker_id in self.metadata.brokers
        # Replication throttles (reassignment): static rates now, dynamic ones from
        # /config/brokers when they change.
        self.replica_manager.throttles.configure(
            config.leader_replication_throttled_rate, config.follower_replication_throttled_rate,
            self.topic_config)
        # Incremental fetch sessions (KIP-227), Kafka's FetchManager.
        self.fetch_sessions = FetchSessionCache(
            max_entries=config.get("max.incremental.fetch.session.cache.slots"))
        self.socket_servers = listeners.socket_servers(self, config)  # one per listener
        self.socket_server = self.socket_servers[0]
        self.producer_ids = ProducerIdManager(self.zk, self.broker_id)
        self.controller: Any = None
        # Group coordinator (Kafka's GroupCoordinator): follows leadership of __consumer_offsets partitions.
        from weir.groups.coordinator import GroupCoordinator

        self.group_coordinator = GroupCoordinator(
            self, create_offsets_topic=lambda: admin.create_offsets_topic(self))
        self.replica_manager.leadership_listeners.append(self.group_coordinator.on_leadership)
        # Transaction coordinator (KIP-98): follows leadership of __transaction_state.
        from weir.transactions.coordinator import TransactionCoordinator

        self.txn_coordinator = TransactionCoordinator(
            self, create_topic=lambda: admin.create_transaction_state_topic(self))
        self.replica_manager.leadership_listeners.append(self.txn_coordinator.on_leadership)
        # KIP-890: partition leaders verify transactional appends with the coordinator.
        from weir.server.txn_verification import TxnVerifier

        self.txn_verifier = TxnVerifier(self)
        # JBOD (KIP-113): replica moves between this broker's log dirs; a future log left
        # on disk resumes copying once LeaderAndIsr brings its partition online.
        self.log_dir_mover = LogDirMover(self.replica_manager, self.log_manager, CopyQuota(
            config.get("replica.alter.log.dirs.io.max.bytes.per.second")))
        self.replica_manager.leadership_listeners.append(
            lambda tp, _leader, _epoch: self.log_dir_mover.start(tp))
        self.metrics_server: Any = None  # weir.server.metrics.MetricsServer when enabled
        # ACL authorizer (weir.server.authz): None unless authorizer.class.name is set.
        self.authorizer = create_authorizer(config, self.zk)
        # Dynamic broker configs (/config/brokers/<id> and <default>): keep self.config at the
        # effective configuration and reconfigure the running parts.
        self.dynamic_configs = DynamicBrokerConfigs(self)
        self.cluster_id: str = ""
        self.broker_epoch: int = -1
        self._registered = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._background: set[asyncio.Future[None]] = set()  # re-registrations in flight
        self._stopping = asyncio.Event()
        self._session_lost = False

    # -- topic configuration -----------------------------------------------------------

    def topic_config(self, topic: str) -> dict[str, Any]:
        """The effective typed config of ``topic`` (cached: the produce path reads it)."""
        cached = self._effective_configs.get(topic)
        if cached is None:
            cached = topic_config(self.config, self.topic_overrides.get(topic, {}))
            self._effective_configs[topic] = cached
        return cached

    def set_topic_overrides(self, topic: str, overrides: dict[str, str] | None) -> None:
        """Record a topic's overrides from ZooKeeper (None: the topic is gone)."""
        self._effective_configs.pop(topic, None)
        if overrides is None:
            self.topic_overrides.pop(topic, None)
        else:
            self.topic_overrides[topic] = overrides

    def topic_log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_dict(self.topic_config(topic))

    def topic_min_isr(self, topic: str) -> int:
        return int(self.topic_config(topic)["min.insync.replicas"])

    async def load_topic_configs(self, topics: set[str]) -> None:
        missing = [t for t in topics if t not in self.topic_overrides]
        for topic in missing:
            self.set_topic_overrides(
                topic, await asyncio.to_thread(self.zk.get_topic_config, topic))

    def log_defaults_changed(self) -> None:
        """The broker defaults of topic configs changed (dynamic broker configs): topics
        without their own override take the new values, existing logs included (Kafka's
        DynamicLogConfig.reconfigure)."""
        self._effective_configs.clear()
        self.log_manager.default_config = LogConfig.from_dict(topic_config(self.config, {}))
        for topic in sorted({tp.topic for tp in self.log_manager.all_logs()}):
            self.log_manager.update_config(topic, self.topic_log_config(topic))

    async def _reload_dynamic_configs(self) -> None:
        """A config change notification: re-read the dynamic broker configs
        (``/config/brokers/<default>`` and ``/config/brokers/<id>``) and topic overrides."""
        await self.dynamic_configs.reload()
        for topic in list(self.topic_overrides):
            overrides = await asyncio.to_thread(self.zk.get_topic_config, topic)
            if overrides != self.topic_overrides.get(topic):
                self.set_topic_overrides(topic, overrides)
                self.log_manager.update_config(topic, self.topic_log_config(topic))
                self.log_cleaner.wake()  # a new cleanup.policy takes effect now
                log.info("topic %s config updated: %s", topic, overrides)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.zk.start)
        await asyncio.to_thread(self.zk.ensure_paths)
        self.cluster_id = await asyncio.to_thread(self.zk.get_or_create_cluster_id)
        await self.dynamic_configs.reload()  # before recovery, as Kafka's DynamicBrokerConfig
        self.log_manager.startup(_now_ms())
        self.log_cleaner.start()
        if self.authorizer is not None:  # ACLs loaded before the first request is served
            await self.authorizer.start()
        for server in self.socket_servers:
            await server.start()
        await self._register()
        self.replica_manager.start_isr_changes(lambda: self.broker_epoch, self._controller_endpoint)
        self.replica_manager.alter_partition.security = self.inter_broker_security
        self.zk.add_session_listener(
            lambda state: loop.call_soon_threadsafe(self._on_session_state, state)
        )
        self.zk.watch_children(
            paths.CONFIG_CHANGES if hasattr(paths, "CONFIG_CHANGES") else "/config/changes",
            lambda _children: loop.call_soon_threadsafe(
                lambda: (self.scram_credentials.invalidate(),  # users/<user> changes too
                         asyncio.ensure_future(self._reload_dynamic_configs()))
            ),
        )
        from weir.controller.channel import ControllerChannelManager
        from weir.controller.service import ControllerService

        self.controller = ControllerService(
            self.broker_id, self.zk, self.config,
            channel_factory=functools.partial(
                ControllerChannelManager,
                connect=functools.partial(BrokerConnection,
                                          security=self.inter_broker_security)))
        await self.controller.start()
        self.group_coordinator.start()  # the group coordinator's clock
        self.txn_coordinator.start()  # transaction timeouts and id expiry
        cfg = self.config
        self._tasks = [
            asyncio.create_task(self._every(
                cfg.replica_high_watermark_checkpoint_interval_ms,
                self.replica_manager.checkpoint_high_watermarks)),
            asyncio.create_task(self._every(
                cfg.log_flush_offset_checkpoint_interval_ms,
                self.log_manager.checkpoint_recovery_points)),
            asyncio.create_task(self._every(
                max(cfg.replica_lag_time_max_ms // 2, 100),
                self.replica_manager.maybe_shrink_isr)),
            asyncio.create_task(self._every(
                cfg.log_retention_check_interval_ms,
                lambda: self.log_manager.run_retention(_now_ms()))),
            asyncio.create_task(self._every(
                min(cfg.get("log.flush.scheduler.interval.ms") or 1000, 1000),
                lambda: self.log_manager.flush_due(_now_ms()))),
            asyncio.create_task(self._every(  # producer.id.expiration.ms (KIP-98 state)
                cfg.get("producer.id.expiration.check.interval.ms"),
                lambda: self.log_manager.remove_expired_producers(
                    _now_ms(), cfg.get("producer.id.expiration.ms")))),
        ]
        if cfg.metrics_http_port >= 0:  # Prometheus /metrics (weir.server.metrics)
            from weir.server.metrics import MetricsServer

            self.metrics_server = MetricsServer.for_broker(self, cfg.metrics_http_port)
            await self.metrics_server.start()
        log.info("broker %d started (epoch %d) on %s:%d", self.broker_id, self.broker_epoch,
                 cfg.advertised_host, self.socket_server.port)

    async def _register(self) -> None:
        info = listeners.registration(self.config, self.socket_servers, self.broker_id)
        # After a crash the previous incarnation's ephemeral node lives until its session
        # expires; wait for that rather than failing the start.
        deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000 * 1.5 + 5
        while True:
            try:
                self.broker_epoch = await asyncio.to_thread(self.zk.register_broker, info)
                self._registered.set()
                return
            except BrokerIdInUseError:
                if time.monotonic() > deadline:
                    raise
                log.info("broker id %d is still registered by an expiring session; retrying",
                         self.broker_id)
                await asyncio.sleep(0.5)

    async def wait_registered(self) -> bool:
        """Wait until this broker has registered (has its broker epoch); False if it did not
        within the time registration may take (an old session expiring, see _register).

        Kafka's KafkaServer processes no request before registration; Weir's listener is
        bound earlier, so controller requests wait here and are then checked against the
        broker epoch (handlers/_controller_requests.py)."""
        if self._registered.is_set():
            return True
        limit_s = self.config.zookeeper_session_timeout_ms / 1000 * 1.5 + 5
        try:
            await asyncio.wait_for(self._registered.wait(), limit_s)
        except TimeoutError:
            return False
        return True

    def _controller_endpoint(self) -> tuple[int, str, int] | None:
        controller = self.metadata.brokers.get(self.metadata.controller_id)
        if controller is None:
            return None
        return controller.id, controller.host, controller.port

    def _on_session_state(self, state: str) -> None:
        if state == "LOST":
            self._session_lost = True
            log.warning("ZooKeeper session lost; will re-register when reconnected")
        elif state == "CONNECTED" and self._session_lost and not self._stopping.is_set():
            self._session_lost = False
            task = asyncio.ensure_future(self._register())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _every(self, interval_ms: int, fn: Any) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 10) / 1000)
            try:
                fn()
            except Exception:
                log.exception("periodic task %s failed", getattr(fn, "__name__", fn))

    async def run_until_stopped(self) -> None:
        await self._stopping.wait()

    def request_stop(self) -> None:
        self._stopping.set()

    def _on_log_dir_failure(self, log_dir: Path, reason: str) -> None:
        """Kafka's ``ReplicaManager.handleLogDirFailure``: a broker none of whose log dirs is
        left online halts, so that its ZooKeeper session ends and the controller elects new
        leaders; leading on from a failed disk would stall its partitions for good."""
        if self.log_manager.online_dirs:
            log.error("log dir %s failed (%s); its replicas are offline, %d dirs remain",
                      log_dir, reason, len(self.log_manager.online_dirs))
            # JBOD (KIP-112): stop serving its replicas, then tell the controller.
            take_dir_offline(self.replica_manager, self.log_dir_mover, log_dir)
            asyncio.get_running_loop().create_task(self._propagate_log_dir_event())
            return
        log.critical("halting broker %d: all log dirs %s have failed (last: %s: %s)",
                     self.broker_id, [str(d) for d in self.log_manager.log_dirs], log_dir,
                     reason)
        halt(1)

    async def _propagate_log_dir_event(self) -> None:
        """``/log_dir_event_notification/log_dir_event_<seq>`` for the controller (Kafka's
        ``KafkaZkClient.propagateLogDirEvent``)."""
        try:
            path = await asyncio.to_thread(self.zk.propagate_log_dir_event, self.broker_id)
            log.info("log dir failure notification %s written", path)
        except Exception:
            log.exception("could not write the log dir failure notification")

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move leadership off this broker first (seed 004's
        shutdownBroker): retried ``controlled.shutdown.max.retries`` times, every
        ``controlled.shutdown.retry.backoff.ms``; True once no partition is left here."""
        cfg = self.config
        attempts = cfg.controlled_shutdown_max_retries + 1
        for attempt in range(1, attempts + 1):
            if not set(self.metadata.brokers) - {self.broker_id}:
                log.info("broker %d is the last one alive: no leader can move; skipping "
                         "controlled shutdown", self.broker_id)
                return True
            remaining = await self._request_controlled_shutdown()
            if remaining is not None and not remaining:
                log.info("controlled shutdown of broker %d succeeded", self.broker_id)
                return True
            log.info("controlled shutdown of broker %d: attempt %d/%d, %s", self.broker_id,
                     attempt, attempts, "controller unreachable" if remaining is None
                     else f"{len(remaining)} partitions still led here")
            if attempt < attempts:
                await asyncio.sleep(cfg.controlled_shutdown_retry_backoff_ms / 1000)
        log.warning("controlled shutdown of broker %d did not complete; shutting down anyway",
                    self.broker_id)
        return False

    async def _request_controlled_shutdown(self) -> list | None:
        """The partitions the controller says this broker still leads (None: no answer)."""
        target = self._controller_endpoint()
        if target is None:
            return None
        conn = BrokerConnection(target[1], target[2], client_id=f"broker-{self.broker_id}",
                                security=self.inter_broker_security)
        try:
            await conn.connect(timeout_s=10)
            response = await conn.request(
                ControlledShutdownRequest(broker_id=self.broker_id,
                                          broker_epoch=self.broker_epoch),
                timeout_s=self.config.controller_socket_timeout_ms / 1000)
        except (ConnectionError, OSError, TimeoutError) as exc:
            log.info("controlled shutdown request failed: %s", exc)
            return None
        finally:
            await conn.close()
        if response.error_code != ErrorCode.none:
            log.info("controlled shutdown refused: %s", response.error_code.name)
            return None
        return list(response.remaining_partitions)

    async def stop(self) -> None:
        log.info("broker %d shutting down", self.broker_id)
        if self.config.controlled_shutdown_enable and self.broker_epoch >= 0:
            await self.controlled_shutdown()
        await cancel_and_wait(*self._tasks, *self._background)
        if self.controller is not None:
            await self.controller.stop()
        await self.group_coordinator.stop()  # the group coordinator
        await self.txn_coordinator.stop()
        await self.txn_verifier.close()
        if self.metrics_server is not None:  # Prometheus /metrics (weir.server.metrics)
            await self.metrics_server.stop()
        for server in self.socket_servers:
            await server.stop()
        if self.authorizer is not None:
            await self.authorizer.stop()
        await self.log_dir_mover.close()
        await self.log_cleaner.stop()
        await self.replica_manager.close()
        self.replica_manager.checkpoint_high_watermarks()
        self.log_manager.shutdown()
        await asyncio.to_thread(self.zk.stop)
        log.info("broker %d stopped cleanly", self.broker_id)


def halt(code: int) -> None:
    """Kafka's ``Exit.halt``: end the process now, without shutdown hooks or a controlled
    shutdown (there is nothing left to serve)."""
    logging.shutdown()
    os._exit(code)


def dump_tasks() -> None:
    """SIGUSR1: log the stack of every asyncio task (to diagnose a stuck broker)."""
    import io

    for task in asyncio.all_tasks():
        out = io.StringIO()
        task.print_stack(file=out)
        log.warning("task %s:\n%s", task.get_name(), out.getvalue())


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)


async def _main(config: BrokerConfig, *, exit_when_stopped: bool = False) -> int:
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_stop)
    loop.add_signal_handler(signal.SIGUSR1, dump_tasks)
    try:
        await broker.start()
    except Exception:
        log.exception("broker %d failed to start", config.broker_id)
        try:
            await broker.stop()
        except Exception:
            log.exception("cleanup after a failed start also failed")
        return 1
    # Full GC collections stall the loop; keep them off the startup heap (see gc_tuning).
    gc_tuning.tune_thresholds()
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
    return asyncio.run(_main(config, exit_when_stopped=True))

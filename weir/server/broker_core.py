"""The broker's parts, built whole from what the world gives them (Kafka's KafkaServer
constructor and its ``startup`` wiring, without the sockets).

:class:`BrokerCore` owns the metadata cache, the log manager, the replica manager with its
AlterPartitionManager and fetchers, the coordinators, the request handlers' services and
the :class:`~weir.server.network.Dispatcher` that runs them.  Everything that touches the
outside world comes in through its constructor, so the same parts run in a broker process
(:class:`weir.server.broker.Broker`, the asyncio and socket shell) and in the deterministic
simulation (:mod:`weir.sim.node`):

* ``zk``: the ZooKeeper client (:class:`~weir.coordination.zk.ZkClient` over kazoo);
* ``now_ms``: the clock of the replica manager, its fetchers and the controller;
* ``connect``: ``(host, port) -> connection`` to another broker (the controller's
  channels, AlterPartition to the controller, the transaction coordinator's markers and
  KIP-890 verification; :class:`BrokerConnection` over TCP);
* ``run_blocking``: how blocking ZooKeeper work leaves the event loop
  (``asyncio.to_thread``);
* ``endpoint_factory``: how a fetcher reaches its leader (default: over ``connect``'s
  network, :class:`~weir.replication.leader_endpoint.LeaderEndPoint`);
* ``deferred``: the log manager's storage thread for small files;
* ``halt``: ends the process (Kafka's ``Exit.halt``) when no log dir is left;
* ``channel_factory``: the controller's ``ControllerChannelManager`` (default: over
  ``connect``);
* ``coordinator_clock``: the group and transaction coordinators' clock (default: the
  system's);
* ``group_coordinator``: builds the group coordinator from the core's metadata cache and
  replica manager (default: Kafka's, over ``__consumer_offsets`` through the replica
  manager);
* ``create_transaction_state_topic``: how the transaction coordinator has
  ``__transaction_state`` created (default: the topic administration, ``weir.server.admin``).

Nothing is set on a part after it is built.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError

from weir.config import BrokerConfig
from weir.controller.channel import ControllerChannelManager
from weir.controller.service import ControllerService
from weir.controller.settings import ControllerSettings
from weir.coordination.zk import ZkClient
from weir.coordinator_runtime import SYSTEM_CLOCK, Clock, ReplicaManagerLog
from weir.groups.coordinator import GroupCoordinator, GroupCoordinatorSettings
from weir.protocol.client import BrokerConnection
from weir.protocol.fetch_response import FileRegion
from weir.replication.alter_partition import AlterPartitionManager, IsrResult
from weir.replication.fetcher import EndPointFactory
from weir.replication.log_dir_failure import handle_log_dir_failure
from weir.replication.log_dir_mover import CopyQuota, LogDirMover
from weir.replication.replica_manager import ReplicaManager, ReplicationSettings
from weir.security.credentials import ScramCredentialStore
from weir.server import admin, listeners
from weir.server.authz import create_authorizer
from weir.server.config_changes import ConfigChangeListener
from weir.server.context import BrokerServices
from weir.server.controlled_shutdown import ControlledShutdown
from weir.server.dynamic_config import DynamicBrokerConfigs
from weir.server.fetch_session import FetchSessionCache
from weir.server.metadata_cache import MetadataCache
from weir.server.network import Dispatcher
from weir.server.producer_ids import ProducerIdManager
from weir.server.reconfigurables import broker_reconfigurables
from weir.server.registration import BrokerRegistration
from weir.server.topic_configs import TopicConfigs
from weir.server.txn_verification import TxnVerifier
from weir.storage.deferred_writes import DeferredWrites
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

LOG_DIR_EVENT_RETRY_S = 0.02
"""Between two tries of the log dir failure notification while the session is lost."""

Connect = Callable[[str, int], Any]
RunBlocking = Callable[..., Any]


def wall_ms() -> int:
    return int(time.time() * 1000)


def _chunk_bytes(chunk: bytes | FileRegion) -> bytes:
    if isinstance(chunk, FileRegion):
        with open(chunk.path, "rb") as f:
            return os.pread(f.fileno(), chunk.size, chunk.position)
    return bytes(chunk)


class BrokerCore:
    """One broker's parts; see the module docstring."""

    def __init__(self, config: BrokerConfig, zk: ZkClient, *,
                 now_ms: Callable[[], int] = wall_ms,
                 connect: Connect | None = None,
                 run_blocking: RunBlocking = asyncio.to_thread,
                 endpoint_factory: EndPointFactory | None = None,
                 deferred: DeferredWrites | None = None,
                 halt: Callable[[], None] | None = None,
                 socket_servers: Callable[[], list[Any]] = list,
                 controller_settings: ControllerSettings | None = None,
                 channel_factory: Callable[..., ControllerChannelManager] | None = None,
                 coordinator_clock: Clock = SYSTEM_CLOCK,
                 group_coordinator: Callable[[BrokerCore], GroupCoordinator] | None = None,
                 create_transaction_state_topic: Callable[[], Awaitable[None]] | None = None,
                 ) -> None:
        """``socket_servers``: the shell's listeners (their ports go into the registration
        and are reconfigurable); ``controller_settings``: the controller's (default: from
        ``config``)."""
        self.config = config  # the effective configuration (dynamic configs replace it)
        self.broker_id: int = config.broker_id
        self.zk = zk
        self.now_ms = now_ms
        self.run_blocking = run_blocking
        self._halt = halt
        # Listeners and security (weir.server.listeners): the inter-broker client's TLS/SASL,
        # brokers' host/port read from ZooKeeper on the inter-broker listener, SCRAM users.
        self.inter_broker_security = security = listeners.inter_broker_security(config)
        self.connect: Connect = connect or functools.partial(BrokerConnection,
                                                             security=security)
        self.scram_credentials = ScramCredentialStore(zk)
        self.metadata = MetadataCache()
        self.log_manager = LogManager(config.log_dir_paths, LogConfig.from_config(config),
                                      deferred=deferred)
        # Log compaction (weir.storage.log_cleaner): Kafka's LogCleaner and its threads.
        self.log_cleaner = LogCleaner(self.log_manager, CleanerConfig.from_config(config))
        # Topic overrides and effective topic configs (weir.server.topic_configs).
        self.topic_configs = TopicConfigs(lambda: self.config, zk, self.log_manager,
                                          log_cleaner=self.log_cleaner)
        self.log_manager.dir_failure_listeners.append(self._on_log_dir_failure)
        self.registration = BrokerRegistration(
            zk, self.broker_id, config.zookeeper_session_timeout_ms,
            lambda: listeners.registration(self.config, socket_servers(), self.broker_id))
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.topic_configs.log_config,
            self.topic_configs.min_isr,
            ReplicationSettings.from_config(config, security),
            clock=now_ms, endpoint_factory=endpoint_factory,
            isr_changes=self._alter_partition_manager,
            broker_alive=lambda broker_id: broker_id in self.metadata.brokers)
        # Replication throttles (reassignment): static rates now, dynamic ones from
        # /config/brokers when they change.
        self.replica_manager.throttles.configure(
            config.leader_replication_throttled_rate, config.follower_replication_throttled_rate,
            self.topic_configs.topic_config)
        # Incremental fetch sessions (KIP-227), Kafka's FetchManager.
        self.fetch_sessions = FetchSessionCache(
            max_entries=config.get("max.incremental.fetch.session.cache.slots"))
        self.producer_ids = ProducerIdManager(zk, self.broker_id)
        # The coordinators of __consumer_offsets (Kafka's GroupCoordinator) and of
        # __transaction_state (KIP-98) follow leadership of their topic's partitions.
        coordinator_log = ReplicaManagerLog(self.replica_manager)
        self.group_coordinator = group_coordinator(self) if group_coordinator else (
            GroupCoordinator(
                GroupCoordinatorSettings.from_config(config), self.metadata, coordinator_log,
                clock=coordinator_clock,
                create_offsets_topic=lambda: admin.create_offsets_topic(self.services)))
        # Its markers go to the partition leaders (Kafka's TransactionMarkerChannelManager)
        # and leaders verify transactional appends with it (KIP-890, Kafka's
        # AddPartitionsToTxnManager): both over ``connect`` when one is given (else TCP),
        # each request bounded by request.timeout.ms as in Kafka.
        request_timeout_s = config.request_timeout_ms / 1000
        self.txn_markers = MarkerSender(
            self.broker_id, self.metadata, config.inter_broker_listener_name, security,
            connect=connect, request_timeout_s=request_timeout_s)
        self.txn_coordinator = TransactionCoordinator(
            TransactionCoordinatorSettings.from_config(config), self.metadata, coordinator_log,
            self.producer_ids, self.txn_markers, clock=coordinator_clock,
            create_topic=create_transaction_state_topic or (
                lambda: admin.create_transaction_state_topic(self.services)))
        self.txn_verifier = TxnVerifier(
            self.broker_id, self.metadata, config.inter_broker_listener_name,
            self.txn_coordinator.partition_for, security,
            request_timeout_s=request_timeout_s, connect=connect)
        # JBOD (KIP-113): replica moves between this broker's log dirs; a future log left
        # on disk resumes copying once LeaderAndIsr brings its partition online.
        self.log_dir_mover = LogDirMover(self.replica_manager, self.log_manager, CopyQuota(
            config.get("replica.alter.log.dirs.io.max.bytes.per.second")))
        # Topic tables (weir.tables, docs/tables.md): each led partition of a topic with
        # weir.iceberg.mode=key_value is appended to its Iceberg table by a worker process.
        self.tables = TableService(self.replica_manager.partitions,
                                   self.topic_configs.topic_config, lambda: self.config)
        self.replica_manager.leadership_listeners.extend((
            self.group_coordinator.on_leadership, self.txn_coordinator.on_leadership,
            lambda tp, _leader, _epoch: self.log_dir_mover.start(tp),
            self.tables.on_leadership))
        # ACL authorizer (weir.server.authz): None unless authorizer.class.name is set.
        self.authorizer = create_authorizer(config, zk)
        # The controller (Kafka's KafkaController): elected once the broker has registered.
        self.controller = ControllerService(
            self.broker_id, zk, config, now_ms=now_ms, settings=controller_settings,
            channel_factory=channel_factory or functools.partial(ControllerChannelManager,
                                                                 connect=self.connect),
            run_blocking=run_blocking)
        # Dynamic broker configs (/config/brokers/<id> and <default>): keep self.config at the
        # effective configuration and reconfigure the running parts.
        self.dynamic_configs = DynamicBrokerConfigs(
            self.broker_id, zk, lambda: self.config, self._publish_config,
            broker_reconfigurables(
                topic_configs=self.topic_configs, throttles=self.replica_manager.throttles,
                servers=socket_servers,
                alter_log_dirs_quota=self.log_dir_mover.quota, cleaner=self.log_cleaner,
                controller=lambda: self.services.controller,
                registration=lambda: self.registration))
        self.config_changes = ConfigChangeListener(
            zk, self.dynamic_configs, self.topic_configs, self.scram_credentials)
        self.controlled_shutdown = ControlledShutdown(
            self.broker_id, broker_epoch=lambda: self.registration.broker_epoch,
            live_brokers=lambda: set(self.metadata.brokers),
            controller_endpoint=self.controller_endpoint,
            max_retries=config.controlled_shutdown_max_retries,
            retry_backoff_ms=config.controlled_shutdown_retry_backoff_ms,
            socket_timeout_ms=config.controller_socket_timeout_ms,
            security=security)
        self.services = BrokerServices(
            broker_id=self.broker_id, config_source=lambda: self.config, metadata=self.metadata,
            replica_manager=self.replica_manager, log_manager=self.log_manager,
            log_dir_mover=self.log_dir_mover, topic_configs=self.topic_configs,
            dynamic_configs=self.dynamic_configs, group_coordinator=self.group_coordinator,
            txn_coordinator=self.txn_coordinator, txn_verifier=self.txn_verifier,
            producer_ids=self.producer_ids, fetch_sessions=self.fetch_sessions,
            scram_credentials=self.scram_credentials, authorizer=self.authorizer,
            registration=self.registration, zk=zk)
        # Frames in, frames out: what the socket servers (or the simulated network) call.
        self.dispatcher = Dispatcher(self.services)
        self._background: set[asyncio.Task] = set()  # log dir failure notifications

    async def serve_frame(self, frame: bytes, peer: str) -> bytes:
        """One request frame (no size prefix) through the dispatcher and its handler; the
        response frame without its size prefix (file regions read now, as ``sendfile``
        would).  For transports other than the socket servers (the simulation's network);
        a request that gets no answer (Produce with acks=0) raises ``ConnectionError``."""
        out = await self.dispatcher.dispatch(frame, peer)
        if out is None:
            raise ConnectionError("the request has no response")
        if isinstance(out, bytes):
            return out[4:]
        return b"".join(_chunk_bytes(c) for c in out)[4:]

    def _alter_partition_manager(self, on_result: Callable[[IsrResult], None]
                                 ) -> AlterPartitionManager:
        # Kafka's BrokerToControllerChannelManager: a request unanswered within
        # controller.socket.timeout.ms is sent again.
        return AlterPartitionManager(
            self.broker_id, lambda: self.registration.broker_epoch, self.controller_endpoint,
            on_result, timeout_ms=self.config.controller_socket_timeout_ms,
            connect=self.connect)

    def controller_endpoint(self) -> tuple[int, str, int] | None:
        """(id, host, port) of the active controller as the metadata cache knows it."""
        controller = self.metadata.brokers.get(self.metadata.controller_id)
        if controller is None:
            return None
        return controller.id, controller.host, controller.port

    def _publish_config(self, config: BrokerConfig) -> None:
        """The effective configuration after a dynamic config change."""
        self.config = config

    async def start_controller(self) -> None:
        """The controller election (after registration, as Kafka's KafkaServer.startup)."""
        self.services.controller = self.controller
        await self.controller.start()

    # -- a log dir failing (KIP-112) ------------------------------------------------------

    def _on_log_dir_failure(self, log_dir: Path, reason: str) -> None:
        """Kafka's ``ReplicaManager.handleLogDirFailure`` (weir.replication.log_dir_failure):
        JBOD (KIP-112) takes the dir's replicas offline and tells the controller; a broker
        with no log dir left halts."""
        handle_log_dir_failure(self.replica_manager, self.log_dir_mover, log_dir, reason,
                               notify_controller=self._notify_log_dir_event,
                               halt=self._halt or (lambda: None))

    def _notify_log_dir_event(self) -> None:
        task = asyncio.get_running_loop().create_task(self._propagate_log_dir_event())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _propagate_log_dir_event(self) -> None:
        """``/log_dir_event_notification/log_dir_event_<seq>`` for the controller (Kafka's
        ``KafkaZkClient.propagateLogDirEvent``), retried while the ZooKeeper session is
        lost or being replaced, as its ``retryRequestUntilConnected`` does."""
        while True:
            try:
                path = await self.run_blocking(self.zk.propagate_log_dir_event, self.broker_id)
            except ConnectionClosedError:  # this broker closed its client: it is stopping
                log.info("log dir failure notification not written: the client is closed")
                return
            except (SessionExpiredError, ConnectionLoss) as exc:
                log.info("log dir failure notification not written (%r); retrying", exc)
                await asyncio.sleep(LOG_DIR_EVENT_RETRY_S)
                continue
            except Exception:
                log.exception("could not write the log dir failure notification")
                return
            log.info("log dir failure notification %s written", path)
            return

    async def stop_background(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

"""A simulated broker process: the production :class:`~weir.server.broker_core.BrokerCore`
built whole for each incarnation, on the simulation's virtual-time loop.

Each incarnation builds one ``BrokerCore`` (its metadata cache, log manager, replica manager
with its AlterPartitionManager and fetchers, coordinators, request handlers, ``Dispatcher``
and :class:`~weir.controller.service.ControllerService`) from what the simulated world gives
it: the virtual clock, a :class:`~weir.sim.zk.SimZkClient` session of the znode-level
ZooKeeper, the simulated network (``connect``: encoded frames, :meth:`SimNode.connect_frames`;
the controller's channels: :class:`SimConnection`), the inline blocking-work runner
(``Simulation.run_zk``), the deterministic deferred writer and ``halt`` (the process dies).
It registers and elects as a broker process does (``BrokerRegistration.register``, then
``BrokerCore.start_controller``).  Every request frame it receives goes through
``BrokerCore.serve_frame``: the real ``Dispatcher`` and handlers answer the controller's
LeaderAndIsr, UpdateMetadata and StopReplica, AlterPartition, and the followers' Fetch,
OffsetForLeaderEpoch and ListOffsets.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.config import BrokerConfig
from weir.controller.channel import ControllerChannelManager
from weir.controller.service import ControllerService
from weir.controller.settings import ControllerSettings
from weir.protocol import codec
from weir.protocol.client import FrameConnection, decode_response_frame, encode_request_frame
from weir.protocol.interbroker import INTERBROKER_SCHEMAS
from weir.server.broker_core import BrokerCore
from weir.sim import process
from weir.sim.process import SimProcess
from weir.sim.replica import SimDeferredWriter, SimLeaderEndPoint
from weir.sim.world import VirtualClock
from weir.sim.zk import SimZkClient
from weir.storage.log import parse_topic_partition

if TYPE_CHECKING:
    from weir.sim.cluster import Simulation
    from weir.sim.config import SimConfig
    from weir.sim.replica import SimReplicas

__all__ = ["SIM_PORT_BASE", "SimConnection", "SimNode", "broker_config"]

log = logging.getLogger(__name__)

SIM_PORT_BASE = 9000
"""Simulated brokers listen on ``SIM_PORT_BASE + broker id`` (their registration says so)."""
LEADER_AND_ISR_KEY, UPDATE_METADATA_KEY, ALTER_PARTITION_KEY = 4, 6, 56
SEGMENT_BYTES = 1200  # small: rolls, multi-segment cuts
TXN_STATE_PARTITIONS = 3  # transaction.state.log.num.partitions
TXN_ABORT_INTERVAL_MS = 100  # transaction.abort.timed.out.transaction.cleanup.interval.ms
# request.timeout.ms: the transaction coordinator's appends to __transaction_state, its
# markers' and its verification's inter-broker requests, the WriteTxnMarkers appends
TXN_REQUEST_TIMEOUT_MS = 600


def broker_config(config: SimConfig, broker_id: int, log_dirs: list[Path]) -> BrokerConfig:
    """A simulated broker's configuration (Kafka's names), from the run's knobs."""
    return BrokerConfig({
        "broker.id": str(broker_id), "zookeeper.connect": "sim:2181",
        "log.dirs": ",".join(str(d) for d in log_dirs),
        "listeners": f"PLAINTEXT://broker-{broker_id}:{SIM_PORT_BASE + broker_id}",
        "zookeeper.session.timeout.ms": str(config.session_timeout_ms),
        "controller.socket.timeout.ms": str(config.controller_socket_timeout_ms),
        "log.segment.bytes": str(SEGMENT_BYTES),
        "min.insync.replicas": str(config.min_insync_replicas),
        "replica.lag.time.max.ms": str(config.replica_lag_time_max_ms),
        "replica.fetch.wait.max.ms": str(config.fetch_max_wait_ms),
        "replica.fetch.max.bytes": str(config.fetch_max_bytes),
        "replica.fetch.response.max.bytes": str(config.fetch_max_bytes),
        "replica.fetch.backoff.ms": str(config.fetch_backoff_ms),
        "replica.socket.timeout.ms": str(config.fetch_timeout_ms),
        # The transaction coordinator's (weir.sim.txn); they matter only with transactions.
        "transaction.state.log.num.partitions": str(TXN_STATE_PARTITIONS),
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(TXN_ABORT_INTERVAL_MS),
        "request.timeout.ms": str(TXN_REQUEST_TIMEOUT_MS),
    })


class SimConnection:
    """The controller channel's transport to one simulated broker (what
    :class:`~weir.protocol.client.BrokerConnection` is over TCP): requests and answers
    cross the simulated network in order, as frames the production codecs encode and
    decode (the client's on this side, the receiver's ``BrokerCore.serve_frame`` on the
    other); a dead or restarted broker resets it."""

    def __init__(self, sim: Simulation, source: SimNode, target_id: int) -> None:
        self.sim, self.source, self.target = sim, source, sim.nodes[target_id]
        self._incarnation = source.incarnation
        self._target_incarnation = -1
        self._correlation_id = 0
        self.connected = False

    def _reachable(self) -> bool:
        return (self.target.alive and self.target.incarnation == self._target_incarnation
                and self.source.alive and self.source.incarnation == self._incarnation)

    async def connect(self, timeout_s: float) -> None:
        await asyncio.sleep(self.sim.net_delay() / 1000)
        if not self.target.alive:
            raise ConnectionRefusedError(f"broker {self.target.id} is down")
        self._target_incarnation = self.target.incarnation
        self.connected = True

    async def request(self, request: Any, timeout_s: float) -> Any:
        if not self._reachable():
            self.connected = False
            raise ConnectionResetError(f"connection to broker {self.target.id} reset")
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        frame = encode_request_frame(request, correlation_id, f"controller-{self.source.id}")
        answer = self.source.send_frame(self.target, frame, self._reachable)
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation
            # that races with the answer arriving, and a killed controller's channel task
            # would live on, pending forever (found by running seeds 100-110 in one process).
            async with asyncio.timeout(timeout_s):
                answered_frame = await answer
        except (TimeoutError, ConnectionError):
            self.connected = False
            raise
        answered_id, response = decode_response_frame(type(request), answered_frame)
        if answered_id != correlation_id:
            self.connected = False
            raise ConnectionError(f"answer to request {answered_id}, not {correlation_id}")
        return response

    async def close(self) -> None:
        self.connected = False


class SimNode:
    """One broker process (alive or dead) in the simulation."""

    def __init__(self, sim: Simulation, broker_id: int, settings: ControllerSettings) -> None:
        self.sim = sim
        self.id = broker_id
        self.settings = settings
        self.alive = False
        self.session = 0
        self.incarnation = 0
        self.zk: SimZkClient | None = None
        self.core: BrokerCore | None = None  # this incarnation's broker
        self.service: ControllerService | None = None  # its controller (core.controller)
        self.deferred: SimDeferredWriter | None = None
        self.replicas: SimReplicas | None = None  # the data path's view (``SimConfig.data``)
        self.process: SimProcess | None = None  # this incarnation's tasks (weir.sim.process)
        # Answers this incarnation owes (a crash resets their connections).
        self._owed: dict[asyncio.Future[bytes], None] = {}
        self._dying: dict[asyncio.Task[Any], None] = {}  # see crash

    @property
    def active(self) -> bool:
        """Whether this live process is the active controller."""
        return self.alive and self.service is not None and self.service.is_active

    @property
    def epoch(self) -> int:
        """The broker epoch of this incarnation's registration (-1 before it registered)."""
        return -1 if self.core is None else self.core.registration.broker_epoch

    @property
    def controller_epoch(self) -> int:
        return -1 if self.service is None else self.service.core.ctx.controller_epoch

    @property
    def log_dirs(self) -> list[Path]:
        """This broker's disk: one log dir, or several (JBOD, KIP-112) for runs with disk
        faults (weir.sim.disk)."""
        root = self.sim.disk_root / f"broker-{self.id}"
        dirs = self.sim.config.log_dirs
        return [root] if dirs == 1 else [root / f"dir-{i}" for i in range(dirs)]

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run ``coro`` as a task of this process (kept referenced until it ends or the
        process dies)."""
        assert self.process is not None
        return self.process.spawn(self.sim.loop, coro)

    def run(self, fn: Any, *args: Any) -> Any:
        """Call ``fn`` as code of this process (e.g. a request arriving)."""
        return fn(*args) if self.process is None else self.process.run(fn, *args)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """A fresh process: its broker built whole, its logs loaded; then (as a task) the
        registration and the controller election."""
        sim = self.sim
        self.alive = True
        self.incarnation += 1
        process.install(sim.loop)
        self.process = SimProcess(f"broker {self.id} incarnation {self.incarnation}")
        self.zk = SimZkClient(sim.zk, self.id)
        self.session = self.zk.session
        if self.service is not None:
            sim.retire_service(self.service)
        self.deferred = SimDeferredWriter(sim)
        self.core = core = self.process.run(self._build)
        self.service = core.controller
        self.process.run(self._open_logs)
        if sim.data is not None:
            self.process.run(sim.data.start, self)
        self.spawn(self._boot(core))

    def _build(self) -> BrokerCore:
        sim = self.sim
        incarnation = self.incarnation
        channels = functools.partial(ControllerChannelManager,
                                     connect=self._connect, backoff_ms=20, max_backoff_ms=200)

        def halt() -> None:  # Exit.halt: the process dies; its session expires later
            sim.schedule(0, lambda: self.alive and self.incarnation == incarnation
                         and sim.kill(self, "halt (all log dirs failed) of"))
        return BrokerCore(
            broker_config(sim.config, self.id, self.log_dirs), self.zk,
            now_ms=sim.loop.now_ms, connect=self.connect_frames,
            run_blocking=functools.partial(sim.run_zk, self),
            endpoint_factory=lambda leader: SimLeaderEndPoint(self, leader),
            deferred=self.deferred, halt=halt, controller_settings=self.settings,
            channel_factory=channels, coordinator_clock=VirtualClock(sim),
            group_coordinator=None if sim.groups is None else sim.groups.build_coordinator,
            create_transaction_state_topic=None if sim.txn is None else sim.txn.create_topic)

    def _open_logs(self) -> None:
        """Start-up: the directories of deleted topics go (Kafka deletes them once the
        controller says so; a broker down meanwhile finds them gone from ZooKeeper), then the
        log manager loads the rest, recovering unflushed tails from its checkpoints."""
        assert self.core is not None
        live = set(self.sim.zk.topics)
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            for path in sorted(log_dir.iterdir()):
                tp = parse_topic_partition(path.name)
                if tp is not None and tp.topic not in live:
                    shutil.rmtree(path)
        self.core.log_manager.startup(self.sim.now)

    async def _boot(self, core: BrokerCore) -> None:
        """What Broker.start does once the logs are loaded: register (the broker epoch),
        follow the session, elect."""
        await core.registration.register()
        assert self.zk is not None
        self.zk.add_session_listener(
            lambda state: self.run(core.registration.on_session_state, state))
        await core.start_controller()

    def _connect(self, host: str, port: int) -> SimConnection:
        return SimConnection(self.sim, self, port - SIM_PORT_BASE)

    def send_frame(self, target: SimNode, frame: bytes, reachable: Callable[[], bool],
                   lossy: bool = False) -> asyncio.Future[bytes]:
        """Send a request frame to ``target`` over the simulated network; the future of its
        encoded answer.  ``target`` serves it as code of its process; if it dies first, the
        connection is reset (ConnectionResetError, a network delay later).  ``lossy``: a
        data-path message (weir.sim.data): it may be lost, reordered or, a read, served twice
        (a lost one shows as the client's timeout)."""
        sim = self.sim
        answer: asyncio.Future[bytes] = sim.loop.create_future()

        async def serve() -> None:
            try:
                response = await target.serve_frame(frame, f"broker-{self.id}")
            except Exception as exc:  # noqa: BLE001 - as the socket server does:
                # an unexpected error in a handler (a ZooKeeper session lost under it)
                # closes the connection, and the client hears it reset.
                log.info("broker %d: error serving broker %d (%r); closing the connection",
                         target.id, self.id, exc)
                reset = ConnectionResetError(f"broker {target.id} closed the connection")
                if reachable():
                    self._transmit(target.id, self.id, lambda: answer.done()
                                   or answer.set_exception(reset), False)
                return
            if reachable():
                self._transmit(target.id, self.id,
                               lambda: answer.done() or answer.set_result(response), lossy)

        def arrive() -> None:
            if not reachable():
                if self.alive and not answer.done():
                    answer.set_exception(ConnectionResetError(f"broker {target.id} went away"))
                return
            target._owed[answer] = None
            answer.add_done_callback(lambda a: target._owed.pop(a, None))
            copies = 2 if lossy and sim.data is not None and (
                sim.rng.random() < sim.config.data_duplicate_ratio) else 1
            for _ in range(copies):
                target.spawn(serve())
        self._transmit(self.id, target.id, arrive, lossy)
        return answer

    def _transmit(self, src: int, dst: int, fn: Callable[[], object], lossy: bool) -> None:
        sim = self.sim
        data = sim.data
        if not lossy or data is None:
            sim.deliver(src, dst, fn)
            return
        if sim.rng.random() < sim.config.data_drop_ratio:
            return
        if sim.rng.random() < sim.config.data_reorder_ratio:
            data.stats["reordered_messages"] += 1
            sim.schedule(sim.net_delay(), fn)
        else:
            sim.deliver(src, dst, fn)

    def connect_frames(self, host: str, port: int, lossy: bool = False, *,
                       client_id: str | None = None, security: Any = None) -> FrameConnection:
        """This incarnation's connection to the broker listening on ``port``: encoded
        request frames cross the simulated network (FIFO per link, delayed), the receiver
        serves them through its ``BrokerCore``, and its encoded answer comes back to be
        decoded by :class:`~weir.protocol.client.FrameConnection`, the client's code.  A
        request to a process that dies gets its connection reset; one from a process that
        died gets no answer.  ``lossy``: see :meth:`send_frame`.  ``client_id`` and
        ``security`` as ``BrokerConnection``'s (``BrokerConnections`` passes them: the
        transaction markers and verification); the simulated network has no TLS or SASL."""
        sim, source = self.sim, self
        incarnation = self.incarnation

        async def open_call() -> Any:
            await asyncio.sleep(sim.net_delay() / 1000)
            target = sim.nodes.get(port - SIM_PORT_BASE)
            if target is None or not target.alive:
                raise ConnectionRefusedError(f"no broker listens on port {port}")
            target_incarnation = target.incarnation

            def reachable() -> bool:
                return (target.alive and target.incarnation == target_incarnation
                        and source.alive and source.incarnation == incarnation)

            async def call(frame: bytes) -> bytes:
                if sim.data is not None and lossy:
                    sim.data.stats["fetch_rounds"] += 1
                return await source.send_frame(target, frame, reachable, lossy)
            return call
        return FrameConnection(open_call, client_id=client_id or f"broker-{self.id}")

    async def serve_frame(self, frame: bytes, peer: str) -> bytes:
        """A request frame reaching this broker's inter-broker listener: through
        ``BrokerCore.serve_frame`` (the production Dispatcher and handler).  What the
        simulation observes of it: the leader epochs a LeaderAndIsr moved (the invariants),
        an UpdateMetadata's deleted partitions for the group plane, the ISR proposals
        (statistics)."""
        core = self.core
        assert core is not None
        api_key = codec.parse_request_header_prefix(frame)[0]
        if api_key != LEADER_AND_ISR_KEY:
            response = await core.serve_frame(frame, peer)
        else:
            partitions = core.replica_manager.partitions
            before = {tp: p.leader_epoch for tp, p in partitions.items()}
            response = await core.serve_frame(frame, peer)
            self._leader_epochs_moved(before)
        if api_key == UPDATE_METADATA_KEY and self.sim.groups is not None:
            self.sim.groups.on_update_metadata(self, _decode_request(frame))
        elif api_key == ALTER_PARTITION_KEY and self.sim.data is not None:
            self.sim.data.stats["isr_proposals"] += sum(
                len(t.partitions) for t in _decode_request(frame).topics)
        return response

    def _leader_epochs_moved(self, before: dict[TopicPartition, int]) -> None:
        assert self.core is not None
        for tp, part in self.core.replica_manager.partitions.items():
            old = before.get(tp)
            if old != part.leader_epoch:
                self.sim.on_broker_leader_epoch(self.id, tp, old, part.leader_epoch)

    def crash(self, lose_unflushed: bool = False) -> None:
        """The process dies (a kill: no shutdown code of it runs); its session expires
        later (the simulation schedules it).  With ``lose_unflushed`` the machine loses
        power: unflushed log bytes go too."""
        sim = self.sim
        if sim.data is not None:
            sim.data.crash(self, lose_unflushed)
        elif self.core is not None:
            for task in self.core.replica_manager.fetchers.abandon():
                self._bury(task)
            for logs in self.core.log_manager.logs_by_dir().values():
                for log, _future in logs:
                    log.close()
        if self.deferred is not None:
            self.deferred.dead = True  # its pending writes die with the process
        self.alive = False
        if self.zk is not None:
            self.zk.close()  # its watches fire no more, its calls fail
        if self.process is not None:
            # Every task of the process at once: the controller's event consumer, its
            # channel senders, the rebalance timer, the fetchers, the requests it was
            # serving and the ZooKeeper calls they wait on.  The service does not resign: a
            # killed controller's /controller znode goes with its session.  The cancelled
            # tasks stay referenced until they have unwound (a pending task the garbage
            # collector destroys is reported at a moment that depends on memory).
            for task in self.process.kill():
                self._bury(task)
        # The connections of the requests it was serving are reset.
        for answer in list(self._owed):
            sim.schedule(sim.net_delay(), lambda a=answer: a.done() or a.set_exception(
                ConnectionResetError(f"broker {self.id} died")))
        self._owed.clear()

    def _bury(self, task: asyncio.Task[Any]) -> None:
        if not task.done():
            self._dying[task] = None
            task.add_done_callback(lambda t: self._dying.pop(t, None))

    def session_expired(self) -> None:
        """ZooKeeper expired the session (the client heard LOST): reconnect with a new one
        and tell the listeners (CONNECTED): the registration registers again and the
        controller re-elects, as in a broker process."""
        if not self.alive or self.zk is None:
            return
        self.zk.reconnect()
        self.session = self.zk.session
        self.zk.session_event("CONNECTED")


def _decode_request(frame: bytes) -> Any:
    api_key, version, _correlation = codec.parse_request_header_prefix(frame)
    request_cls = INTERBROKER_SCHEMAS[api_key][version][0]
    header = codec.parse_request_header(frame, bool(request_cls.__flexible__))
    return codec.decode_body(request_cls, frame, header.size)

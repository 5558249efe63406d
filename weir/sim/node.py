"""A simulated broker process: the production
:class:`~weir.controller.service.ControllerService` (on the simulation's virtual-time loop,
with a :class:`~weir.sim.zk.SimZkClient` session and the real
:class:`~weir.controller.channel.ControllerChannelManager` over a simulated transport), and
the tiny broker state the controller's requests change (its broker half answers
LeaderAndIsr, UpdateMetadata and StopReplica as a broker does).
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.controller.channel import ControllerChannelManager
from weir.controller.events import IsrChange
from weir.controller.rpc import ALTER_PARTITION_KEY
from weir.controller.service import ControllerService
from weir.controller.settings import ControllerSettings
from weir.protocol import codec
from weir.protocol.client import (
    FrameConnection,
    decode_response_frame,
    encode_request_frame,
)
from weir.protocol.errors import ErrorCode, KafkaError
from weir.protocol.interbroker import (
    INTERBROKER_SCHEMAS,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from weir.server.handlers import update_metadata
from weir.server.handlers._controller_requests import broker_epoch_is_stale
from weir.server.metadata_cache import MetadataCache
from weir.sim import process
from weir.sim.process import SimProcess
from weir.sim.zk import SimZkClient

if TYPE_CHECKING:
    from weir.sim.cluster import Simulation
    from weir.sim.replica import SimReplicas

__all__ = ["PartitionView", "SimConnection", "SimNode"]

INTER_BROKER_LISTENER = "PLAINTEXT"
SIM_PORT_BASE = 9000
"""Simulated brokers listen on ``SIM_PORT_BASE + broker id`` (see :class:`SimZk`)."""


@dataclass
class PartitionView:
    """What a broker knows of one partition (from LeaderAndIsr or UpdateMetadata)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    replicas: tuple[int, ...] = ()


@dataclass
class BrokerState:
    """The broker half of a node; lost when the process dies."""

    controller_epoch: int = 0
    hosted: dict[TopicPartition, PartitionView] = field(default_factory=dict)
    # The broker's metadata cache (Kafka's MetadataCache), as the UpdateMetadata handler
    # fills it: its parse step and MetadataCache.update.
    metadata: MetadataCache = field(default_factory=MetadataCache)
    follower_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    alter_in_flight: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _ControllerConfig:
    """The broker configs ControllerService reads (Kafka names, attribute spelling)."""

    controller_socket_timeout_ms: int


class SimConnection:
    """The controller channel's transport to one simulated broker (what
    :class:`~weir.protocol.client.BrokerConnection` is over TCP): requests and answers
    cross the simulated network in order, as frames the production codecs encode and
    decode (the client's on this side, :meth:`SimNode.receive_frame` on the broker's); a
    dead or restarted broker resets it."""

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
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def arrive() -> None:
            if not self.source.alive or self.source.incarnation != self._incarnation:
                return  # the controller process is gone: nobody reads the answer
            if not self._reachable():
                if not answer.done():
                    answer.set_exception(ConnectionResetError("broker went away"))
                return
            response = self.target.run(self.target.receive_frame, self.source.id, frame)
            self.sim._deliver(self.target.id, self.source.id,
                              lambda: answer.done() or answer.set_result(response))

        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        frame = encode_request_frame(request, correlation_id, f"controller-{self.source.id}")
        self.sim._deliver(self.source.id, self.target.id, arrive)
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation
            # that races with the answer arriving, and a killed controller's channel task
            # would live on, pending forever (found by running seeds 100-110 in one process).
            async with asyncio.timeout(timeout_s):
                answered_frame = await answer
        except TimeoutError:
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
        self.epoch = -1
        self.incarnation = 0
        self.zk: SimZkClient | None = None
        self.service: ControllerService | None = None
        self.broker = BrokerState()
        self.replicas: SimReplicas | None = None  # the data path (``SimConfig.data``)
        self.process: SimProcess | None = None  # this incarnation's tasks (weir.sim.process)

    @property
    def active(self) -> bool:
        """Whether this live process is the active controller."""
        return self.alive and self.service is not None and self.service.is_active

    @property
    def controller_epoch(self) -> int:
        return -1 if self.service is None else self.service.core.ctx.controller_epoch

    def spawn(self, coro: Any) -> None:
        """Run ``coro`` as a task of this process (kept referenced until it ends or the
        process dies)."""
        assert self.process is not None
        self.process.spawn(self.sim.loop, coro)

    def run(self, fn: Any, *args: Any) -> Any:
        """Call ``fn`` as code of this process (e.g. a request arriving)."""
        return fn(*args) if self.process is None else self.process.run(fn, *args)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """A fresh process: new session, registration, the controller election."""
        sim = self.sim
        self.alive = True
        self.incarnation += 1
        process.install(sim.loop)
        self.process = SimProcess(f"broker {self.id} incarnation {self.incarnation}")
        self.broker = BrokerState()
        self.zk = SimZkClient(sim.zk, self.id)
        self.session = self.zk.session
        self.epoch = sim.zk.register_broker(self.id, self.session)
        if sim.data is not None:
            self.process.run(sim.data.start, self)
        channels = functools.partial(ControllerChannelManager,
                                     connect=self._connect, backoff_ms=20, max_backoff_ms=200)
        if self.service is not None:
            sim.retire_service(self.service)
        self.service = ControllerService(
            self.id, self.zk, _ControllerConfig(sim.config.controller_socket_timeout_ms),
            now_ms=sim.loop.now_ms, settings=self.settings, channel_factory=channels,
            run_blocking=functools.partial(sim.run_zk, self))
        self.process.run(self.spawn, self.service.start())

    def _connect(self, host: str, port: int) -> SimConnection:
        return SimConnection(self.sim, self, port - SIM_PORT_BASE)

    def connect_frames(self, host: str, port: int) -> FrameConnection:
        """This incarnation's connection to the broker listening on ``port``: encoded
        request frames cross the simulated network (FIFO per link, delayed), the receiver
        decodes them with the production codec, and its encoded answer comes back to be
        decoded by :class:`~weir.protocol.client.FrameConnection`, the client's code.  A
        request to a process that dies, or from one, gets no answer (the client's timeout
        fires, as a socket's would)."""
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
                answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

                async def serve() -> None:
                    response = await target.serve_frame(frame)
                    if reachable():
                        sim._deliver(target.id, source.id,
                                     lambda: answer.done() or answer.set_result(response))

                def arrive() -> None:
                    if reachable():
                        target.spawn(serve())
                sim._deliver(source.id, target.id, arrive)
                return await answer
            return call
        return FrameConnection(open_call, client_id=f"broker-{self.id}")

    async def serve_frame(self, frame: bytes) -> bytes:
        """A request frame reaching this broker's inter-broker listener, decoded and answered
        by the production codecs.  AlterPartition goes to this process's
        :class:`ControllerService` as the AlterPartition handler hands it over
        (NOT_CONTROLLER unless it is the active controller)."""
        api_key, version, _correlation = codec.parse_request_header_prefix(frame)
        if api_key != ALTER_PARTITION_KEY and self.sim.txn is not None:
            # Transactions (weir.sim.txn): the production Dispatcher and handlers.
            return await self.sim.txn.serve_frame(self, frame)
        request_cls, response_cls = INTERBROKER_SCHEMAS[api_key][version]
        header = codec.parse_request_header(frame, bool(request_cls.__flexible__))
        request = codec.decode_body(request_cls, frame, header.size)
        if api_key != ALTER_PARTITION_KEY:
            raise ValueError(f"no simulated handler for API key {api_key}")
        if self.sim.data is not None:
            self.sim.data.stats["isr_proposals"] += sum(len(t.partitions)
                                                        for t in request.topics)
        service = self.service
        try:
            if service is None or not service.is_active:
                raise KafkaError(ErrorCode.not_controller, "not the active controller")
            response = await service.on_alter_partition(request)
        except KafkaError as exc:
            response = codec.build(response_cls, error_code=exc.code, topics=[])
        flexible = codec.response_header_flexible(api_key, response_cls)
        return codec.encode_response_frame(header.correlation_id, codec.encode_body(response),
                                           flexible)[4:]

    def crash(self, lose_unflushed: bool = False) -> None:
        """The process dies (a kill: no shutdown code of it runs); its session expires
        later (the simulation schedules it).  With ``lose_unflushed`` the machine loses
        power: unflushed log bytes go too."""
        if self.sim.data is not None:
            self.sim.data.crash(self, lose_unflushed)
        self.alive = False
        if self.zk is not None:
            self.zk.close()  # its watches fire no more, its calls fail
        if self.process is not None:
            # Every task of the process at once: the controller's event consumer, its
            # channel senders, the rebalance timer, the requests it was serving and the
            # ZooKeeper calls they wait on.  The service does not resign: a killed
            # controller's /controller znode goes with its session.
            self.process.kill()

    def session_expired(self) -> None:
        """ZooKeeper expired the session (the client heard LOST): reconnect with a new one,
        re-register, and tell the service (CONNECTED), as the broker's session handler does."""
        if not self.alive or self.zk is None:
            return
        self.zk.reconnect()
        self.session = self.zk.session
        self.epoch = self.sim.zk.register_broker(self.id, self.session)
        self.zk.session_event("CONNECTED")

    # -- the broker side -------------------------------------------------------------------

    def receive_frame(self, controller_id: int, frame: bytes) -> bytes:
        """A controller request frame (LeaderAndIsr, UpdateMetadata, StopReplica) decoded
        by the production codec, applied by :meth:`receive`, and its answer encoded (the
        frame without its size prefix)."""
        api_key, version, _correlation = codec.parse_request_header_prefix(frame)
        request_cls, response_cls = INTERBROKER_SCHEMAS[api_key][version]
        header = codec.parse_request_header(frame, bool(request_cls.__flexible__))
        response = self.receive(controller_id,
                                codec.decode_body(request_cls, frame, header.size))
        return codec.encode_response_frame(
            header.correlation_id, codec.encode_body(response),
            codec.response_header_flexible(api_key, response_cls))[4:]

    def receive(self, controller_id: int, request: Any) -> Any:
        """Apply a controller request and answer it as a broker does (Kafka's
        ReplicaManager: a stale controller epoch gets STALE_CONTROLLER_EPOCH, a request
        for an earlier incarnation STALE_BROKER_EPOCH)."""
        state = self.broker
        if request.controller_epoch < state.controller_epoch:
            return _answer(request, ErrorCode.stale_controller_epoch)
        if broker_epoch_is_stale(request.broker_epoch, self.epoch):
            return _answer(request, ErrorCode.stale_broker_epoch)
        state.controller_epoch = request.controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        if isinstance(request, LeaderAndIsrRequest):
            errors = self._leader_and_isr(request)
        elif isinstance(request, UpdateMetadataRequest):
            brokers, partitions = update_metadata.parse_request(request, INTER_BROKER_LISTENER)
            state.metadata.update(request.controller_id, request.controller_epoch, brokers,
                                  partitions)
            if self.sim.groups is not None:
                # The broker's own step after its metadata cache: deleted partitions (leader
                # -2) lose their committed offsets (the UpdateMetadata handler's code).
                self.sim.groups.on_update_metadata(self, request)
        elif isinstance(request, StopReplicaRequest):
            for topic in request.topic_states:
                for p in topic.partition_states:
                    tp = TopicPartition(topic.topic_name, p.partition_index)
                    if p.delete_partition:
                        state.hosted.pop(tp, None)
                        state.follower_epochs.pop(tp, None)
                    if self.replicas is not None:
                        self.replicas.stop_replica(tp, p.leader_epoch, p.delete_partition)
        return _answer(request, ErrorCode.none, errors)

    def _leader_and_isr(self, request: LeaderAndIsrRequest) -> dict[TopicPartition, ErrorCode]:
        """Apply it; the partitions the replica manager refused (KAFKA_STORAGE_ERROR for a
        replica in a failed log dir) with their errors."""
        state = self.broker
        errors: dict[TopicPartition, ErrorCode] = {}
        for topic in request.topic_states:
            for p in topic.partition_states:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                mine = state.hosted.get(tp)
                if mine is not None and (p.leader_epoch, p.partition_epoch) < (
                        mine.leader_epoch, mine.partition_epoch):
                    continue
                self.sim.on_broker_leader_epoch(self.id, tp, mine and mine.leader_epoch,
                                                p.leader_epoch)
                state.hosted[tp] = PartitionView(p.leader, p.leader_epoch, list(p.isr),
                                                 p.partition_epoch, tuple(p.replicas))
                state.follower_epochs[tp] = self.epoch
                if self.replicas is not None and tp.topic in self.sim.zk.topics:
                    error = self.replicas.leader_and_isr(
                        tp, p, request.controller_epoch, self.sim.zk.topics[tp.topic].topic_id)
                    if error != ErrorCode.none:
                        errors[tp] = error
        return errors

    def propose_isr_changes(self) -> None:
        """As a partition leader: shrink/expand ISRs via AlterPartition to the controller."""
        sim = self.sim
        if self.replicas is not None:  # the data path: Partition's own proposals, sent by
            self.run(self.replicas.propose_shrinks)  # this process's AlterPartitionManager
            return
        for tp, view in sorted(self.broker.hosted.items()):
            if view.leader != self.id or tp in self.broker.alter_in_flight:
                continue
            caught_up = [r for r in view.replicas if r == self.id or sim.follows(r, tp, view)]
            new_isr = [r for r in view.replicas if r in caught_up]
            if sorted(new_isr) == sorted(view.isr):
                continue
            epochs = tuple(sim.nodes[r].epoch for r in new_isr)
            topic_id = sim.zk.topics[tp.topic].topic_id if tp.topic in sim.zk.topics else None
            if topic_id is None:
                continue
            change = IsrChange(view.leader_epoch, view.partition_epoch, tuple(new_isr), epochs)
            token = sim.next_token()
            self.broker.alter_in_flight[tp] = token
            sim.send_alter_partition(self, topic_id, tp, change, token)

    def on_alter_partition_answer(self, tp: TopicPartition, outcome: Any, token: int) -> None:
        """The controller's answer (``outcome`` None: the request timed out)."""
        if self.broker.alter_in_flight.get(tp) != token:
            return
        del self.broker.alter_in_flight[tp]
        view = self.broker.hosted.get(tp)
        if view is None or not hasattr(outcome, "isr"):
            return
        if outcome.leader_epoch == view.leader_epoch and outcome.zk_version > view.partition_epoch:
            view.isr = list(outcome.isr)
            view.partition_epoch = outcome.zk_version


def _answer(request: Any, error: ErrorCode,
            errors: dict[TopicPartition, ErrorCode] | None = None) -> Any:
    """A broker's response to a controller request, ``error`` for every partition but
    those in ``errors``."""
    errors = errors or {}
    if isinstance(request, LeaderAndIsrRequest):
        topics = [{"topic_id": t.topic_id,
                   "partition_errors": [{"partition_index": p.partition_index,
                                         "error_code": errors.get(
                                             TopicPartition(t.topic_name, p.partition_index),
                                             error)} for p in t.partition_states]}
                  for t in request.topic_states] if error == ErrorCode.none else []
        return codec.build(LeaderAndIsrResponse, error_code=error, topics=topics)
    if isinstance(request, StopReplicaRequest):
        errors = [{"topic_name": t.topic_name, "partition_index": p.partition_index,
                   "error_code": error} for t in request.topic_states
                  for p in t.partition_states] if error == ErrorCode.none else []
        return codec.build(StopReplicaResponse, error_code=error, partition_errors=errors)
    return codec.build(UpdateMetadataResponse, error_code=error)

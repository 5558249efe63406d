"""A simulated broker: its controller shell around a real :class:`ControllerCore`, and the
tiny broker state the controller's requests change.

The shell mirrors :class:`~weir.controller.service.ControllerService`: one event queue, one
event at a time, each ZooKeeper operation takes simulated time (the node is busy until the
result comes back), a :class:`ControllerMovedError` aborts the event and resigns.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.controller.core import ControllerCore
from weir.controller.effects import Reply, SendRequests, ZkOperation
from weir.controller.events import (
    AutoLeaderRebalance,
    BrokerChange,
    ControllerEvent,
    IsrChange,
    StopReplicaResult,
    TopicChange,
    TopicDeletion,
)
from weir.controller.settings import ControllerSettings
from weir.coordination.errors import ControllerMovedError
from weir.protocol.errors import ErrorCode
from weir.protocol.interbroker import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

if TYPE_CHECKING:
    from weir.sim.cluster import Simulation
    from weir.sim.replica import SimReplicas

__all__ = ["PartitionView", "SimNode"]


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
    metadata: dict[TopicPartition, PartitionView] = field(default_factory=dict)
    follower_epochs: dict[TopicPartition, int] = field(default_factory=dict)
    alter_in_flight: dict[TopicPartition, int] = field(default_factory=dict)


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
        self.core = ControllerCore(settings)
        self.broker = BrokerState()
        self.queue: collections.deque[Any] = collections.deque()
        self.busy = False
        self.generation = 0
        self.replicas: SimReplicas | None = None  # the data path (``SimConfig.data``)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """A fresh process: new session, registration, election attempt."""
        zk = self.sim.zk
        self.alive = True
        self.incarnation += 1
        self.core = ControllerCore(self.settings)
        self.broker = BrokerState()
        self.queue.clear()
        self.busy = False
        self.session = zk.open_session()
        self.epoch = zk.register_broker(self.id, self.session)
        if self.sim.data is not None:
            self.sim.data.start(self)
        self.enqueue("elect")

    def crash(self, lose_unflushed: bool = False) -> None:
        """The process dies; its session expires later (the simulation schedules it).
        With ``lose_unflushed`` the machine loses power: unflushed log bytes go too."""
        if self.sim.data is not None:
            self.sim.data.crash(self, lose_unflushed)
        self.alive = False
        self.queue.clear()
        self.busy = False
        self.generation += 1
        self.core = ControllerCore(self.settings)

    # -- the event loop --------------------------------------------------------------------

    def enqueue(self, item: Any) -> None:
        if self.alive:
            self.queue.append(item)
            self.sim.schedule(0, self.pump)

    def pump(self) -> None:
        while self.alive and not self.busy and self.queue:
            self._dispatch(self.queue.popleft())

    def _dispatch(self, item: Any) -> None:
        zk = self.sim.zk
        if item == "elect":
            self._elect()
        elif item == "session_lost":
            self._resign()
        elif isinstance(item, tuple) and item[0] == "watch":
            if item[1] != self.generation or not self.core.active:
                return
            what = item[2]
            if what == "brokers":
                self._process(BrokerChange(zk.live_brokers()))
            elif what == "topics":
                self._process(TopicChange(frozenset(zk.topics)))
            elif what == "delete_topics":
                self._process(TopicDeletion(frozenset(zk.to_delete)))
            elif what == "rebalance":
                self._process(AutoLeaderRebalance())
            else:
                self._process(what)
        elif isinstance(item, tuple) and item[0] == "call":
            event = item[1]
            if self.core.active:
                self._process(event)
            else:
                self.sim.reply(event.reply_to, ErrorCode.not_controller)

    def _elect(self) -> None:
        zk = self.sim.zk
        if self.core.active:
            if zk.controller is None or zk.controller[1] != self.session:
                self._resign()
            return
        won = zk.try_become_controller(self.id, self.session)
        if won is None:
            return
        self.generation += 1
        self.sim.on_elected(self, won[0])
        self._process(zk.snapshot(*won))

    def _resign(self) -> None:
        self.generation += 1
        self.busy = False
        if self.core.awaiting_result:
            self.core.abort()
        elif self.core.active:
            from weir.controller.events import ControllerResigned
            self.core.handle(ControllerResigned(), self.sim.now)
        self.sim.on_resigned(self)

    def _process(self, event: ControllerEvent) -> None:
        self.sim.count_event(event)
        self._apply(self.core.handle(event, self.sim.now), event)

    def _apply(self, effects: list[Any], event: ControllerEvent) -> None:
        for effect in effects:
            if isinstance(effect, SendRequests):
                for request in effect.requests:
                    self.sim.send_request(self, request.broker_id, request.request)
            elif isinstance(effect, Reply):
                self.sim.reply(effect.reply_to, effect.value)
        if effects and isinstance(effects[-1], ZkOperation):
            self._run_zk(effects[-1], event)

    def _run_zk(self, op: ZkOperation, event: ControllerEvent) -> None:
        self.busy = True
        self.sim.count_zk_op(event)
        generation = self.generation

        def execute() -> None:
            if generation != self.generation or not self.alive:
                return
            try:
                result = self.sim.zk.execute(op, self.session, self.id)
            except ControllerMovedError:
                self.sim.schedule(self.sim.zk_latency(), lambda: self._moved(generation))
                return
            self.sim.schedule(self.sim.zk_latency(), lambda: complete(result))

        def complete(result: Any) -> None:
            if generation != self.generation or not self.alive:
                return
            self.busy = False
            self._apply(self.core.complete(result, self.sim.now), event)
            self.pump()

        self.sim.schedule(self.sim.zk_latency(), execute)

    def _moved(self, generation: int) -> None:
        if generation != self.generation or not self.alive:
            return
        self._resign()
        self.enqueue("elect")
        self.pump()

    # -- the broker side -------------------------------------------------------------------

    def receive(self, controller_id: int, request: Any) -> None:
        """Apply a controller request (stale controller epochs are rejected)."""
        state = self.broker
        if request.controller_epoch < state.controller_epoch:
            return
        if request.broker_epoch not in (-1, self.epoch):
            return  # meant for an earlier incarnation
        state.controller_epoch = request.controller_epoch
        if isinstance(request, LeaderAndIsrRequest):
            self._leader_and_isr(request)
        elif isinstance(request, UpdateMetadataRequest):
            for topic in request.topic_states:
                for p in topic.partition_states:
                    tp = TopicPartition(topic.topic_name, p.partition_index)
                    state.metadata[tp] = PartitionView(p.leader, p.leader_epoch, list(p.isr),
                                                       p.zk_version, tuple(p.replicas))
        elif isinstance(request, StopReplicaRequest):
            errors = {}
            for topic in request.topic_states:
                for p in topic.partition_states:
                    tp = TopicPartition(topic.topic_name, p.partition_index)
                    if p.delete_partition:
                        state.hosted.pop(tp, None)
                        state.follower_epochs.pop(tp, None)
                    if self.replicas is not None:
                        self.replicas.stop_replica(tp, p.leader_epoch, p.delete_partition)
                    errors[tp] = ErrorCode.none
            self.sim.respond(self, controller_id, StopReplicaResult(self.id, errors))

    def _leader_and_isr(self, request: LeaderAndIsrRequest) -> None:
        state = self.broker
        for topic in request.topic_states:
            for p in topic.partition_states:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                mine = state.hosted.get(tp)
                if mine is not None and (p.leader_epoch, p.partition_epoch) < (
                        mine.leader_epoch, mine.partition_epoch):
                    continue
                if mine is not None and p.leader_epoch < mine.leader_epoch:
                    self.sim.violation(f"broker {self.id} leader epoch of {tp} went back")
                state.hosted[tp] = PartitionView(p.leader, p.leader_epoch, list(p.isr),
                                                 p.partition_epoch, tuple(p.replicas))
                state.follower_epochs[tp] = self.epoch
                if self.replicas is not None and tp.topic in self.sim.zk.topics:
                    self.replicas.leader_and_isr(tp, p, request.controller_epoch,
                                                 self.sim.zk.topics[tp.topic].topic_id)

    def propose_isr_changes(self) -> None:
        """As a partition leader: shrink/expand ISRs via AlterPartition to the controller."""
        sim = self.sim
        if self.replicas is not None:  # the data path: Partition's own proposals
            self.replicas.propose_shrinks(sim.config.replica_lag_time_max_ms)
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
        if self.replicas is not None:
            self.replicas.isr_answer(tp, outcome)
        view = self.broker.hosted.get(tp)
        if view is None or not hasattr(outcome, "isr"):
            return
        if outcome.leader_epoch == view.leader_epoch and outcome.zk_version > view.partition_epoch:
            view.isr = list(outcome.isr)
            view.partition_epoch = outcome.zk_version

"""Test helpers: the in-memory ZooKeeper store running the core's operations through
:mod:`weir.controller.executor`, and a driver."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from tests.unit.controller.memstore import MemoryZk
from weir.common import TopicPartition
from weir.controller import executor
from weir.controller.core import ControllerCore
from weir.controller.effects import Effect, Log, SendRequests, ZkOperation
from weir.controller.events import BrokerChange, Startup, TopicChange
from weir.controller.requests import OutboundRequest
from weir.controller.settings import ControllerSettings
from weir.coordination.codecs import BrokerInfo, TopicAssignment
from weir.protocol.interbroker import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

CONTROLLER_ID = 1
EPOCH_ZK_VERSION = 7


def broker(broker_id: int, epoch: int | None = None) -> BrokerInfo:
    return BrokerInfo(id=broker_id, host="localhost", port=9090 + broker_id,
                      rack=None, epoch=100 + broker_id if epoch is None else epoch)


def brokers(*ids: int) -> dict[int, BrokerInfo]:
    return {i: broker(i) for i in ids}


class FakeZk(MemoryZk):
    """The in-memory store (:class:`~tests.unit.controller.memstore.MemoryZk`, fenced at
    :data:`EPOCH_ZK_VERSION`) running the core's operations through the one executor,
    recording them."""

    def __init__(self) -> None:
        super().__init__()
        self.epoch_version = EPOCH_ZK_VERSION
        self.ops: list[ZkOperation] = []
        self.deleted: list[str] = []
        self.preferred_election_deleted = 0

    def add_topic(self, name: str, partitions: Mapping[int, list[int]],
                  configs: Mapping[str, str] | None = None) -> TopicAssignment:
        return self.create_topic(name, partitions, configs, topic_id=uuid.uuid4())

    def bump(self, tp: TopicPartition, **changes: Any) -> None:
        """Someone else wrote the state znode (its version moves on)."""
        cur = self.states[tp]
        self.states[tp] = dataclasses.replace(cur, zk_version=cur.zk_version + 1, **changes)

    def delete_topic_znodes(self, name: str, controller_epoch_zk_version: int) -> None:
        self.deleted.append(name)
        super().delete_topic_znodes(name, controller_epoch_zk_version)

    def delete_preferred_election(self, controller_epoch_zk_version: int) -> None:
        self.preferred_election_deleted += 1
        super().delete_preferred_election(controller_epoch_zk_version)

    def execute(self, op: ZkOperation) -> Any:
        self.ops.append(op)
        return executor.execute(self, op)

    def startup_event(self, live: Mapping[int, BrokerInfo], epoch: int = 1,
                      to_delete: Iterable[str] = ()) -> Startup:
        return Startup(controller_epoch=epoch, epoch_zk_version=EPOCH_ZK_VERSION,
                       brokers=dict(live), topics=dict(self.topics),
                       partition_states=dict(self.states),
                       topics_to_delete=frozenset(to_delete),
                       topic_configs={t: dict(c) for t, c in self.configs.items()})


def drive(core: ControllerCore, zk: FakeZk, event: Any, now_ms: int = 0) -> list[Effect]:
    """Handle one event to the end, executing ZooKeeper operations on ``zk``."""
    out: list[Effect] = []
    effects = core.handle(event, now_ms)
    while True:
        out.extend(effects)
        if effects and isinstance(effects[-1], ZkOperation):
            effects = core.complete(zk.execute(effects[-1]), now_ms)
        else:
            break
    crashes = [e for e in out if isinstance(e, Log) and "failed to handle" in e.message]
    assert not crashes, crashes
    assert not core.awaiting_result
    return out


def new_core(**settings: Any) -> ControllerCore:
    return ControllerCore(ControllerSettings(broker_id=CONTROLLER_ID, **settings))


def started(live: Iterable[int] = (1, 2, 3), topics: Mapping[str, Mapping[int, list[int]]]
            | None = None, **settings: Any) -> tuple[ControllerCore, FakeZk]:
    """An active controller with ``live`` brokers and ``topics`` created through events."""
    core, zk = new_core(**settings), FakeZk()
    drive(core, zk, zk.startup_event(brokers(*live)))
    if topics:
        for name, parts in topics.items():
            zk.add_topic(name, parts)
        drive(core, zk, TopicChange(frozenset(zk.topics)))
    return core, zk


def requests_of(effects: Iterable[Effect]) -> list[OutboundRequest]:
    return [r for e in effects if isinstance(e, SendRequests) for r in e.requests]


def of_type(effects: Iterable[Effect], cls: type) -> dict[int, Any]:
    """``{broker: request}`` for requests of ``cls``; asserts one per broker."""
    out: dict[int, Any] = {}
    for r in requests_of(effects):
        if isinstance(r.request, cls):
            assert r.broker_id not in out, f"two {cls.__name__} for broker {r.broker_id}"
            out[r.broker_id] = r.request
    return out


def leader_and_isr(effects: Iterable[Effect]) -> dict[int, LeaderAndIsrRequest]:
    return of_type(effects, LeaderAndIsrRequest)


def update_metadata(effects: Iterable[Effect]) -> dict[int, UpdateMetadataRequest]:
    """The *last* UpdateMetadata per broker (the event's outcome): failover and broker
    startup send a leading one first (see :func:`update_metadata_all`)."""
    out: dict[int, UpdateMetadataRequest] = {}
    for broker_id, requests in update_metadata_all(effects).items():
        out[broker_id] = requests[-1]
    return out


def update_metadata_all(effects: Iterable[Effect]) -> dict[int, list[UpdateMetadataRequest]]:
    """Every UpdateMetadata per broker, in sending order."""
    out: dict[int, list[UpdateMetadataRequest]] = {}
    for r in requests_of(effects):
        if isinstance(r.request, UpdateMetadataRequest):
            out.setdefault(r.broker_id, []).append(r.request)
    return out


def stop_replica(effects: Iterable[Effect]) -> dict[int, StopReplicaRequest]:
    return of_type(effects, StopReplicaRequest)


def partition_states(request: Any) -> dict[TopicPartition, Any]:
    """Partition states of a LeaderAndIsr/UpdateMetadata/StopReplica request by partition."""
    return {
        TopicPartition(t.topic_name, p.partition_index): p
        for t in request.topic_states for p in t.partition_states
    }


def leader_and_isr_states(effects: Iterable[Effect]) -> dict[int, dict[TopicPartition, Any]]:
    """The LeaderAndIsr partition states each broker got over all the event's batches (a
    later batch's state for a partition replaces an earlier one's)."""
    out: dict[int, dict[TopicPartition, Any]] = {}
    for r in requests_of(effects):
        if isinstance(r.request, LeaderAndIsrRequest):
            out.setdefault(r.broker_id, {}).update(partition_states(r.request))
    return out


def send_batches(effects: Iterable[Effect]) -> list[tuple[int, SendRequests]]:
    """``(index in effects, SendRequests)`` of each batch sent, in order."""
    return [(i, e) for i, e in enumerate(effects) if isinstance(e, SendRequests)]


def zk_ops(effects: Iterable[Effect], cls: type) -> list[Any]:
    return [e for e in effects if isinstance(e, cls)]


def logs(effects: Iterable[Effect], level: int | None = None) -> list[Log]:
    return [e for e in effects if isinstance(e, Log) and (level is None or e.level == level)]


def change_brokers(core: ControllerCore, zk: FakeZk, live: Mapping[int, BrokerInfo]
                   ) -> list[Effect]:
    return drive(core, zk, BrokerChange(dict(live)))

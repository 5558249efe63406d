"""Log dir failures on live brokers (JBOD, KIP-112): the controller's side (sans-I/O).

A broker whose log dir fails (but which still has online dirs) takes that dir's replicas
offline and writes ``/log_dir_event_notification/log_dir_event_<seq>`` with
``{"version":1,"broker":<id>,"event":1}``.  The controller's children watch enqueues a
:class:`LogDirEventNotification`; handling it is Kafka's
``KafkaController.processLogDirEventNotification`` → ``onBrokerLogDirFailure``: every
replica on the named live brokers is moved to OnlineReplica again, which sends them a
LeaderAndIsr (``is_new`` false).  The broker answers KAFKA_STORAGE_ERROR for the replicas in
its failed dirs; that answer (``LeaderAndIsrResult``, handled by the core) marks them
OfflineReplica and elects new leaders for the partitions they led.  The processed
notifications are then deleted (a fenced delete).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from weir.controller.effects import Log, ZkOperation
from weir.controller.scope import EventScope, ZkSteps
from weir.controller.states import ReplicaState

if TYPE_CHECKING:
    from weir.controller.core import ControllerCore

__all__ = ["LogDirEventNotification", "ZkDeleteLogDirEvents", "on_log_dir_event"]


@dataclass(frozen=True, slots=True)
class LogDirEventNotification:
    """The notifications under ``/log_dir_event_notification``: name → broker id."""

    events: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class ZkDeleteLogDirEvents(ZkOperation):
    """Delete these notifications, fenced by the controller epoch. Result: None."""

    names: tuple[str, ...]
    epoch_zk_version: int


def on_log_dir_event(core: ControllerCore, scope: EventScope,
                     event: LogDirEventNotification) -> ZkSteps[None]:
    """Kafka's ``onBrokerLogDirFailure`` for the live brokers named, then the deletion."""
    ctx = core.ctx
    brokers = sorted({b for b in event.events.values() if b in ctx.live_brokers})
    if brokers:
        replicas = ctx.replicas_on_brokers(brokers)
        scope.log(Log.info(f"Log dir failure on brokers {brokers}: sending LeaderAndIsr for "
                           f"their {len(replicas)} replicas to find the offline ones"))
        online = [r for r in replicas if ctx.replica_state(r) is ReplicaState.ONLINE]
        yield from core.replicas.handle_state_changes(scope, online, ReplicaState.ONLINE)
    if event.events:
        yield ZkDeleteLogDirEvents(tuple(sorted(event.events)), ctx.epoch_zk_version)

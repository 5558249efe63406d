"""A simulated ZooKeeper: the znodes the controller uses, as plain data.

Sessions own ephemeral nodes (``/brokers/ids/<id>``, ``/controller``); expiring a session
removes them.  Every controller write is fenced by ``/controller_epoch``'s version
(:class:`ControllerMovedError` otherwise) and partition states are written conditionally
on their version, like the real :class:`~weir.coordination.zk.ZkClient`.  Each write of a
partition state is checked against the safety invariants by :attr:`on_state_write`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

from weir.common import TopicPartition
from weir.controller.effects import (
    TopicsRead,
    ZkCreatePartitionStates,
    ZkDeletePreferredElection,
    ZkDeleteTopic,
    ZkOperation,
    ZkReadPartitionStates,
    ZkReadTopics,
    ZkUpdatePartitionStates,
)
from weir.controller.events import Startup
from weir.coordination.codecs import BrokerInfo, LeaderIsr, TopicAssignment
from weir.coordination.errors import (
    ControllerMovedError,
    ZkNodeExistsError,
    ZkNoNodeError,
    ZkVersionMismatchError,
)

__all__ = ["SimZk"]

Watcher = Callable[[str], None]


class SimZk:
    """The simulated ensemble (one consistent store; latency lives in the scheduler)."""

    def __init__(self) -> None:
        self.zxid = 0
        self.sessions: dict[int, bool] = {}
        self.brokers: dict[int, tuple[BrokerInfo, int]] = {}
        self.controller: tuple[int, int] | None = None
        self.controller_epoch = 0
        self.epoch_version = 0
        self.topics: dict[str, TopicAssignment] = {}
        self.states: dict[TopicPartition, LeaderIsr] = {}
        self.to_delete: set[str] = set()
        self.watchers: list[Watcher] = []
        self.on_state_write: Callable[[TopicPartition, LeaderIsr | None, LeaderIsr], None] = (
            lambda tp, old, new: None)
        self._next_session = 1
        self.writer = -1

    def _tick(self) -> int:
        self.zxid += 1
        return self.zxid

    def _notify(self, what: str) -> None:
        for watcher in list(self.watchers):
            watcher(what)

    # -- sessions and ephemeral nodes ------------------------------------------------------

    def open_session(self) -> int:
        session = self._next_session
        self._next_session += 1
        self.sessions[session] = True
        return session

    def expire(self, session: int) -> None:
        """Expire a session: its ephemeral nodes go (watchers are told)."""
        if not self.sessions.get(session):
            return
        self.sessions[session] = False
        gone = [b for b, (_, owner) in self.brokers.items() if owner == session]
        for b in gone:
            del self.brokers[b]
        if gone:
            self._notify("brokers")
        if self.controller is not None and self.controller[1] == session:
            self.controller = None
            self._notify("controller")

    def alive(self, session: int) -> bool:
        return bool(self.sessions.get(session))

    def register_broker(self, broker_id: int, session: int) -> int:
        """Create ``/brokers/ids/<id>``; returns the broker epoch (the czxid)."""
        if broker_id in self.brokers or not self.alive(session):
            raise ZkNodeExistsError(f"/brokers/ids/{broker_id}")
        epoch = self._tick()
        info = BrokerInfo(id=broker_id, host="sim", port=9000 + broker_id, rack=None,
                          epoch=epoch)
        self.brokers[broker_id] = (info, session)
        self._notify("brokers")
        return epoch

    def live_brokers(self) -> dict[int, BrokerInfo]:
        return {b: info for b, (info, _) in sorted(self.brokers.items())}

    def try_become_controller(self, broker_id: int, session: int) -> tuple[int, int] | None:
        """Ephemeral ``/controller`` plus the epoch bump, atomically."""
        if self.controller is not None or not self.alive(session):
            return None
        self.controller = (broker_id, session)
        self.controller_epoch += 1
        self.epoch_version += 1
        self._tick()
        self._notify("controller")
        return self.controller_epoch, self.epoch_version

    # -- admin side ------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: dict[int, list[int]]) -> None:
        self.topics[name] = TopicAssignment(name=name, topic_id=uuid.UUID(int=len(name) * 7919
                                                                           + self._tick()),
                                            partitions=partitions)
        self._notify("topics")

    def mark_for_deletion(self, name: str) -> None:
        if name in self.topics and name not in self.to_delete:
            self.to_delete.add(name)
            self._notify("delete_topics")

    def snapshot(self, epoch: int, version: int) -> Startup:
        return Startup(controller_epoch=epoch, epoch_zk_version=version,
                       brokers=self.live_brokers(), topics=dict(self.topics),
                       partition_states=dict(self.states),
                       topics_to_delete=frozenset(self.to_delete),
                       topic_configs={t: {} for t in self.topics})

    # -- controller operations -------------------------------------------------------------

    def execute(self, op: ZkOperation, session: int, writer: int = -1) -> Any:
        """Run one core operation for controller ``writer`` on ``session``."""
        self.writer = writer
        fenced = getattr(op, "epoch_zk_version", None)
        if not self.alive(session):
            raise ControllerMovedError("session expired")
        if fenced is not None and fenced != self.epoch_version:
            raise ControllerMovedError(f"epoch version {fenced} != {self.epoch_version}")
        if isinstance(op, ZkCreatePartitionStates):
            return {tp: self._create_state(tp, s) for tp, s in op.states.items()}
        if isinstance(op, ZkUpdatePartitionStates):
            return {tp: self._update_state(tp, s) for tp, s in op.states.items()}
        if isinstance(op, ZkReadPartitionStates):
            return {tp: self.states[tp] for tp in op.partitions if tp in self.states}
        if isinstance(op, ZkReadTopics):
            found = {t: self.topics[t] for t in op.topics if t in self.topics}
            return TopicsRead(found, {t: {} for t in found})
        if isinstance(op, ZkDeleteTopic):
            self._delete_topic(op.topic)
            return None
        if isinstance(op, ZkDeletePreferredElection):
            return None
        raise TypeError(f"unknown operation {op!r}")

    def _create_state(self, tp: TopicPartition, state: LeaderIsr) -> LeaderIsr | Exception:
        if tp.topic not in self.topics:
            return ZkNoNodeError(str(tp))
        if tp in self.states:
            return ZkNodeExistsError(str(tp))
        new = dataclasses.replace(state, zk_version=0, mzxid=self._tick())
        self.on_state_write(tp, None, new)
        self.states[tp] = new
        return new

    def _update_state(self, tp: TopicPartition, state: LeaderIsr) -> LeaderIsr | Exception:
        current = self.states.get(tp)
        if current is None:
            return ZkNoNodeError(str(tp))
        if current.zk_version != state.zk_version:
            return ZkVersionMismatchError(str(tp), state.zk_version)
        new = dataclasses.replace(state, zk_version=current.zk_version + 1, mzxid=self._tick())
        self.on_state_write(tp, current, new)
        self.states[tp] = new
        return new

    def _delete_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self.to_delete.discard(name)
        for tp in [tp for tp in self.states if tp.topic == name]:
            del self.states[tp]
        self._tick()
        self._notify("topics")
        self._notify("delete_topics")

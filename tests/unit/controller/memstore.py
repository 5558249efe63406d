"""A domain-level, in-memory ZooKeeper store for the controller core's unit tests.

:class:`MemoryZk` keeps the znodes the controller uses as plain data and implements
:class:`~weir.controller.store.ControllerStore` as :class:`~weir.coordination.zk.ZkClient`
does (writes fenced by ``/controller_epoch``'s version, partition states and topic
assignments conditional on their own versions), so the core's operations run through
:mod:`weir.controller.executor` without a ZooKeeper.  The simulation does not use it: it
runs the production ``ZkClient`` over the znode-level ensemble of :mod:`weir.sim.znodes`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from weir.common import TopicPartition
from weir.coordination import paths
from weir.coordination.codecs import BrokerInfo, LeaderIsr, TopicAssignment
from weir.coordination.errors import (
    ControllerMovedError,
    ZkNodeExistsError,
    ZkNoNodeError,
    ZkVersionMismatchError,
)
from weir.protocol.errors import ErrorCode, KafkaError

__all__ = ["MemoryZk", "MemoryZkClient"]

Schedule = Callable[[int, Callable[[], None]], None]
"""``schedule(delay_ms, fn)``: run ``fn`` later (the simulation's clock)."""


class _Watch:
    __slots__ = ("callback", "cancelled", "client", "kind", "path")

    def __init__(self, client: MemoryZkClient | None, kind: str, path: str,
                 callback: Callable[..., None]) -> None:
        self.client, self.kind, self.path, self.callback = client, kind, path, callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class MemoryZk:
    """The simulated ensemble (one consistent store; latency lives in ``schedule``)."""

    def __init__(self, schedule: Schedule | None = None,
                 latency: Callable[[], int] = lambda: 1) -> None:
        self.zxid = 0
        self.sessions: dict[int, bool] = {}
        self.brokers: dict[int, tuple[BrokerInfo, int]] = {}
        self.controller: tuple[int, int] | None = None
        self.controller_epoch = 0
        self.epoch_version = 0
        self.topics: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[TopicPartition, LeaderIsr] = {}
        self.to_delete: set[str] = set()
        self.reassignments: dict[TopicPartition, list[int]] = {}
        self.preferred: set[TopicPartition] = set()
        self.log_dir_events: dict[str, int] = {}
        self._log_dir_event_seq = 0  # the sequential znodes' counter
        self.on_state_write: Callable[[TopicPartition, LeaderIsr | None, LeaderIsr], None] = (
            lambda tp, old, new: None)
        """Called with (partition, old state or None, new state) before each state write."""
        self.writer = -1
        """The broker whose client made the current write (-1: not through a client)."""
        self.stamp_mzxid = True
        """Whether state znodes carry their write's zxid (False: -1, "not read from
        ZooKeeper", for tests whose broker epochs are not zxids of this store)."""
        self._schedule = schedule
        self._latency = latency
        self._next_session = 1
        self._watches: list[_Watch] = []
        self.clients: list[MemoryZkClient] = []

    def _tick(self) -> int:
        self.zxid += 1
        return self.zxid

    def _mzxid(self) -> int:
        zxid = self._tick()
        return zxid if self.stamp_mzxid else -1

    def _fence(self, controller_epoch_zk_version: int | None) -> None:
        if (controller_epoch_zk_version is not None
                and controller_epoch_zk_version != self.epoch_version):
            raise ControllerMovedError(f"controller epoch version {controller_epoch_zk_version}"
                                       f" != {self.epoch_version}")

    # -- watches ---------------------------------------------------------------------------

    def watch(self, client: MemoryZkClient | None, kind: str, path: str,
              callback: Callable[..., None]) -> _Watch:
        """Register a ``data`` or ``children`` watch; ``callback`` is called now."""
        watch = _Watch(client, kind, path, callback)
        self._watches.append(watch)
        self._call(watch)
        return watch

    def _call(self, watch: _Watch) -> None:
        if watch.cancelled or (watch.client is not None and not watch.client.connected):
            return
        if watch.kind == "children":
            watch.callback(self.children(watch.path))
        else:
            watch.callback(self.data(watch.path), None)

    def _changed(self, path: str, children_of: str | None = None) -> None:
        """``path``'s data changed (and, with ``children_of``, that node's children)."""
        self._watches = [w for w in self._watches if not w.cancelled]
        for watch in self._watches:
            if (watch.kind == "data" and watch.path == path) or (
                    watch.kind == "children" and watch.path == children_of):
                if self._schedule is None:
                    self._call(watch)
                else:
                    self._schedule(self._latency(), lambda w=watch: self._call(w))

    def children(self, path: str) -> list[str]:
        if path == paths.BROKER_IDS:
            return [str(b) for b in sorted(self.brokers)]
        if path == paths.BROKER_TOPICS:
            return sorted(self.topics)
        if path == paths.DELETE_TOPICS:
            return sorted(self.to_delete)
        if path == paths.LOG_DIR_EVENT_NOTIFICATION:
            return sorted(self.log_dir_events)
        return []  # /config/changes: no dynamic config changes are simulated

    def data(self, path: str) -> bytes | None:
        """The znode's data for a watch (non-empty bytes while it exists), or None."""
        exists = {
            paths.CONTROLLER: self.controller is not None,
            paths.REASSIGN_PARTITIONS: bool(self.reassignments),
            paths.PREFERRED_REPLICA_ELECTION: bool(self.preferred),
        }.get(path)
        if exists is None and path.startswith(paths.BROKER_TOPICS + "/"):
            exists = path.rpartition("/")[2] in self.topics
        return b"{}" if exists else None

    # -- sessions and ephemeral nodes ------------------------------------------------------

    def open_session(self) -> int:
        session = self._next_session
        self._next_session += 1
        self.sessions[session] = True
        return session

    def alive(self, session: int) -> bool:
        return bool(self.sessions.get(session))

    def expire(self, session: int) -> None:
        """Expire a session: its ephemeral nodes go, its clients hear ``LOST``."""
        if not self.sessions.get(session):
            return
        self.sessions[session] = False
        gone = [b for b, (_, owner) in self.brokers.items() if owner == session]
        for b in gone:
            del self.brokers[b]
        if gone:
            self._changed(paths.broker(gone[0]), children_of=paths.BROKER_IDS)
        if self.controller is not None and self.controller[1] == session:
            self.controller = None
            self._changed(paths.CONTROLLER)
        for client in self.clients:
            if client.session == session:
                client.session_event("LOST")

    def register_broker(self, broker_id: int, session: int) -> int:
        """Create ``/brokers/ids/<id>``; returns the broker epoch (the czxid)."""
        if broker_id in self.brokers or not self.alive(session):
            raise ZkNodeExistsError(paths.broker(broker_id))
        epoch = self._tick()
        info = BrokerInfo(id=broker_id, host="sim", port=9000 + broker_id, rack=None,
                          epoch=epoch)
        self.brokers[broker_id] = (info, session)
        self._changed(paths.broker(broker_id), children_of=paths.BROKER_IDS)
        return epoch

    def live_brokers(self) -> dict[int, BrokerInfo]:
        return {b: info for b, (info, _) in sorted(self.brokers.items())}

    def try_become_controller(self, broker_id: int, session: int) -> tuple[int, int] | None:
        """Ephemeral ``/controller`` plus the epoch bump, in one multi."""
        if self.controller is not None or not self.alive(session):
            return None
        self.controller = (broker_id, session)
        self.controller_epoch += 1
        self.epoch_version += 1
        self._tick()
        self._changed(paths.CONTROLLER)
        return self.controller_epoch, self.epoch_version

    def resign_controller(self, broker_id: int, session: int) -> None:
        if self.controller == (broker_id, session):
            self.controller = None
            self._changed(paths.CONTROLLER)

    # -- admin side (what kafka-topics / kafka-reassign-partitions write) ------------------

    def create_topic(self, name: str, partitions: Mapping[int, list[int]],
                     configs: Mapping[str, str] | None = None,
                     topic_id: uuid.UUID | None = None) -> TopicAssignment:
        zxid = self._tick()
        assignment = TopicAssignment(
            name=name, topic_id=topic_id or uuid.UUID(int=len(name) * 7919 + zxid),
            partitions={p: list(r) for p, r in partitions.items()}, zk_version=0)
        self.topics[name] = assignment
        self.configs[name] = dict(configs or {})
        self._changed(paths.topic(name), children_of=paths.BROKER_TOPICS)
        return assignment

    def mark_for_deletion(self, name: str) -> None:
        if name in self.topics and name not in self.to_delete:
            self.to_delete.add(name)
            self._changed(paths.delete_topic(name), children_of=paths.DELETE_TOPICS)

    def create_reassignments(self, reassignment: Mapping[TopicPartition, list[int]]) -> None:
        """``/admin/reassign_partitions`` (REASSIGNMENT_IN_PROGRESS while one exists)."""
        if self.reassignments:
            raise KafkaError(ErrorCode.reassignment_in_progress,
                             "a partition reassignment is in progress")
        self.reassignments = {tp: list(r) for tp, r in reassignment.items()}
        self._tick()
        self._changed(paths.REASSIGN_PARTITIONS)

    def create_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        if self.preferred:
            raise KafkaError(ErrorCode.unknown_server_error,
                             "a preferred replica election is in progress")
        self.preferred = set(partitions)
        self._tick()
        self._changed(paths.PREFERRED_REPLICA_ELECTION)

    # -- ControllerStore: reads ------------------------------------------------------------

    def get_all_brokers(self) -> dict[int, BrokerInfo]:
        return self.live_brokers()

    def get_controller_id(self) -> int | None:
        return None if self.controller is None else self.controller[0]

    def get_topic_names(self) -> list[str]:
        return sorted(self.topics)

    def get_topic(self, name: str) -> TopicAssignment | None:
        return self.topics.get(name)

    def get_topics(self, names: Iterable[str]) -> dict[str, TopicAssignment]:
        return {n: self.topics[n] for n in names if n in self.topics}

    def get_topic_configs(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        return {n: dict(self.configs.get(n, {})) for n in names}

    def get_partition_states(self, partitions: Iterable[TopicPartition]
                             ) -> dict[TopicPartition, LeaderIsr]:
        return {tp: self.states[tp] for tp in partitions if tp in self.states}

    def get_topics_to_delete(self) -> list[str]:
        return sorted(self.to_delete)

    def get_reassignments(self) -> dict[TopicPartition, list[int]]:
        return {tp: list(r) for tp, r in self.reassignments.items()}

    def get_preferred_election(self) -> set[TopicPartition]:
        return set(self.preferred)

    def get_log_dir_events(self) -> dict[str, int]:
        return dict(self.log_dir_events)

    def get_children(self, path: str) -> list[str]:
        return self.children(path)

    def get_data(self, path: str) -> tuple[bytes, Any] | None:
        data = self.data(path)
        return None if data is None else (data, None)

    # -- ControllerStore: fenced writes ----------------------------------------------------

    def create_partition_states(self, states: Mapping[TopicPartition, LeaderIsr],
                                controller_epoch_zk_version: int
                                ) -> dict[TopicPartition, LeaderIsr | Exception]:
        self._fence(controller_epoch_zk_version)
        return {tp: self._create_state(tp, s) for tp, s in states.items()}

    def update_partition_states(self, states: Mapping[TopicPartition, LeaderIsr],
                                controller_epoch_zk_version: int
                                ) -> dict[TopicPartition, LeaderIsr | Exception]:
        self._fence(controller_epoch_zk_version)
        return {tp: self._update_state(tp, s) for tp, s in states.items()}

    def _create_state(self, tp: TopicPartition, state: LeaderIsr) -> LeaderIsr | Exception:
        if tp.topic not in self.topics:
            return ZkNoNodeError(paths.partition_state(*tp))
        if tp in self.states:
            return ZkNodeExistsError(paths.partition_state(*tp))
        new = dataclasses.replace(state, zk_version=0, mzxid=self._mzxid())
        self.on_state_write(tp, None, new)
        self.states[tp] = new
        return new

    def _update_state(self, tp: TopicPartition, state: LeaderIsr) -> LeaderIsr | Exception:
        current = self.states.get(tp)
        if current is None:
            return ZkNoNodeError(paths.partition_state(*tp))
        if current.zk_version != state.zk_version:
            return ZkVersionMismatchError(paths.partition_state(*tp), state.zk_version)
        new = dataclasses.replace(state, zk_version=current.zk_version + 1,
                                  mzxid=self._mzxid())
        self.on_state_write(tp, current, new)
        self.states[tp] = new
        return new

    def set_topic_assignment(self, assignment: TopicAssignment, expected_version: int = -1,
                             controller_epoch_zk_version: int | None = None) -> int:
        self._fence(controller_epoch_zk_version)
        current = self.topics.get(assignment.name)
        if current is None:
            raise ZkNoNodeError(paths.topic(assignment.name))
        if expected_version != -1 and expected_version != current.zk_version:
            raise ZkVersionMismatchError(paths.topic(assignment.name), expected_version)
        version = current.zk_version + 1
        self.topics[assignment.name] = dataclasses.replace(assignment, zk_version=version)
        self._tick()
        self._changed(paths.topic(assignment.name))
        return version

    def delete_topic_znodes(self, name: str, controller_epoch_zk_version: int) -> None:
        self._fence(controller_epoch_zk_version)
        self.topics.pop(name, None)
        self.configs.pop(name, None)
        self.to_delete.discard(name)
        for tp in [tp for tp in self.states if tp.topic == name]:
            del self.states[tp]
        self._tick()
        self._changed(paths.topic(name), children_of=paths.BROKER_TOPICS)
        self._changed(paths.delete_topic(name), children_of=paths.DELETE_TOPICS)

    def delete_preferred_election(self, controller_epoch_zk_version: int) -> None:
        self._fence(controller_epoch_zk_version)
        if self.preferred:
            self.preferred = set()
            self._tick()
            self._changed(paths.PREFERRED_REPLICA_ELECTION)

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """A broker's log dir failed (Kafka's ``KafkaZkClient.propagateLogDirEvent``): a
        persistent sequential ``log_dir_event_<seq>`` znode naming it; returns its path."""
        name = f"log_dir_event_{self._log_dir_event_seq:010d}"
        self._log_dir_event_seq += 1
        self.log_dir_events[name] = broker_id
        self._tick()
        self._changed(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}",
                      children_of=paths.LOG_DIR_EVENT_NOTIFICATION)
        return f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}"

    def delete_log_dir_events(self, names: Iterable[str],
                              controller_epoch_zk_version: int) -> None:
        self._fence(controller_epoch_zk_version)
        for name in names:
            if self.log_dir_events.pop(name, None) is not None:
                self._changed(f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}",
                              children_of=paths.LOG_DIR_EVENT_NOTIFICATION)

    def set_reassignments(self, reassignment: Mapping[TopicPartition, list[int]],
                          controller_epoch_zk_version: int) -> None:
        self._fence(controller_epoch_zk_version)
        self.reassignments = {tp: list(r) for tp, r in reassignment.items()}
        self._tick()
        self._changed(paths.REASSIGN_PARTITIONS)


class MemoryZkClient:
    """One broker process's ZooKeeper connection (see the module docstring)."""

    def __init__(self, ensemble: MemoryZk, broker_id: int) -> None:
        self.ensemble = ensemble
        self.broker_id = broker_id
        self.session = ensemble.open_session()
        self.closed = False
        self._listeners: list[Callable[[str], None]] = []
        ensemble.clients.append(self)

    @property
    def connected(self) -> bool:
        return not self.closed and self.ensemble.alive(self.session)

    def close(self) -> None:
        """The process died: no more callbacks, every call fails."""
        self.closed = True
        if self in self.ensemble.clients:
            self.ensemble.clients.remove(self)

    def reconnect(self) -> None:
        """After an expiry: a new session (the broker re-registers), then ``CONNECTED``."""
        self.session = self.ensemble.open_session()

    def session_event(self, state: str) -> None:
        if not self.closed:
            for listener in list(self._listeners):
                listener(state)

    def _live(self) -> MemoryZk:
        if not self.connected:
            raise ControllerMovedError(f"broker {self.broker_id}: ZooKeeper session expired")
        self.ensemble.writer = self.broker_id
        return self.ensemble

    # -- ControllerZk ----------------------------------------------------------------------

    def add_session_listener(self, callback: Callable[[str], None]) -> None:
        self._listeners.append(callback)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> _Watch:
        return self.ensemble.watch(self, "children", path, callback)

    def watch_data(self, path: str, callback: Callable[[Any, Any], None]) -> _Watch:
        return self.ensemble.watch(self, "data", path, callback)

    def watch_broker(self, broker_id: int, callback: Callable[[], None]) -> _Watch:
        """Simulated brokers never rewrite their registration: nothing to watch."""
        return _Watch(self, "data", paths.broker(broker_id), callback)

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        return self._live().try_become_controller(broker_id, self.session)

    def resign_controller(self, broker_id: int) -> None:
        self._live().resign_controller(broker_id, self.session)

    def __getattr__(self, name: str) -> Any:
        """The reads and fenced writes of :class:`MemoryZk`, on a live session only."""
        if not name.startswith(("get_", "create_partition_states", "update_partition_states",
                                "set_", "delete_", "propagate_log_dir_event")) \
                or not hasattr(self.ensemble, name):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            # The session is checked, and the writer noted, when the call runs (the
            # executor may take the bound method well before).
            return getattr(self._live(), name)(*args, **kwargs)
        return call

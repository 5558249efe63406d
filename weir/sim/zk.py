"""The simulation's ZooKeeper: the production :class:`~weir.coordination.zk.ZkClient` over
the znode-level ensemble of :mod:`weir.sim.znodes`.

Nothing of the controller's ZooKeeper layer is restated here: a broker's connection,
:class:`SimZkClient`, *is* a ``ZkClient`` whose kazoo client is a
:class:`~weir.sim.znodes.SimKazoo` session, so the codecs, the fenced multi-ops of
:mod:`weir.coordination.fenced`, the controller writes of
:mod:`weir.coordination.controller_writes`, the batched ``multiRead`` reads, the election
multi and kazoo's watch recipes run under every seed.

:class:`SimZk` holds the tree and what the simulation does from outside the brokers:

- the admin tools' writes (``kafka-topics --create/--delete``, the old
  ``kafka-reassign-partitions`` and ``kafka-preferred-replica-election`` znodes) through
  an admin ``ZkClient`` session of its own, as ``AdminZkClient`` would;
- session expiry (the nemesis): the session's ephemeral nodes go, its clients hear
  ``LOST``;
- read-only views for the invariants (``topics``, ``states``, ``brokers``, ``controller``,
  ...), decoded from the znodes with the production codecs and cached until the next write;
- ``on_state_write``: every committed partition-state write, decoded, with
  :attr:`SimZk.writer` (the broker whose session made it).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.exceptions import ConnectionClosedError, SessionExpiredError

from weir.common import TopicPartition
from weir.coordination import codecs, paths
from weir.coordination.codecs import BrokerInfo, LeaderIsr, TopicAssignment
from weir.coordination.errors import ControllerMovedError
from weir.coordination.zk import ZkClient
from weir.sim.znodes import Schedule, SimKazoo, Znode, ZnodeTree

__all__ = ["SimZk", "SimZkClient"]

_STATE_PATH_PARTS = 7  # "", brokers, topics, <topic>, partitions, <partition>, state


class SimZk:
    """The simulated ensemble (see the module docstring)."""

    def __init__(self, schedule: Schedule | None = None,
                 latency: Callable[[], int] = lambda: 1,
                 now_ms: Callable[[], int] = lambda: 0) -> None:
        self.now_ms = now_ms
        """The clock of the timestamps the clients write into znodes (virtual time)."""
        self.tree = ZnodeTree(schedule, latency)
        self.tree.on_write = self._on_write
        self.on_state_write: Callable[[TopicPartition, LeaderIsr | None, LeaderIsr], None] = (
            lambda tp, old, new: None)
        """Called with (partition, old state or None, new state) for each state write."""
        self.clients: list[SimZkClient] = []
        self._views: dict[str, tuple[int, Any]] = {}
        self._nodes_decoded: dict[str, tuple[tuple[int, int], Any]] = {}
        self.admin = SimZkClient(self, -1)
        """The admin tools' session (kafka-topics, the reassignment tool)."""
        self.admin.ensure_paths()

    @property
    def writer(self) -> int:
        """The broker whose session made the current write (-1: an admin tool)."""
        return self.tree.writer

    # -- sessions --------------------------------------------------------------------------

    def alive(self, session: int) -> bool:
        return self.tree.alive(session)

    def expire(self, session: int) -> None:
        """Expire a session: its ephemeral nodes go, its clients hear ``LOST``."""
        if not self.tree.expire(session):
            return
        for client in list(self.clients):
            if client.session == session:
                client.session_event("LOST")

    def register_broker(self, broker_id: int, session: int) -> int:
        """The broker's registration through its own session's ``ZkClient``; the broker
        epoch (the registration's czxid)."""
        client = next(c for c in self.clients if c.session == session)
        return client.register_broker(BrokerInfo(id=broker_id, host="sim",
                                                 port=9000 + broker_id, rack=None))

    # -- admin side (what kafka-topics / kafka-reassign-partitions write) ------------------

    def create_topic(self, name: str, partitions: Mapping[int, list[int]],
                     configs: Mapping[str, str] | None = None,
                     topic_id: uuid.UUID | None = None) -> TopicAssignment:
        topic_id = topic_id or uuid.UUID(int=len(name) * 7919 + self.tree.zxid + 1)
        self.admin.create_topic(name, partitions, dict(configs or {}), topic_id)
        return self.topics[name]

    def mark_for_deletion(self, name: str) -> None:
        if name in self.topics:
            self.admin.mark_topic_for_deletion(name)

    def create_reassignments(self, reassignment: Mapping[TopicPartition, list[int]]) -> None:
        """``/admin/reassign_partitions`` (REASSIGNMENT_IN_PROGRESS while one exists)."""
        self.admin.create_reassignments(reassignment)

    def create_preferred_election(self, partitions: Iterable[TopicPartition]) -> None:
        self.admin.create_preferred_election(partitions)

    # -- views for the invariants (decoded with the production codecs) ---------------------

    def _view(self, name: str, build: Callable[[], Any]) -> Any:
        cached = self._views.get(name)
        if cached is not None and cached[0] == self.tree.zxid:
            return cached[1]
        value = build()
        self._views[name] = (self.tree.zxid, value)
        return value

    def _decoded(self, path: str, node: Znode, decode: Callable[[Znode], Any]) -> Any:
        """``decode(node)``, decoded once per version of the znode."""
        key = (node.czxid, node.mzxid)
        cached = self._nodes_decoded.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        value = decode(node)
        self._nodes_decoded[path] = (key, value)
        return value

    def _node(self, path: str) -> Znode | None:
        return self.tree.nodes.get(path)

    def _children(self, path: str) -> list[str]:
        node = self.tree.nodes.get(path)
        return [] if node is None else sorted(node.children)

    def data(self, path: str) -> bytes | None:
        node = self._node(path)
        return None if node is None else node.data

    def children(self, path: str) -> list[str]:
        return self._children(path)

    @property
    def topics(self) -> dict[str, TopicAssignment]:
        def build() -> dict[str, TopicAssignment]:
            out = {}
            for name in self._children(paths.BROKER_TOPICS):
                path = paths.topic(name)
                out[name] = self._decoded(
                    path, self.tree.nodes[path], lambda node, name=name:
                    codecs.decode_topic_assignment(name, node.data, zk_version=node.version))
            return out
        return self._view("topics", build)  # type: ignore[no-any-return]

    @property
    def configs(self) -> dict[str, dict[str, str]]:
        def build() -> dict[str, dict[str, str]]:
            out = {}
            for name in self.topics:
                node = self._node(paths.topic_config(name))
                out[name] = {} if node is None else codecs.decode_config(node.data)
            return out
        return self._view("configs", build)  # type: ignore[no-any-return]

    @property
    def states(self) -> dict[TopicPartition, LeaderIsr]:
        def build() -> dict[TopicPartition, LeaderIsr]:
            out = {}
            for name in self._children(paths.BROKER_TOPICS):
                for p in self._children(paths.topic_partitions(name)):
                    tp = TopicPartition(name, int(p))
                    path = paths.partition_state(*tp)
                    node = self._node(path)
                    if node is not None:
                        out[tp] = self._decoded(path, node, _decode_state)
            return out
        return self._view("states", build)  # type: ignore[no-any-return]

    @property
    def to_delete(self) -> set[str]:
        return self._view("to_delete",  # type: ignore[no-any-return]
                          lambda: set(self._children(paths.DELETE_TOPICS)))

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        def build() -> dict[int, BrokerInfo]:
            out = {}
            for name in self._children(paths.BROKER_IDS):
                node = self.tree.nodes[paths.broker(int(name))]
                out[int(name)] = codecs.decode_broker(int(name), node.data, epoch=node.czxid)
            return dict(sorted(out.items()))
        return self._view("brokers", build)  # type: ignore[no-any-return]

    def live_brokers(self) -> dict[int, BrokerInfo]:
        return self.brokers

    @property
    def controller(self) -> tuple[int, int] | None:
        """``(broker id, owning session)`` of ``/controller``, or None."""
        def build() -> tuple[int, int] | None:
            node = self._node(paths.CONTROLLER)
            return None if node is None else (codecs.decode_controller(node.data), node.owner)
        return self._view("controller", build)  # type: ignore[no-any-return]

    @property
    def controller_epoch(self) -> int:
        def build() -> int:
            node = self._node(paths.CONTROLLER_EPOCH)
            return 0 if node is None else codecs.decode_controller_epoch(node.data)
        return self._view("controller_epoch", build)  # type: ignore[no-any-return]

    @property
    def epoch_version(self) -> int:
        """``/controller_epoch``'s znode version (what every controller write is fenced by)."""
        node = self._node(paths.CONTROLLER_EPOCH)
        return 0 if node is None else node.version

    @property
    def reassignments(self) -> dict[TopicPartition, list[int]]:
        node = self._node(paths.REASSIGN_PARTITIONS)
        return {} if node is None or not node.data else codecs.decode_reassignment(node.data)

    @property
    def preferred(self) -> set[TopicPartition]:
        node = self._node(paths.PREFERRED_REPLICA_ELECTION)
        return (set() if node is None or not node.data
                else codecs.decode_preferred_election(node.data))

    @property
    def log_dir_events(self) -> dict[str, int]:
        return {name: codecs.decode_log_dir_event(
                    self.tree.nodes[f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{name}"].data)
                for name in self._children(paths.LOG_DIR_EVENT_NOTIFICATION)}

    # -- the state-write hook --------------------------------------------------------------

    def _on_write(self, path: str, old: Znode | None, new: Znode) -> None:
        parts = path.split("/")
        if (len(parts) != _STATE_PATH_PARTS or parts[-1] != "state"
                or parts[1:3] != ["brokers", "topics"]):
            return
        tp = TopicPartition(parts[3], int(parts[5]))
        cached = self._nodes_decoded.get(path)
        before = (None if old is None else cached[1]
                  if cached is not None and cached[0] == (old.czxid, old.mzxid)
                  else _decode_state(old))
        self.on_state_write(tp, before, self._decoded(path, new, _decode_state))


def _decode_state(node: Znode) -> LeaderIsr:
    return codecs.decode_leader_isr(node.data, zk_version=node.version, mzxid=node.mzxid)


class SessionGoneError(ControllerMovedError, SessionExpiredError):
    """kazoo's ``SessionExpiredError`` that the controller shell reads as
    :class:`ControllerMovedError`: a call on an expired session fails, and a controller
    resigns, as Kafka's does on its ZooKeeper session's expiry."""


class ClientClosedError(ControllerMovedError, ConnectionClosedError):
    """kazoo's ``ConnectionClosedError`` on a dead process's client (its controller is
    gone with it)."""


class SimZkClient(ZkClient):
    """One broker process's ZooKeeper connection: the production ``ZkClient`` on a
    :class:`~weir.sim.znodes.SimKazoo` session of the ensemble."""

    def __init__(self, ensemble: SimZk, broker_id: int) -> None:
        self.ensemble = ensemble
        self.broker_id = broker_id
        self.sim_kazoo = SimKazoo(ensemble.tree, writer=broker_id,
                                  closed_error=ClientClosedError,
                                  expired_error=SessionGoneError)
        super().__init__(f"sim:{broker_id}", client=self.sim_kazoo,  # type: ignore[arg-type]
                         now_ms=ensemble.now_ms)
        ensemble.clients.append(self)

    @property
    def session(self) -> int:
        return self.sim_kazoo.session

    def close(self) -> None:
        """The process died: no more callbacks, every call fails (the session stays until
        ZooKeeper expires it)."""
        self.sim_kazoo.close()
        if self in self.ensemble.clients:
            self.ensemble.clients.remove(self)

    def reconnect(self) -> None:
        """After an expiry: a new session (the broker re-registers), then ``CONNECTED``."""
        self.sim_kazoo.new_session()

    def session_event(self, state: str) -> None:
        self.sim_kazoo.session_event(state)

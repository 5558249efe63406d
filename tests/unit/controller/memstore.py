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
from collections.abc import Iterable, Mapping

from weir.common import TopicPartition
from weir.coordination import paths
from weir.coordination.codecs import LeaderIsr, TopicAssignment
from weir.coordination.errors import (
    ControllerMovedError,
    ZkNodeExistsError,
    ZkNoNodeError,
    ZkVersionMismatchError,
)

__all__ = ["MemoryZk"]


class MemoryZk:
    """The store (see the module docstring); fenced at :attr:`epoch_version`."""

    def __init__(self) -> None:
        self.zxid = 0
        self.epoch_version = 0
        self.topics: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[TopicPartition, LeaderIsr] = {}
        self.to_delete: set[str] = set()
        self.reassignments: dict[TopicPartition, list[int]] = {}
        self.preferred: set[TopicPartition] = set()
        self.log_dir_events: dict[str, int] = {}

    def _fence(self, controller_epoch_zk_version: int | None) -> None:
        if (controller_epoch_zk_version is not None
                and controller_epoch_zk_version != self.epoch_version):
            raise ControllerMovedError(f"controller epoch version {controller_epoch_zk_version}"
                                       f" != {self.epoch_version}")

    # -- what the admin tools write --------------------------------------------------------

    def create_topic(self, name: str, partitions: Mapping[int, list[int]],
                     configs: Mapping[str, str] | None = None,
                     topic_id: uuid.UUID | None = None) -> TopicAssignment:
        self.zxid += 1
        assignment = TopicAssignment(
            name=name, topic_id=topic_id or uuid.UUID(int=len(name) * 7919 + self.zxid),
            partitions={p: list(r) for p, r in partitions.items()}, zk_version=0)
        self.topics[name] = assignment
        self.configs[name] = dict(configs or {})
        return assignment

    # -- ControllerStore: reads ------------------------------------------------------------

    def get_topic(self, name: str) -> TopicAssignment | None:
        return self.topics.get(name)

    def get_topics(self, names: Iterable[str]) -> dict[str, TopicAssignment]:
        return {n: self.topics[n] for n in names if n in self.topics}

    def get_topic_configs(self, names: Iterable[str]) -> dict[str, dict[str, str]]:
        return {n: dict(self.configs.get(n, {})) for n in names}

    def get_partition_states(self, partitions: Iterable[TopicPartition]
                             ) -> dict[TopicPartition, LeaderIsr]:
        return {tp: self.states[tp] for tp in partitions if tp in self.states}

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
        # mzxid -1: "not read from ZooKeeper" (the tests' broker epochs are not zxids here)
        new = dataclasses.replace(state, zk_version=0, mzxid=-1)
        self.states[tp] = new
        return new

    def _update_state(self, tp: TopicPartition, state: LeaderIsr) -> LeaderIsr | Exception:
        current = self.states.get(tp)
        if current is None:
            return ZkNoNodeError(paths.partition_state(*tp))
        if current.zk_version != state.zk_version:
            return ZkVersionMismatchError(paths.partition_state(*tp), state.zk_version)
        new = dataclasses.replace(state, zk_version=current.zk_version + 1, mzxid=-1)
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
        self.zxid += 1
        return version

    def delete_topic_znodes(self, name: str, controller_epoch_zk_version: int) -> None:
        self._fence(controller_epoch_zk_version)
        self.topics.pop(name, None)
        self.configs.pop(name, None)
        self.to_delete.discard(name)
        for tp in [tp for tp in self.states if tp.topic == name]:
            del self.states[tp]
        self.zxid += 1

    def delete_preferred_election(self, controller_epoch_zk_version: int) -> None:
        self._fence(controller_epoch_zk_version)
        if self.preferred:
            self.preferred = set()
            self.zxid += 1

    def delete_log_dir_events(self, names: Iterable[str],
                              controller_epoch_zk_version: int) -> None:
        self._fence(controller_epoch_zk_version)
        for name in names:
            self.log_dir_events.pop(name, None)

    def set_reassignments(self, reassignment: Mapping[TopicPartition, list[int]],
                          controller_epoch_zk_version: int) -> None:
        self._fence(controller_epoch_zk_version)
        self.reassignments = {tp: list(r) for tp, r in reassignment.items()}
        self.zxid += 1

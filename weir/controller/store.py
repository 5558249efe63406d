"""What the controller needs of ZooKeeper, as protocols (no I/O here).

:class:`ControllerStore` is the set of fenced reads and writes that the core's
:class:`~weir.controller.effects.ZkOperation` s map to (see
:mod:`weir.controller.executor`); :class:`ControllerZk` adds what the asyncio shell
(:class:`~weir.controller.service.ControllerService`) reads and watches itself: the
``/controller`` election (Kafka's KafkaZkClient.registerControllerAndIncrementControllerEpoch),
the failover snapshot, the admin znodes and session state.

Every write takes the ``/controller_epoch`` znode version the controller won with
(``controller_epoch_zk_version``) and is applied in one multi with a check of that version,
as Kafka's ``KafkaZkClient`` does: a deposed controller's write fails with
:class:`~weir.coordination.errors.ControllerMovedError`.  Partition states and topic
assignments are also conditional on their own znode versions.

Implementation: :class:`weir.coordination.zk.ZkClient`, on kazoo and a real ensemble or, in
the simulation, on the znode-level fake of :mod:`weir.sim.znodes`
(:class:`weir.sim.zk.SimZkClient`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from weir.common import TopicPartition
from weir.coordination.codecs import BrokerInfo, LeaderIsr, TopicAssignment

__all__ = ["ControllerStore", "ControllerZk", "ZkWatch"]


class ControllerStore(Protocol):
    """The reads and fenced writes behind the core's ZooKeeper operations."""

    def create_partition_states(self, states: Mapping[TopicPartition, LeaderIsr],
                                controller_epoch_zk_version: int
                                ) -> Mapping[TopicPartition, Any]:
        """Create ``/brokers/topics/<t>/partitions/<p>/state`` znodes: per partition the
        stored state (zk_version 0) or the error (node exists, topic gone)."""
        ...

    def update_partition_states(self, states: Mapping[TopicPartition, LeaderIsr],
                                controller_epoch_zk_version: int
                                ) -> Mapping[TopicPartition, Any]:
        """Conditional updates (each at ``state.zk_version``): the new state (next version)
        or the error (version mismatch, no node) per partition."""
        ...

    def get_partition_states(self, partitions: Iterable[TopicPartition]
                             ) -> Mapping[TopicPartition, LeaderIsr]:
        """The states of the partitions that have a state znode."""
        ...

    def get_topic(self, name: str) -> TopicAssignment | None:
        """``/brokers/topics/<t>`` with its znode version, or None."""
        ...

    def get_topics(self, names: Iterable[str]) -> Mapping[str, TopicAssignment]:
        """The assignments of the named topics that exist."""
        ...

    def get_topic_configs(self, names: Iterable[str]) -> Mapping[str, Mapping[str, str]]:
        """``/config/topics/<t>`` overrides per topic (empty if none)."""
        ...

    def set_topic_assignment(self, assignment: TopicAssignment, expected_version: int = -1,
                             controller_epoch_zk_version: int | None = None) -> int:
        """Overwrite ``/brokers/topics/<t>`` at ``expected_version``; the new version."""
        ...

    def delete_topic_znodes(self, name: str, controller_epoch_zk_version: int) -> None:
        """Remove a topic's assignment tree, config and ``/admin/delete_topics`` mark."""
        ...

    def delete_preferred_election(self, controller_epoch_zk_version: int) -> None:
        """Delete ``/admin/preferred_replica_election``."""
        ...

    def delete_log_dir_events(self, names: Iterable[str],
                              controller_epoch_zk_version: int) -> None:
        """Delete processed ``/log_dir_event_notification`` children (KIP-112)."""
        ...

    def set_reassignments(self, reassignment: Mapping[TopicPartition, list[int]],
                          controller_epoch_zk_version: int) -> None:
        """Rewrite ``/admin/reassign_partitions`` (empty: delete it)."""
        ...


class ZkWatch(Protocol):
    """A registered watch; after ``cancel()`` its callback is not called again."""

    def cancel(self) -> None: ...


class ControllerZk(ControllerStore, Protocol):
    """Everything :class:`~weir.controller.service.ControllerService` uses."""

    def add_session_listener(self, callback: Callable[[str], None]) -> None:
        """``callback("LOST" | "CONNECTED" | ...)`` on session state changes."""
        ...

    def get_controller_id(self) -> int | None: ...

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Ephemeral ``/controller`` plus the ``/controller_epoch`` bump in one multi:
        ``(controller_epoch, its zk version)``, or None if another broker holds it."""
        ...

    def resign_controller(self, broker_id: int) -> None: ...

    def get_all_brokers(self) -> dict[int, BrokerInfo]: ...

    def get_topic_names(self) -> list[str]: ...

    def get_topics_to_delete(self) -> list[str]: ...

    def get_reassignments(self) -> Mapping[TopicPartition, list[int]]: ...

    def get_preferred_election(self) -> set[TopicPartition]: ...

    def get_log_dir_events(self) -> dict[str, int]: ...

    def get_children(self, path: str) -> list[str]: ...

    def get_data(self, path: str) -> tuple[bytes, Any] | None: ...

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> ZkWatch:
        """``callback(children)`` now and after every change of ``path``'s children."""
        ...

    def watch_data(self, path: str, callback: Callable[[Any, Any], None]) -> ZkWatch:
        """``callback(data, stat)`` now and on every change (``(None, None)``: gone)."""
        ...

    def watch_broker(self, broker_id: int, callback: Callable[[], None]) -> ZkWatch:
        """``callback()`` whenever the broker rewrites its live registration (Kafka's
        BrokerModificationsHandler; a new registration is a ``/brokers/ids`` children
        change)."""
        ...

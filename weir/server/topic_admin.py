"""TopicAdmin: every rule of creating topics, adding partitions and deleting topics.

Kafka's ``AdminZkClient`` (with ``AdminUtils``' replica placement and ``Topic``'s name rules),
over a narrow znode interface (:class:`TopicStore`, which :class:`weir.coordination.zk.ZkClient`
implements): CreateTopics, CreatePartitions, DeleteTopics, Metadata's auto-creation and the
coordinators' internal topics all go through it, so the rules and their error codes live here
once.  It is synchronous and does no I/O of its own; the broker calls it with
``asyncio.to_thread`` (:mod:`weir.server.admin`) and tests over an in-memory store.

The rules, in the order they are checked:

- create: the name (legal characters, at most 249, not ``.``/``..``), already in this broker's
  metadata (TOPIC_ALREADY_EXISTS), the config overrides (INVALID_CONFIG), ``-1`` partitions or
  replication factor mean ``num.partitions`` / ``default.replication.factor``, the assignment
  (a manual one: partitions numbered from 0, replicas distinct and registered, one
  replication factor; else Kafka's rack-unaware placement over the brokers registered in
  ``/brokers/ids``, refused before being built when it cannot fit in one znode), then, unless
  validate-only, ``/brokers/topics/<t>`` already there (TOPIC_ALREADY_EXISTS), the topic marked
  for deletion (TOPIC_ALREADY_EXISTS), the name among the topics listed for the collision check
  (TOPIC_ALREADY_EXISTS: created meanwhile by another broker), a name with '.' or '_' that
  collides with another once the two are equated (INVALID_TOPIC_EXCEPTION, Kafka's
  ``Topic.hasCollision``), and the write of config and assignment in one ZooKeeper transaction
  with a new topic id (TOPIC_ALREADY_EXISTS when another creation won the race).
- create partitions: the topic exists, the count grows, a manual assignment names every new
  partition with the topic's replication factor, the placement as above from the first new
  partition, and the conditional update of the assignment at the version it was read.
- delete: ``delete.topic.enable`` (TOPIC_DELETION_DISABLED), the topic exists
  (UNKNOWN_TOPIC_OR_PARTITION), then ``/admin/delete_topics/<t>`` (idempotent).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from weir.config import BrokerConfig, validate_topic_configs
from weir.controller.assignment import assign_replicas, check_counts
from weir.coordination.codecs import BrokerInfo, TopicAssignment
from weir.groups.codec import OFFSETS_TOPIC
from weir.protocol.errors import ErrorCode, KafkaError
from weir.transactions.codec import TRANSACTION_STATE_TOPIC

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

# ZooKeeper refuses a znode over jute.maxbuffer (1 MiB less one byte by default), and a topic's
# whole assignment lives in one: /brokers/topics/<t>.
ZNODE_MAX_BYTES = 0xFFFFF


class TopicStore(Protocol):
    """The znodes topic administration reads and writes (Kafka's ``KafkaZkClient`` calls
    made by ``AdminZkClient``)."""

    def get_all_brokers(self) -> Mapping[int, BrokerInfo]: ...

    def get_topic_names(self) -> list[str]: ...

    def get_topic(self, name: str) -> TopicAssignment | None: ...

    def topic_exists(self, name: str) -> bool: ...

    def is_topic_marked_for_deletion(self, name: str) -> bool: ...

    def create_topic(self, name: str, partitions: Mapping[int, list[int]],
                     configs: Mapping[str, str], topic_id: uuid.UUID | None = None) -> uuid.UUID:
        """Config and assignment in one transaction; TOPIC_ALREADY_EXISTS if it is there."""
        ...

    def set_topic_assignment(self, assignment: TopicAssignment, expected_version: int = -1,
                             controller_epoch_zk_version: int | None = None) -> int:
        """Conditional overwrite of ``/brokers/topics/<t>``; the new znode version."""
        ...

    def mark_topic_for_deletion(self, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class TopicAdminSettings:
    """The broker configs topic administration reads: ``num.partitions``,
    ``default.replication.factor``, ``delete.topic.enable`` (defaults come from the key
    table, through :meth:`from_config`)."""

    num_partitions: int
    default_replication_factor: int
    delete_topic_enable: bool

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TopicAdminSettings:
        return cls(num_partitions=config.num_partitions,
                   default_replication_factor=config.default_replication_factor,
                   delete_topic_enable=config.delete_topic_enable)


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """How a coordinator's internal topic is created."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


def offsets_topic(config: Any, live_brokers: int) -> InternalTopic:
    """``__consumer_offsets`` as Kafka's ``GroupCoordinator.offsetsTopicConfigs``
    (``offsets.topic.*``, compacted); the replication factor capped by the live brokers."""
    return InternalTopic(
        OFFSETS_TOPIC, config.offsets_topic_num_partitions,
        min(config.offsets_topic_replication_factor, live_brokers),
        {"cleanup.policy": "compact",
         "segment.bytes": str(config.offsets_topic_segment_bytes),
         "compression.type": "producer"})


def transaction_state_topic(config: Any, live_brokers: int) -> InternalTopic:
    """``__transaction_state`` as Kafka's ``TransactionStateManager.transactionTopicConfigs``
    (``transaction.state.log.*``, compacted, unclean election off)."""
    return InternalTopic(
        TRANSACTION_STATE_TOPIC, config.transaction_state_log_num_partitions,
        min(config.transaction_state_log_replication_factor, live_brokers),
        {"cleanup.policy": "compact",
         "min.insync.replicas": str(config.transaction_state_log_min_isr),
         "segment.bytes": str(config.transaction_state_log_segment_bytes),
         "unclean.leader.election.enable": "false", "compression.type": "uncompressed"})


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: INVALID_TOPIC_EXCEPTION for an illegal name."""
    if not name or name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL.match(name):
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"topic name {name!r} has characters other than ASCII "
                         "alphanumerics, '.', '_' and '-'")


def check_assignment_fits(total_partitions: int, replication_factor: int) -> None:
    """Refuse an assignment that cannot be stored, before building it: each partition takes
    at least ``"p":[r],`` in the JSON (6 bytes and two per replica). Kafka fails the same
    request only after building the assignment in memory; a request for 2**31 partitions must
    not be able to exhaust the broker's memory first."""
    least = total_partitions * (5 + 2 * replication_factor)
    if least > ZNODE_MAX_BYTES:
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"{total_partitions} partitions with replication factor {replication_factor} "
            f"cannot be stored: the assignment would exceed ZooKeeper's {ZNODE_MAX_BYTES}-byte "
            f"znode limit (jute.maxbuffer)")


def plan_assignment(live_brokers: Sequence[int], num_partitions: int, replication_factor: int,
                    manual: Mapping[int, list[int]] | None,
                    start_partition: int = 0) -> dict[int, list[int]]:
    """Replica assignment of new partitions over ``live_brokers`` (or checks a manual one)."""
    if manual:
        live = set(live_brokers)
        expected = list(range(start_partition, start_partition + len(manual)))
        if sorted(manual) != expected:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"partitions must be numbered {expected}, got {sorted(manual)}")
        sizes = {len(r) for r in manual.values()}
        for p, replicas in manual.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"partition {p}: replica list {replicas} is empty or repeats")
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"partition {p}: brokers {unknown} are not alive")
        if len(sizes) > 1:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             "all partitions must have the same replication factor")
        return {p: list(r) for p, r in manual.items()}
    # Kafka's checks of the counts first, then whether the assignment can be stored at all
    # (before it is built).
    check_counts(num_partitions, replication_factor, len(set(live_brokers)))
    check_assignment_fits(start_partition + num_partitions, replication_factor)
    return assign_replicas(live_brokers, num_partitions, replication_factor,
                           start_partition=start_partition)


class TopicAdmin:
    """Kafka's ``AdminZkClient``: topic creation, partition additions and deletion requests."""

    def __init__(self, store: TopicStore, settings: TopicAdminSettings) -> None:
        self.store = store
        self.settings = settings

    def registered_brokers(self, fallback: Iterable[int] = ()) -> list[int]:
        """The brokers registered in ZooKeeper (``/brokers/ids``): what Kafka's ZooKeeper-mode
        topic admin assigns replicas over (``AdminZkClient.getBrokerMetadatas``), rather than
        a broker's metadata cache, which may not yet have heard of a broker that has just
        registered; ``fallback`` (sorted) when none is."""
        return sorted(self.store.get_all_brokers()) or sorted(fallback)

    # -- create ------------------------------------------------------------------------------

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     manual: Mapping[int, list[int]] | None, configs: Mapping[str, str], *,
                     validate_only: bool = False, in_metadata_cache: bool = False,
                     fallback_brokers: Iterable[int] = (),
                     ) -> tuple[uuid.UUID | None, dict[int, list[int]]]:
        """Validate, place and (unless ``validate_only``) write a new topic.

        ``-1`` partitions or replication factor take the broker's defaults;
        ``in_metadata_cache``: the broker's metadata already lists the topic.  Returns the new
        topic id (None when validating only) and the assignment.
        """
        validate_topic_name(name)
        if in_metadata_cache:
            raise KafkaError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        validate_topic_configs(configs)
        if num_partitions == -1:
            num_partitions = self.settings.num_partitions
        if replication_factor == -1:
            replication_factor = self.settings.default_replication_factor
        assignment = plan_assignment(self.registered_brokers(fallback_brokers), num_partitions,
                                     replication_factor, manual)
        if validate_only:
            return None, assignment
        return self.create_topic_with_assignment(name, assignment, configs), assignment

    def create_topic_with_assignment(self, name: str, assignment: Mapping[int, list[int]],
                                     configs: Mapping[str, str],
                                     topic_id: uuid.UUID | None = None) -> uuid.UUID:
        """Kafka's ``AdminZkClient.createTopicWithAssignment``: ``validateTopicCreate`` then
        the config and assignment in one write; returns the topic id."""
        self.validate_topic_create(name)
        return self.store.create_topic(name, assignment, dict(configs), topic_id)

    def validate_topic_create(self, name: str) -> None:
        """The name is free: no topic, no pending deletion, no collision over '.' / '_'."""
        if self.store.topic_exists(name):
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if self.store.is_topic_marked_for_deletion(name):
            raise KafkaError(
                ErrorCode.topic_already_exists, f"Topic '{name}' is marked for deletion."
            )
        # Kafka's validateTopicCreate reads the topics once and checks "exists" in that same
        # list before collisions: a topic another broker created since the check above (two
        # producers auto-creating one new topic) exists, and collides with nothing but itself.
        names = self.store.get_topic_names()
        if name in names:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if "." in name or "_" in name:  # Kafka's Topic.hasCollisionChars
            collision = name.replace(".", "_")
            for other in names:
                if other.replace(".", "_") == collision:
                    raise KafkaError(
                        ErrorCode.invalid_topic_exception,
                        f"Topic '{name}' collides with existing topic: {other}",
                    )

    # -- add partitions ----------------------------------------------------------------------

    def create_partitions(self, name: str, count: int,
                          assignments: Sequence[Sequence[int]] | None, *,
                          validate_only: bool = False,
                          fallback_brokers: Iterable[int] = ()) -> dict[int, list[int]]:
        """Grow ``name`` to ``count`` partitions (CreatePartitions); the new partitions'
        assignment.  ``assignments``: the new partitions' replicas, in order, or None."""
        current = self.store.get_topic(name)
        if current is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} not found")
        have = len(current.partitions)
        if count <= have:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"topic {name!r} has {have} partitions; "
                             f"the new count must be larger, got {count}")
        rf = len(current.partitions[0])
        manual = None
        if assignments is not None:
            if len(assignments) != count - have:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"{count - have} new partitions but "
                                 f"{len(assignments)} assignments")
            manual = {have + i: [int(b) for b in a] for i, a in enumerate(assignments)}
            if any(len(r) != rf for r in manual.values()):
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"new partitions must have replication factor {rf}")
        added = plan_assignment(self.registered_brokers(fallback_brokers), count - have, rf,
                                manual, start_partition=have)
        if not validate_only:
            self.add_partitions(name, added, current.zk_version)
        return added

    def add_partitions(self, name: str, new_partitions: Mapping[int, list[int]],
                       expected_version: int) -> int:
        """Add partitions to the assignment (conditional on its znode version, Kafka's
        ``AdminZkClient.writeTopicPartitionAssignment`` with ``isUpdate``); new version."""
        current = self.store.get_topic(name)
        if current is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' not found.")
        clash = sorted(set(new_partitions) & set(current.partitions))
        if clash:
            raise KafkaError(ErrorCode.invalid_partitions, f"partitions {clash} already exist")
        merged = dict(current.partitions) | {p: list(r) for p, r in new_partitions.items()}
        updated = TopicAssignment(name, current.topic_id, merged, current.adding, current.removing)
        return self.store.set_topic_assignment(updated, expected_version)

    # -- delete ------------------------------------------------------------------------------

    def delete_topic(self, name: str) -> None:
        """Kafka's ``AdminZkClient.deleteTopic``: queue ``name`` for the controller."""
        if not self.settings.delete_topic_enable:
            raise KafkaError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        if not self.store.topic_exists(name):
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' not found.")
        self.store.mark_topic_for_deletion(name)


__all__ = [
    "MAX_TOPIC_NAME",
    "ZNODE_MAX_BYTES",
    "InternalTopic",
    "TopicAdmin",
    "TopicAdminSettings",
    "TopicStore",
    "check_assignment_fits",
    "offsets_topic",
    "plan_assignment",
    "transaction_state_topic",
    "validate_topic_name",
]

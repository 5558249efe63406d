"""TopicAdmin's rules (Kafka's AdminZkClient): over an in-memory znode store, and the same
tests over a real ZooKeeper through ZkClient, so the in-memory store cannot drift from it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from types import SimpleNamespace

import pytest

from weir.coordination.codecs import BrokerInfo, TopicAssignment
from weir.coordination.errors import ZkVersionMismatchError
from weir.protocol.errors import ErrorCode, KafkaError
from weir.server.topic_admin import (
    MAX_TOPIC_NAME,
    TopicAdmin,
    TopicAdminSettings,
    offsets_topic,
    plan_assignment,
    transaction_state_topic,
    validate_topic_name,
)

SETTINGS = TopicAdminSettings(num_partitions=3, default_replication_factor=2,
                              delete_topic_enable=True)


class MemoryTopicStore:
    """The znodes TopicAdmin uses, in memory, with ZkClient's semantics."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.marked: set[str] = set()

    def register_broker(self, info: BrokerInfo) -> None:
        self.brokers[info.id] = info

    def get_all_brokers(self) -> dict[int, BrokerInfo]:
        return dict(sorted(self.brokers.items()))

    def get_topic_names(self) -> list[str]:
        return sorted(self.topics)

    def get_topic(self, name: str) -> TopicAssignment | None:
        return self.topics.get(name)

    def topic_exists(self, name: str) -> bool:
        return name in self.topics

    def is_topic_marked_for_deletion(self, name: str) -> bool:
        return name in self.marked

    def get_topic_config(self, name: str) -> dict[str, str]:
        return dict(self.configs.get(name, {}))

    def get_topics_to_delete(self) -> list[str]:
        return sorted(self.marked)

    def create_topic(self, name: str, partitions: Mapping[int, list[int]],
                     configs: Mapping[str, str], topic_id: uuid.UUID | None = None) -> uuid.UUID:
        if name in self.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        topic_id = topic_id or uuid.uuid4()
        self.topics[name] = TopicAssignment(
            name, topic_id, {p: list(r) for p, r in partitions.items()}, zk_version=0)
        self.configs[name] = dict(configs)
        return topic_id

    def set_topic_assignment(self, assignment: TopicAssignment, expected_version: int = -1,
                             controller_epoch_zk_version: int | None = None) -> int:
        current = self.topics[assignment.name]
        if expected_version not in (-1, current.zk_version):
            raise ZkVersionMismatchError(f"/brokers/topics/{assignment.name}", expected_version)
        version = current.zk_version + 1
        self.topics[assignment.name] = TopicAssignment(
            assignment.name, assignment.topic_id, assignment.partitions, assignment.adding,
            assignment.removing, zk_version=version)
        return version

    def mark_topic_for_deletion(self, name: str) -> None:
        self.marked.add(name)


@pytest.fixture(params=["memory", "zookeeper"])
def store(request):
    if request.param == "memory":
        return MemoryTopicStore()
    return request.getfixturevalue("zk")


def broker(broker_id: int) -> BrokerInfo:
    return BrokerInfo(id=broker_id, host="127.0.0.1", port=9090 + broker_id, rack=None)


def register(store, *ids: int) -> None:
    for i in ids:
        store.register_broker(broker(i))


def error_of(call, *args, **kwargs) -> KafkaError:
    with pytest.raises(KafkaError) as err:
        call(*args, **kwargs)
    return err.value


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", ".", "..", "a" * (MAX_TOPIC_NAME + 1), "a b", "t/x",
                                  "ü", "t:1"])
def test_illegal_names_are_refused(name: str) -> None:
    assert error_of(validate_topic_name, name).code is ErrorCode.invalid_topic_exception


@pytest.mark.parametrize("name", ["a", "a.b", "a_b", "A-9", "." * 3, "a" * MAX_TOPIC_NAME])
def test_legal_names_pass(name: str) -> None:
    validate_topic_name(name)


# -- create ------------------------------------------------------------------------------------


def test_create_places_replicas_over_the_registered_brokers_and_writes(store) -> None:
    register(store, 1, 2, 3)
    admin = TopicAdmin(store, SETTINGS)
    topic_id, assignment = admin.create_topic("orders", 6, 3, None, {"retention.ms": "1000"})
    assert topic_id is not None
    assert sorted(assignment) == list(range(6))
    assert all(sorted(r) == [1, 2, 3] for r in assignment.values())
    # Leaders spread evenly (Kafka's rack-unaware placement).
    assert sorted(r[0] for r in assignment.values()) == [1, 1, 2, 2, 3, 3]
    written = store.get_topic("orders")
    assert written.topic_id == topic_id and written.partitions == assignment
    assert store.get_topic_config("orders") == {"retention.ms": "1000"}


def test_minus_one_takes_the_broker_defaults(store) -> None:
    register(store, 1, 2)
    _, assignment = TopicAdmin(store, SETTINGS).create_topic("t", -1, -1, None, {})
    assert len(assignment) == SETTINGS.num_partitions
    assert all(len(r) == SETTINGS.default_replication_factor for r in assignment.values())


def test_replication_factor_above_the_registered_brokers_is_refused(store) -> None:
    register(store, 1, 2)
    err = error_of(TopicAdmin(store, SETTINGS).create_topic, "t", 1, 3, None, {})
    assert err.code is ErrorCode.invalid_replication_factor
    assert err.message == "Replication factor: 3 larger than available brokers: 2"
    assert store.get_topic("t") is None


def test_no_registered_broker_falls_back_to_the_given_brokers(store) -> None:
    admin = TopicAdmin(store, SETTINGS)
    assert admin.registered_brokers([7, 5]) == [5, 7]
    register(store, 2)
    assert admin.registered_brokers([7, 5]) == [2]
    _, assignment = admin.create_topic("t", 2, 1, None, {}, fallback_brokers=[7])
    assert assignment == {0: [2], 1: [2]}


@pytest.mark.parametrize(("partitions", "rf", "code"), [
    (0, 1, ErrorCode.invalid_partitions), (-2, 1, ErrorCode.invalid_partitions),
    (1, 0, ErrorCode.invalid_replication_factor), (1, -2, ErrorCode.invalid_replication_factor),
])
def test_counts_below_one_are_refused(store, partitions: int, rf: int, code: ErrorCode) -> None:
    register(store, 1)
    assert error_of(TopicAdmin(store, SETTINGS).create_topic, "t", partitions, rf, None,
                    {}).code is code


def test_a_name_in_the_metadata_cache_already_exists_but_an_illegal_name_comes_first(
        store) -> None:
    register(store, 1)
    admin = TopicAdmin(store, SETTINGS)
    err = error_of(admin.create_topic, "t", 1, 1, None, {}, in_metadata_cache=True)
    assert (err.code, err.message) == (ErrorCode.topic_already_exists, "topic 't' already exists")
    err = error_of(admin.create_topic, "a b", 1, 1, None, {}, in_metadata_cache=True)
    assert err.code is ErrorCode.invalid_topic_exception


def test_bad_configs_are_refused_before_anything_is_placed(store) -> None:
    admin = TopicAdmin(store, SETTINGS)  # no broker registered: placement would fail too
    err = error_of(admin.create_topic, "t", 1, 1, None, {"no.such.config": "1"})
    assert err.code is ErrorCode.invalid_config
    assert "no.such.config" in err.message
    err = error_of(admin.create_topic, "t", 1, 1, None, {"retention.ms": "soon"})
    assert err.code is ErrorCode.invalid_config


def test_validate_only_checks_everything_but_writes_nothing(store) -> None:
    register(store, 1, 2)
    admin = TopicAdmin(store, SETTINGS)
    topic_id, assignment = admin.create_topic("t", 4, 2, None, {}, validate_only=True)
    assert topic_id is None and len(assignment) == 4
    assert store.get_topic("t") is None and store.get_topic_names() == []


def test_an_existing_topic_a_pending_deletion_and_a_collision_are_refused(store) -> None:
    register(store, 1)
    admin = TopicAdmin(store, SETTINGS)
    admin.create_topic("t", 1, 1, None, {})
    err = error_of(admin.create_topic, "t", 1, 1, None, {})
    assert (err.code, err.message) == (ErrorCode.topic_already_exists,
                                       "Topic 't' already exists.")
    admin.create_topic("a.b", 1, 1, None, {})
    err = error_of(admin.create_topic, "a_b", 1, 1, None, {})
    assert (err.code, err.message) == (ErrorCode.invalid_topic_exception,
                                       "Topic 'a_b' collides with existing topic: a.b")
    store.mark_topic_for_deletion("gone")  # its assignment already removed, the mark not yet
    err = error_of(admin.create_topic, "gone", 1, 1, None, {})
    assert (err.code, err.message) == (ErrorCode.topic_already_exists,
                                       "Topic 'gone' is marked for deletion.")


class _RacingStore(MemoryTopicStore):
    """Another broker creates the topic right after this one looked for it (two producers
    auto-creating one new topic through different brokers)."""

    def __init__(self, racer: str) -> None:
        super().__init__()
        self.racer = racer

    def topic_exists(self, name: str) -> bool:
        found = super().topic_exists(name)
        if name == self.racer and not found:
            super().create_topic(name, {0: [1]}, {})
        return found


@pytest.mark.parametrize("name", ["plain", "with.dot", "with_underscore"])
def test_a_topic_created_concurrently_already_exists_and_collides_with_nothing(name) -> None:
    store = _RacingStore(racer=name)
    register(store, 1)
    err = error_of(TopicAdmin(store, SETTINGS).create_topic, name, 1, 1, None, {})
    assert err.code == ErrorCode.topic_already_exists


def test_a_given_topic_id_is_kept(store) -> None:
    given = uuid.uuid4()
    admin = TopicAdmin(store, SETTINGS)
    assert admin.create_topic_with_assignment("fixed", {0: [1]}, {}, topic_id=given) == given
    assert store.get_topic("fixed").topic_id == given
    other = admin.create_topic_with_assignment("other", {0: [1]}, {})
    assert other not in (None, given)


@pytest.mark.parametrize(("manual", "message"), [
    ({1: [1], 2: [2]}, "partitions must be numbered [0, 1], got [1, 2]"),
    ({0: [1, 1]}, "partition 0: replica list [1, 1] is empty or repeats"),
    ({0: []}, "partition 0: replica list [] is empty or repeats"),
    ({0: [1, 9]}, "partition 0: brokers [9] are not alive"),
    ({0: [1, 2], 1: [2]}, "all partitions must have the same replication factor"),
])
def test_manual_assignments_are_checked(store, manual, message: str) -> None:
    register(store, 1, 2)
    err = error_of(TopicAdmin(store, SETTINGS).create_topic, "t", -1, -1, manual, {})
    assert (err.code, err.message) == (ErrorCode.invalid_replica_assignment, message)


def test_a_manual_assignment_is_written_as_given(store) -> None:
    register(store, 1, 2, 3)
    manual = {0: [3, 1], 1: [1, 2]}
    _, assignment = TopicAdmin(store, SETTINGS).create_topic("t", -1, -1, manual, {})
    assert assignment == manual and store.get_topic("t").partitions == manual


# -- add partitions ----------------------------------------------------------------------------


def test_partitions_are_added_after_the_existing_ones(store) -> None:
    register(store, 1, 2, 3)
    admin = TopicAdmin(store, SETTINGS)
    admin.create_topic("t", 2, 2, None, {})
    added = admin.create_partitions("t", 5, None)
    assert sorted(added) == [2, 3, 4] and all(len(r) == 2 for r in added.values())
    assert sorted(store.get_topic("t").partitions) == [0, 1, 2, 3, 4]


def test_partition_additions_are_checked(store) -> None:
    register(store, 1, 2)
    admin = TopicAdmin(store, SETTINGS)
    admin.create_topic("t", 2, 2, None, {})
    err = error_of(admin.create_partitions, "nope", 3, None)
    assert (err.code, err.message) == (ErrorCode.unknown_topic_or_partition,
                                       "topic 'nope' not found")
    err = error_of(admin.create_partitions, "t", 2, None)
    assert (err.code, err.message) == (
        ErrorCode.invalid_partitions,
        "topic 't' has 2 partitions; the new count must be larger, got 2")
    err = error_of(admin.create_partitions, "t", 4, [[1, 2]])
    assert (err.code, err.message) == (ErrorCode.invalid_replica_assignment,
                                       "2 new partitions but 1 assignments")
    err = error_of(admin.create_partitions, "t", 3, [[1]])
    assert (err.code, err.message) == (ErrorCode.invalid_replica_assignment,
                                       "new partitions must have replication factor 2")
    err = error_of(admin.create_partitions, "t", 3, [[1, 5]])
    assert (err.code, err.message) == (ErrorCode.invalid_replica_assignment,
                                       "partition 2: brokers [5] are not alive")
    assert len(store.get_topic("t").partitions) == 2


def test_manual_new_partitions_and_validate_only(store) -> None:
    register(store, 1, 2)
    admin = TopicAdmin(store, SETTINGS)
    admin.create_topic("t", 1, 2, None, {})
    assert admin.create_partitions("t", 2, [[2, 1]], validate_only=True) == {1: [2, 1]}
    assert len(store.get_topic("t").partitions) == 1
    assert admin.create_partitions("t", 2, [[2, 1]]) == {1: [2, 1]}
    assert store.get_topic("t").partitions[1] == [2, 1]


def test_add_partitions_is_conditional_on_the_version_read(store) -> None:
    register(store, 1)
    admin = TopicAdmin(store, SETTINGS)
    admin.create_topic("t", 1, 1, None, {})
    version = store.get_topic("t").zk_version
    assert admin.add_partitions("t", {1: [1]}, version) == version + 1
    with pytest.raises(ZkVersionMismatchError):  # someone else changed it since
        admin.add_partitions("t", {2: [1]}, version)
    err = error_of(admin.add_partitions, "t", {1: [1]}, version + 1)
    assert (err.code, err.message) == (ErrorCode.invalid_partitions,
                                       "partitions [1] already exist")
    err = error_of(admin.add_partitions, "nope", {0: [1]}, 0)
    assert (err.code, err.message) == (ErrorCode.unknown_topic_or_partition,
                                       "Topic 'nope' not found.")


# -- delete ------------------------------------------------------------------------------------


def test_delete_marks_the_topic_once(store) -> None:
    register(store, 1)
    admin = TopicAdmin(store, SETTINGS)
    admin.create_topic("t", 1, 1, None, {})
    admin.delete_topic("t")
    admin.delete_topic("t")  # idempotent
    assert store.get_topics_to_delete() == ["t"]
    err = error_of(admin.delete_topic, "missing")
    assert (err.code, err.message) == (ErrorCode.unknown_topic_or_partition,
                                       "Topic 'missing' not found.")


def test_delete_is_refused_when_disabled(store) -> None:
    register(store, 1)
    disabled = TopicAdminSettings(num_partitions=1, default_replication_factor=1,
                                  delete_topic_enable=False)
    admin = TopicAdmin(store, disabled)
    admin.create_topic("t", 1, 1, None, {})
    assert error_of(admin.delete_topic, "t").code is ErrorCode.topic_deletion_disabled
    assert error_of(admin.delete_topic, "missing").code is ErrorCode.topic_deletion_disabled
    assert store.get_topics_to_delete() == []


# -- internal topics and the assignment's size -------------------------------------------------


def _internal_config(**overrides):
    base = {"offsets_topic_num_partitions": 50, "offsets_topic_replication_factor": 3,
            "offsets_topic_segment_bytes": 104857600,
            "transaction_state_log_num_partitions": 50,
            "transaction_state_log_replication_factor": 3, "transaction_state_log_min_isr": 2,
            "transaction_state_log_segment_bytes": 104857600}
    return SimpleNamespace(**(base | overrides))


def test_internal_topics_are_compacted_with_their_replication_factor_capped() -> None:
    offsets = offsets_topic(_internal_config(offsets_topic_num_partitions=7), 2)
    assert (offsets.name, offsets.num_partitions, offsets.replication_factor) == (
        "__consumer_offsets", 7, 2)
    # Kafka's GroupCoordinator.offsetsTopicConfigs: compacted only (no time retention)
    assert offsets.configs == {"cleanup.policy": "compact", "segment.bytes": "104857600",
                               "compression.type": "producer"}
    txn = transaction_state_topic(_internal_config(), 5)
    assert (txn.name, txn.num_partitions, txn.replication_factor) == (
        "__transaction_state", 50, 3)
    # Kafka's TransactionStateManager.transactionTopicConfigs
    assert txn.configs == {"cleanup.policy": "compact", "min.insync.replicas": "2",
                           "segment.bytes": "104857600",
                           "unclean.leader.election.enable": "false",
                           "compression.type": "uncompressed"}


def test_internal_topics_are_created_through_the_admin(store) -> None:
    register(store, 1)
    topic = offsets_topic(_internal_config(offsets_topic_num_partitions=4), 1)
    TopicAdmin(store, SETTINGS).create_topic(topic.name, topic.num_partitions,
                                             topic.replication_factor, None, topic.configs)
    assert len(store.get_topic("__consumer_offsets").partitions) == 4
    assert store.get_topic_config("__consumer_offsets")["cleanup.policy"] == "compact"


BROKERS = [1, 2, 3]


def test_huge_partition_counts_are_refused_without_building_the_assignment():
    with pytest.raises(KafkaError) as err:
        plan_assignment(BROKERS, (1 << 31) - 1, 1, None)
    assert err.value.code == ErrorCode.invalid_partitions
    assert "jute.maxbuffer" in err.value.message


def test_too_few_brokers_is_named_before_the_size_of_the_assignment():
    """Kafka's AdminUtils refuses a replication factor above the brokers before placing."""
    with pytest.raises(KafkaError) as err:
        plan_assignment(BROKERS, (1 << 31) - 1, 4, None)
    assert err.value.code == ErrorCode.invalid_replication_factor
    assert err.value.message == "Replication factor: 4 larger than available brokers: 3"


def test_adding_partitions_counts_the_existing_ones():
    with pytest.raises(KafkaError):
        plan_assignment(BROKERS, 10, 3, None, start_partition=200_000)


def test_ordinary_sizes_are_planned():
    plan = plan_assignment(BROKERS, 1000, 3, None)
    assert len(plan) == 1000 and all(len(r) == 3 for r in plan.values())
    assert len(plan_assignment(BROKERS, 30_000, 3, None)) == 30_000


def test_the_broker_assigns_over_the_brokers_registered_in_zookeeper():
    """As Kafka's AdminZkClient: a broker registered a moment ago counts even before this
    broker's metadata cache has heard of it from the controller."""
    from weir.server import admin

    store = MemoryTopicStore()
    register(store, 1, 2, 3)
    config = SimpleNamespace(num_partitions=1, default_replication_factor=1,
                             delete_topic_enable=True)
    broker = SimpleNamespace(broker_id=1, config=config, zk=store,
                             metadata=SimpleNamespace(brokers={1: None}, topics={}))
    _, assignment = asyncio.run(admin.create_topic(broker, "t", 6, 3, None, {}))
    assert all(len(r) == 3 for r in assignment.values())
    assert store.get_topic("t").partitions == assignment

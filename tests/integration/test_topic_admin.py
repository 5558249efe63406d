"""TopicAdmin's rules as a real admin client meets them (CreateTopics, CreatePartitions and
DeleteTopics on a broker with ``delete.topic.enable=false``)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.conftest import wait_for
from tests.integration.conftest import _dump_logs, serve_cluster


@pytest.fixture(scope="module")
def no_delete(tmp_path_factory):
    """One broker that refuses topic deletion."""
    yield from serve_cluster(tmp_path_factory, 1, {"delete.topic.enable": "false"})


def _code(future) -> int:
    with pytest.raises(KafkaException) as err:
        future.result(30)
    return err.value.args[0].code()


def test_the_rules_reach_the_client_with_kafka_error_codes(no_delete, topic_name):
    admin = AdminClient({"bootstrap.servers": no_delete.bootstrap})
    try:
        admin.create_topics([NewTopic(topic_name, 2, 1)], operation_timeout=30)[
            topic_name].result(30)
        wait_for(lambda: len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 2,
                 30, what="the topic")

        # validate_only: everything is checked, nothing is written
        probe = f"{topic_name}-probe"
        admin.create_topics([NewTopic(probe, 3, 1)], operation_timeout=30,
                            validate_only=True)[probe].result(30)
        assert probe not in admin.list_topics(timeout=10).topics

        # '.' and '_' collide (Kafka's Topic.hasCollision)
        dotted = f"{topic_name}.x"
        admin.create_topics([NewTopic(dotted, 1, 1)], operation_timeout=30)[dotted].result(30)
        clash = f"{topic_name}_x"
        assert _code(admin.create_topics([NewTopic(clash, 1, 1)], operation_timeout=30)[
            clash]) == KafkaError.TOPIC_EXCEPTION

        def grow(count, assignment=None):
            new = (NewPartitions(topic_name, count) if assignment is None
                   else NewPartitions(topic_name, count, replica_assignment=assignment))
            return admin.create_partitions([new], operation_timeout=30)[topic_name]

        assert _code(grow(2)) == KafkaError.INVALID_PARTITIONS  # not larger
        assert _code(grow(4, [[1]])) == KafkaError.INVALID_REPLICA_ASSIGNMENT  # 2 new, 1 given
        missing = f"{topic_name}-missing"
        assert _code(admin.create_partitions([NewPartitions(missing, 3)], operation_timeout=30)[
            missing]) == KafkaError.UNKNOWN_TOPIC_OR_PART
        grow(3, [[1]]).result(30)
        wait_for(lambda: len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 3,
                 30, what="3 partitions")

        assert _code(admin.delete_topics([topic_name], operation_timeout=30)[
            topic_name]) == KafkaError.TOPIC_DELETION_DISABLED
        assert topic_name in admin.list_topics(timeout=10).topics
    except BaseException:
        _dump_logs(no_delete)
        raise

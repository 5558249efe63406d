"""Config and cluster admin over the Kafka protocol: confluent-kafka's AdminClient against
DescribeConfigs / IncrementalAlterConfigs / AlterConfigs / DescribeCluster, and the
``weir topic|group|config`` CLI run as a subprocess against a real 1-broker cluster."""

from __future__ import annotations

import sys

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from tests.conftest import wait_for
from tests.integration.clients import create_topic, produce
from tests.integration.conftest import serve_cluster

pytestmark = pytest.mark.integration

WEIR = [sys.executable, "-m", "weir"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One broker with log.retention.hours set in its server.properties."""
    yield from serve_cluster(tmp_path_factory, 1, {"log.retention.hours": "48"})


@pytest.fixture(scope="module")
def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def _topic(admin, name: str) -> ConfigResource:
    return ConfigResource(ConfigResource.Type.TOPIC, name)


def _describe(admin, res: ConfigResource) -> dict[str, ConfigEntry]:
    return admin.describe_configs([res], request_timeout=30)[res].result(30)


def _alter(admin, name: str, *ops: tuple[str, str | None, AlterConfigOpType]) -> None:
    res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops])
    admin.incremental_alter_configs([res], request_timeout=30)[res].result(30)


# -- DescribeConfigs ------------------------------------------------------------------------


def test_describe_configs_reports_kafka_sources(cluster, admin, topic_name):
    create_topic(cluster.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    configs = _describe(admin, _topic(admin, topic_name))
    policy, retention, segment = (configs["cleanup.policy"], configs["retention.ms"],
                                  configs["segment.bytes"])
    assert (policy.value, policy.source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert (retention.value, retention.source) == (
        str(48 * 3600 * 1000), ConfigSource.STATIC_BROKER_CONFIG.value)
    assert "log.retention.hours" in retention.synonyms
    assert (segment.source, segment.is_default) == (ConfigSource.DEFAULT_CONFIG.value, True)
    assert not policy.is_read_only and not policy.is_sensitive

    broker = ConfigResource(ConfigResource.Type.BROKER, str(cluster.broker_ids[0]))
    bconf = _describe(admin, broker)
    assert bconf["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert bconf["num.io.threads"].source == ConfigSource.DEFAULT_CONFIG.value
    assert bconf["num.io.threads"].is_read_only


# -- IncrementalAlterConfigs / AlterConfigs ---------------------------------------------------


def test_incremental_alter_sets_and_deletes_retention(cluster, admin, topic_name):
    create_topic(cluster.bootstrap, topic_name)
    _alter(admin, topic_name, ("retention.ms", "3600000", AlterConfigOpType.SET),
           ("cleanup.policy", "compact", AlterConfigOpType.APPEND))
    configs = _describe(admin, _topic(admin, topic_name))
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["cleanup.policy"].value == "delete,compact"
    zk_doc = cluster.zk().get_topic_config(topic_name)
    assert zk_doc == {"retention.ms": "3600000", "cleanup.policy": "delete,compact"}

    _alter(admin, topic_name, ("retention.ms", None, AlterConfigOpType.DELETE),
           ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    configs = _describe(admin, _topic(admin, topic_name))
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"


def test_invalid_values_are_refused_naming_the_key(cluster, admin, topic_name):
    create_topic(cluster.bootstrap, topic_name)
    with pytest.raises(KafkaException, match="retention.ms") as bad:
        _alter(admin, topic_name, ("retention.ms", "-5", AlterConfigOpType.SET))
    assert bad.value.args[0].name() == "INVALID_CONFIG"
    with pytest.raises(KafkaException, match="no.such.key"):
        _alter(admin, topic_name, ("no.such.key", "1", AlterConfigOpType.SET))
    with pytest.raises(KafkaException, match="segment.bytes") as bad:
        _alter(admin, topic_name, ("segment.bytes", "1", AlterConfigOpType.APPEND))
    assert bad.value.args[0].name() == "INVALID_CONFIG"
    assert "retention.ms" not in cluster.zk().get_topic_config(topic_name)

    broker = ConfigResource(ConfigResource.Type.BROKER, str(cluster.broker_ids[0]),
                            incremental_configs=[ConfigEntry(
                                "log.retention.ms", "1000",
                                incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="dynamic broker configs are not supported"):
        admin.incremental_alter_configs([broker], request_timeout=30)[broker].result(30)


def test_max_message_bytes_applies_live(cluster, admin, topic_name):
    """The change notification reaches the broker, which applies the new limit to the live
    log (min.insync.replicas would be capped at this 1-broker topic's replication factor)."""
    create_topic(cluster.bootstrap, topic_name)
    produce(cluster.bootstrap, topic_name, [b"x" * 4000])
    _alter(admin, topic_name, ("max.message.bytes", "1000", AlterConfigOpType.SET))

    def refused() -> bool:
        errors: list = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "retries": 0,
                             "message.timeout.ms": 5000})
        producer.produce(topic_name, b"y" * 4000,
                         on_delivery=lambda err, _m: errors.append(err))
        producer.flush(10)
        return bool(errors) and errors[0] is not None and "TOO_LARGE" in str(errors[0])

    wait_for(refused, 30, interval_s=0.5, what="a 4000-byte record refused at 1000 bytes")


def test_legacy_alter_configs_replaces_the_override_set(cluster, admin, topic_name):
    create_topic(cluster.bootstrap, topic_name, config={"retention.ms": "1000"})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name,
                         set_config={"segment.ms": "60000"})
    admin.alter_configs([res], request_timeout=30)[res].result(30)
    assert cluster.zk().get_topic_config(topic_name) == {"segment.ms": "60000"}


# -- DescribeCluster --------------------------------------------------------------------------


def test_describe_cluster(cluster, admin):
    desc = admin.describe_cluster(request_timeout=30).result(30)
    assert [n.id for n in desc.nodes] == cluster.broker_ids
    assert desc.controller is not None and desc.controller.id == cluster.broker_ids[0]
    assert desc.cluster_id

"""Config and cluster admin over the Kafka protocol: confluent-kafka's AdminClient against
DescribeConfigs / IncrementalAlterConfigs / AlterConfigs / DescribeCluster, and the
``weir topic|group|config`` CLI run as a subprocess against a real 1-broker cluster."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
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
    # Kafka's ConfigHelper lists retention.ms's broker synonyms from log.retention.ms on:
    # log.retention.hours, set in the file, is dropped, so the source is DEFAULT_CONFIG
    assert (retention.value, retention.source, retention.synonyms) == (
        str(48 * 3600 * 1000), ConfigSource.DEFAULT_CONFIG.value, {})
    assert (segment.source, segment.is_default) == (ConfigSource.DEFAULT_CONFIG.value, True)
    assert not policy.is_read_only and not policy.is_sensitive

    broker = ConfigResource(ConfigResource.Type.BROKER, str(cluster.broker_ids[0]))
    bconf = _describe(admin, broker)
    assert bconf["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert bconf["num.io.threads"].source == ConfigSource.DEFAULT_CONFIG.value
    # Kafka's DynamicThreadPool: num.io.threads changes live; zookeeper.connect does not.
    assert not bconf["num.io.threads"].is_read_only
    assert bconf["zookeeper.connect"].is_read_only


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
    # back to the file's log.retention.hours, which Kafka does not list as a synonym
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        str(48 * 3600 * 1000), ConfigSource.DEFAULT_CONFIG.value)
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
                                "num.partitions", "2",
                                incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically") as bad:
        admin.incremental_alter_configs([broker], request_timeout=30)[broker].result(30)
    assert bad.value.args[0].name() == "INVALID_REQUEST"


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


# -- the weir topic | config | group CLI ------------------------------------------------------


def weir(cluster, *args: str, use_data_dir: bool = False) -> subprocess.CompletedProcess:
    where = (["--data-dir", str(cluster.data_dir)] if use_data_dir
             else ["--bootstrap-server", cluster.bootstrap])
    return subprocess.run([*WEIR, *args, *where, "--timeout", "20"], capture_output=True,
                          text=True, timeout=90, check=False)


def ok_json(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def test_cli_topic_and_config_commands(cluster, topic_name):
    created = weir(cluster, "topic", "create", topic_name, "--partitions", "2",
                   "--replication-factor", "1", "--config", "retention.ms=3600000")
    assert created.returncode == 0, created.stderr
    assert topic_name in ok_json(weir(cluster, "topic", "list", "--json", use_data_dir=True))

    [desc] = ok_json(weir(cluster, "topic", "describe", topic_name, "--json"))
    assert (desc["partitions"], desc["replication_factor"]) == (2, 1)
    assert desc["configs"] == {"retention.ms": "3600000"}
    assert [p["leader"] for p in desc["partition_details"]] == cluster.broker_ids * 2
    text = weir(cluster, "topic", "describe", topic_name)
    assert "PartitionCount: 2" in text.stdout and "ISR" in text.stdout

    assert weir(cluster, "topic", "add-partitions", topic_name, "--partitions", "3"
                ).returncode == 0
    wait_for(lambda: ok_json(weir(cluster, "topic", "describe", topic_name, "--json")
                             )[0]["partitions"] == 3, 30, what="3 partitions")

    assert weir(cluster, "config", "set", "--topic", topic_name, "segment.ms=60000",
                "cleanup.policy=compact").returncode == 0
    assert weir(cluster, "topic", "alter-config", topic_name, "--delete", "retention.ms"
                ).returncode == 0
    got = ok_json(weir(cluster, "config", "get", "--topic", topic_name, "--json"))
    assert {r["name"]: (r["value"], r["source"]) for r in got["configs"]} == {
        "cleanup.policy": ("compact", "DYNAMIC_TOPIC_CONFIG"),
        "segment.ms": ("60000", "DYNAMIC_TOPIC_CONFIG")}
    one = ok_json(weir(cluster, "config", "get", "--topic", topic_name, "retention.ms",
                       "--json"))["configs"]
    assert [(r["value"], r["source"]) for r in one] == [
        (str(48 * 3600 * 1000), "DEFAULT_CONFIG")]
    assert weir(cluster, "config", "delete", "--topic", topic_name, "segment.ms"
                ).returncode == 0
    table = weir(cluster, "config", "get", "--topic", topic_name)
    assert "cleanup.policy" in table.stdout and "segment.ms" not in table.stdout

    bad = weir(cluster, "config", "set", "--topic", topic_name, "retention.ms=soon")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    assert "retention.ms" in bad.stderr
    missing = weir(cluster, "topic", "describe", "no-such-topic")
    assert missing.returncode == 1 and "no-such-topic" in missing.stderr

    assert weir(cluster, "topic", "delete", topic_name).returncode == 0
    wait_for(lambda: topic_name not in ok_json(weir(cluster, "topic", "list", "--json")),
             30, what="topic deleted")


def test_cli_group_list_and_describe_with_lag(cluster, topic_name):
    group = f"g-{topic_name}"
    create_topic(cluster.bootstrap, topic_name)
    produce(cluster.bootstrap, topic_name, [b"%d" % i for i in range(5)])
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "client.id": "cli-test", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic_name])
        seen = []
        deadline_polls = 120
        while len(seen) < 3 and deadline_polls:
            deadline_polls -= 1
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg)
        assert len(seen) == 3
        consumer.commit(message=seen[-1], asynchronous=False)

        listed = ok_json(weir(cluster, "group", "list", "--json"))
        assert group in [g["group"] for g in listed]
        desc = ok_json(weir(cluster, "group", "describe", group, "--json"))
        assert len(desc["members"]) == 1
        assert desc["members"][0]["client_id"] == "cli-test"
        assert desc["members"][0]["assignment"] == [{"topic": topic_name, "partition": 0}]
        [row] = desc["partitions"]
        assert (row["current_offset"], row["log_end_offset"], row["lag"]) == (3, 5, 2)
        assert row["member_id"] == desc["members"][0]["member_id"]
        text = weir(cluster, "group", "describe", group)
        assert "LAG" in text.stdout and "cli-test" in text.stdout
    finally:
        consumer.close()
    gone = weir(cluster, "group", "describe", "no-such-group")
    assert gone.returncode == 1 and "does not exist" in gone.stderr

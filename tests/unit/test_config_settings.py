"""Each settings object's ``from_config``: its values come from the broker config, and with
nothing set they are Kafka's defaults for the keys (the numbers below are Kafka's, from its
config classes: ``KafkaConfig``, ``ReplicationConfigs``, ``CleanerConfig``,
``GroupCoordinatorConfig``, ``ServerLogConfigs``), equal to the dataclass field defaults, which
the key table supplies."""

from __future__ import annotations

from dataclasses import fields

import pytest

from weir.config import BrokerConfig, default_value, topic_default
from weir.controller.settings import ControllerSettings
from weir.groups.state import GroupConfig
from weir.replication.fetcher import FetcherSettings
from weir.replication.leader_endpoint import BrokerEndPoint
from weir.replication.replica_manager import ReplicationSettings
from weir.storage.config import LogConfig
from weir.storage.log_cleaner import CleanerConfig

LONG_MAX = 2**63 - 1
BASE = {"broker.id": "7", "zookeeper.connect": "127.0.0.1:2181/weir"}


def make(**props: str) -> BrokerConfig:
    return BrokerConfig.from_dict({**BASE, **props})


def test_controller_settings_kafka_defaults() -> None:
    s = ControllerSettings.from_config(make())
    assert s == ControllerSettings(broker_id=7)
    assert (s.unclean_leader_election_enable, s.auto_leader_rebalance_enable) == (False, True)
    assert s.leader_imbalance_per_broker_percentage == 10
    assert s.leader_imbalance_check_interval_seconds == 300
    assert s.controller_socket_timeout_ms == 30000


def test_controller_settings_follow_the_config() -> None:
    s = ControllerSettings.from_config(make(**{
        "unclean.leader.election.enable": "true", "auto.leader.rebalance.enable": "false",
        "leader.imbalance.per.broker.percentage": "25",
        "leader.imbalance.check.interval.seconds": "5", "controller.socket.timeout.ms": "900"}))
    assert (s.unclean_leader_election_enable, s.auto_leader_rebalance_enable) == (True, False)
    assert (s.leader_imbalance_per_broker_percentage,
            s.leader_imbalance_check_interval_seconds, s.controller_socket_timeout_ms) == (25, 5, 900)


def test_log_config_kafka_defaults() -> None:
    c = LogConfig.from_config(make())
    assert c == LogConfig()
    assert c.segment_bytes == 1073741824 and c.segment_ms == 7 * 24 * 3600 * 1000
    assert c.retention_ms == 7 * 24 * 3600 * 1000 and c.retention_bytes == -1
    assert c.index_interval_bytes == 4096 and c.segment_index_bytes == 10485760
    assert c.max_message_bytes == 1048588 and c.message_timestamp_type == "CreateTime"
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.file_delete_delay_ms == 60000 and c.cleanup_policy == ("delete",)
    assert c.min_cleanable_dirty_ratio == 0.5 and c.min_compaction_lag_ms == 0
    assert c.max_compaction_lag_ms == LONG_MAX and c.delete_retention_ms == 86400000


def test_log_config_takes_broker_defaults_then_topic_overrides() -> None:
    broker = make(**{"log.retention.hours": "1", "log.segment.bytes": "4096",
                     "log.cleanup.policy": "compact"})
    c = LogConfig.from_config(broker, {"segment.bytes": "2048"})
    assert c.retention_ms == 3600 * 1000 and c.segment_bytes == 2048
    assert c.compact and not c.delete


def test_cleaner_config_kafka_defaults_and_values() -> None:
    c = CleanerConfig.from_config(make())
    assert c == CleanerConfig()
    assert (c.num_threads, c.dedupe_buffer_size, c.io_buffer_load_factor) == (
        1, 128 * 1024 * 1024, 0.9)
    assert c.max_io_bytes_per_second == 1.7976931348623157e308  # Double.MAX_VALUE
    assert c.backoff_ms == 15000 and c.enable_cleaner is True
    assert CleanerConfig.from_config(make(**{"log.cleaner.threads": "0"})).enable_cleaner is False
    assert CleanerConfig.from_config(make(**{"log.cleaner.enable": "false"})).enable_cleaner \
        is False
    assert CleanerConfig.from_config(make(**{"log.cleaner.backoff.ms": "20"})).backoff_ms == 20


def test_replication_and_fetcher_settings_kafka_defaults() -> None:
    s = ReplicationSettings.from_config(make(), security="sec")
    assert s.replica_lag_time_max_ms == 30000 == ReplicationSettings().replica_lag_time_max_ms
    f = s.fetcher
    assert f == FetcherSettings(replica_id=7, security="sec")
    assert (f.max_wait_ms, f.min_bytes, f.max_bytes, f.partition_max_bytes) == (
        500, 1, 10 * 1024 * 1024, 1024 * 1024)
    assert (f.backoff_ms, f.socket_timeout_ms) == (1000, 30000)
    assert f.receive_buffer_bytes == 65536  # replica.socket.receive.buffer.bytes


def test_fetcher_settings_follow_the_config() -> None:
    f = FetcherSettings.from_config(make(**{
        "replica.fetch.wait.max.ms": "50", "replica.fetch.min.bytes": "2",
        "replica.fetch.response.max.bytes": "3000", "replica.fetch.max.bytes": "1000",
        "replica.fetch.backoff.ms": "10", "replica.socket.timeout.ms": "99",
        "replica.socket.receive.buffer.bytes": "-1"}))
    assert (f.replica_id, f.max_wait_ms, f.min_bytes, f.max_bytes, f.partition_max_bytes,
            f.backoff_ms, f.socket_timeout_ms) == (7, 50, 2, 3000, 1000, 10, 99)
    assert f.receive_buffer_bytes == -1
    endpoint = f.remote_endpoint(BrokerEndPoint(1, "h", 9092))
    assert endpoint.receive_buffer_bytes == -1


def test_group_config_kafka_defaults_and_values() -> None:
    g = GroupConfig.from_config(make())
    assert g == GroupConfig()
    assert (g.min_session_timeout_ms, g.max_session_timeout_ms,
            g.initial_rebalance_delay_ms, g.max_size) == (6000, 1800000, 3000, 2**31 - 1)
    g = GroupConfig.from_config(make(**{"group.min.session.timeout.ms": "10",
                                        "group.max.size": "12"}))
    assert (g.min_session_timeout_ms, g.max_size) == (10, 12)


@pytest.mark.parametrize("cls", [ControllerSettings, LogConfig, CleanerConfig, GroupConfig,
                                 FetcherSettings, ReplicationSettings])
def test_every_settings_object_has_from_config(cls) -> None:
    assert callable(getattr(cls, "from_config", None))
    assert fields(cls)


def test_default_value_resolves_fallbacks() -> None:
    assert default_value("log.roll.ms") == 168 * 3600 * 1000
    assert default_value("zookeeper.connection.timeout.ms") == 18000
    assert default_value("log.dirs") == ["/tmp/kafka-logs"]
    assert default_value("broker.rack") is None
    assert topic_default("retention.ms") == default_value("log.retention.ms")
    assert topic_default("leader.replication.throttled.replicas") == []


def test_effective_value_of_raw_properties() -> None:
    from weir.config import ConfigError, effective_value

    assert effective_value({}, "zookeeper.session.timeout.ms") == 18000
    assert effective_value({"zookeeper.session.timeout.ms": " 6000 "},
                           "zookeeper.session.timeout.ms") == 6000
    assert effective_value({"log.dir": "/x"}, "log.dirs") == ["/x"]
    assert effective_value({"log.dirs": "/a,/b", "log.dir": "/x"}, "log.dirs") == ["/a", "/b"]
    assert effective_value({"log.retention.hours": "1"}, "log.retention.ms") == 3600000
    assert effective_value({}, "metrics.http.port") == -1
    with pytest.raises(ConfigError, match="metrics.http.port"):
        effective_value({"metrics.http.port": "x"}, "metrics.http.port")


def test_tls_settings_defaults_come_from_the_key_table() -> None:
    from weir.security.tls import TlsSettings

    s = TlsSettings()
    assert s == TlsSettings.from_lookup(lambda key: default_value(key))
    # Kafka's, but for the store types: Weir reads PEM stores only (KIP-651), no JKS
    assert (s.keystore_type, s.truststore_type) == ("PEM", "PEM")
    assert s.client_auth == "none" and s.enabled_protocols == ("TLSv1.2", "TLSv1.3")
    assert s.endpoint_identification_algorithm == "https"
    assert s.principal_mapping_rules == "DEFAULT"
    assert TlsSettings.from_lookup(lambda key: None).endpoint_identification_algorithm == ""


def test_coordinator_settings_kafka_defaults() -> None:
    from weir.groups.coordinator import GroupCoordinatorSettings
    from weir.transactions.coordinator import TransactionCoordinatorSettings

    g = GroupCoordinatorSettings.from_config(make())
    assert g == GroupCoordinatorSettings(broker_id=7, group=GroupConfig())
    assert (g.offsets_topic_num_partitions, g.offsets_retention_check_interval_ms,
            g.offsets_retention_minutes, g.offsets_commit_timeout_ms,
            g.offset_metadata_max_bytes) == (50, 600000, 10080, 5000, 4096)
    t = TransactionCoordinatorSettings.from_config(make())
    assert t == TransactionCoordinatorSettings(broker_id=7)
    assert (t.transaction_state_log_num_partitions, t.transaction_max_timeout_ms,
            t.request_timeout_ms, t.abort_timed_out_interval_ms, t.remove_expired_interval_ms,
            t.transactional_id_expiration_ms) == (50, 900000, 30000, 10000, 3600000, 604800000)
    t = TransactionCoordinatorSettings.from_config(make(**{"transaction.max.timeout.ms": "60"}))
    assert t.transaction_max_timeout_ms == 60


def test_topic_admin_settings_kafka_defaults() -> None:
    from weir.server.topic_admin import TopicAdminSettings

    s = TopicAdminSettings.from_config(make())
    assert (s.num_partitions, s.default_replication_factor, s.delete_topic_enable) == (1, 1, True)

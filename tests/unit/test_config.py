"""Broker/topic configuration: parsing, types, defaults, derived keys, validation, describe."""

from __future__ import annotations

import logging

import pytest

from weir.config import (
    BROKER_CONFIG_DEFS,
    LONG_MAX,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    describe_broker_config,
    describe_topic_config,
    parse_listener,
    parse_properties,
    read_properties,
    topic_config,
    validate_topic_configs,
    write_properties,
)
from weir.protocol.errors import ErrorCode, KafkaError

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/weir"}


def cfg(**extra: str) -> BrokerConfig:
    return BrokerConfig.from_dict({**BASE, **{k.replace("_", "."): v for k, v in extra.items()}})


def make(props: dict[str, str]) -> BrokerConfig:
    return BrokerConfig.from_dict({**BASE, **props})


# -- properties format --------------------------------------------------------------------


def test_parse_properties_separators_comments_and_continuations() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "broker.id=3\n"
        "  log.dirs : /a,\\\n"
        "      /b\n"
        "zookeeper.connect 127.0.0.1:2181/weir\n"
        "key\\ with\\ space = v\\u00e9\\tx\n"
        "empty=\n"
        "twice==x\n"
    )
    props = parse_properties(text)
    assert props == {
        "broker.id": "3",
        "log.dirs": "/a,/b",
        "zookeeper.connect": "127.0.0.1:2181/weir",
        "key with space": "v\u00e9\tx",
        "empty": "",
        "twice": "=x",
    }


def test_parse_properties_comment_lines_do_not_continue() -> None:
    assert parse_properties("# ends with \\\nk=v\n") == {"k": "v"}


def test_write_properties_creates_and_round_trips(tmp_path) -> None:
    path = tmp_path / "sub" / "server.properties"
    props = {"broker.id": 0, "log.dirs": "/x y/z", "weird key": " lead", "flag": True}
    write_properties(path, props, header="hello\nworld")
    text = path.read_text()
    assert text.startswith("# hello\n# world\n")
    assert read_properties(path) == {
        "broker.id": "0", "log.dirs": "/x y/z", "weird key": " lead", "flag": "true"}


def test_write_properties_updates_in_place_keeping_comments_and_order(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# top\nbroker.id=0\n# about zk\nzookeeper.connect=old:1\\\n/x\nnum.partitions=2\n")
    write_properties(path, {"zookeeper.connect": "new:2/weir", "log.retention.ms": "5"})
    lines = path.read_text().splitlines()
    assert lines == ["# top", "broker.id=0", "# about zk", "zookeeper.connect=new:2/weir",
                     "num.partitions=2", "log.retention.ms=5"]


# -- broker config: types, defaults, derived keys -----------------------------------------------


def test_defaults_match_kafka() -> None:
    c = make({})
    assert c.broker_id == 1
    assert c.zookeeper_session_timeout_ms == 18000
    assert c.zookeeper_connection_timeout_ms == 18000  # falls back to the session timeout
    assert c.num_partitions == 1 and c.default_replication_factor == 1
    assert c.auto_create_topics_enable is True and c.delete_topic_enable is True
    assert c.min_insync_replicas == 1 and c.unclean_leader_election_enable is False
    assert c.replica_lag_time_max_ms == 30000 and c.replica_fetch_wait_max_ms == 500
    assert c.replica_high_watermark_checkpoint_interval_ms == 5000
    assert c.log_retention_check_interval_ms == 300000
    assert c.log_flush_offset_checkpoint_interval_ms == 60000
    assert c.message_max_bytes == 1048588 and c.socket_request_max_bytes == 104857600
    assert c.controlled_shutdown_enable is True and c.controlled_shutdown_max_retries == 3
    assert c.controlled_shutdown_retry_backoff_ms == 5000
    assert c.leader_imbalance_per_broker_percentage == 10
    assert c.leader_imbalance_check_interval_seconds == 300
    assert c.offsets_topic_replication_factor == 3 and c.offsets_topic_num_partitions == 50
    assert c.offsets_retention_minutes == 10080 and c.group_initial_rebalance_delay_ms == 3000
    assert c.controller_socket_timeout_ms == 30000
    assert c.log_segment_bytes == 1073741824
    assert c.log_message_timestamp_type == "CreateTime"
    assert c.compression_type == "producer"
    assert c.log_cleanup_policy == ["delete"]
    assert c.broker_rack is None
    assert c.get("log.segment.bytes") == c.log_segment_bytes


def test_types_are_parsed() -> None:
    c = make({"num.partitions": " 7 ", "auto.create.topics.enable": "FALSE",
              "log.cleaner.min.cleanable.ratio": "0.25", "log.cleanup.policy": "compact, delete",
              "replica.lag.time.max.ms": "9999999999"})
    assert c.num_partitions == 7
    assert c.auto_create_topics_enable is False
    assert c.log_cleaner_min_cleanable_ratio == 0.25
    assert c.log_cleanup_policy == ["compact", "delete"]
    assert c.replica_lag_time_max_ms == 9999999999


def test_from_dict_accepts_typed_values() -> None:
    c = BrokerConfig.from_dict({"broker.id": 2, "zookeeper.connect": "zk:1",
                                "auto.create.topics.enable": False})
    assert c.broker_id == 2 and c.auto_create_topics_enable is False


def test_retention_falls_back_ms_minutes_hours() -> None:
    assert make({}).log_retention_ms == 168 * 3600 * 1000
    assert make({"log.retention.hours": "2"}).log_retention_ms == 2 * 3600 * 1000
    assert make({"log.retention.hours": "2", "log.retention.minutes": "3"}).log_retention_ms \
        == 3 * 60 * 1000
    assert make({"log.retention.minutes": "3", "log.retention.ms": "42"}).log_retention_ms == 42
    assert make({"log.retention.hours": "-1"}).log_retention_ms == -1


def test_roll_flush_dirs_and_advertised_fallbacks() -> None:
    c = make({"log.roll.hours": "1", "log.dir": "/data/k"})
    assert c.log_roll_ms == 3600 * 1000
    assert c.log_roll_jitter_ms == 0
    assert c.log_dirs == ["/data/k"]
    assert [str(p) for p in c.log_dir_paths] == ["/data/k"]
    assert make({"log.roll.ms": "77"}).log_roll_ms == 77
    assert make({}).log_flush_interval_ms == LONG_MAX
    assert make({"log.flush.scheduler.interval.ms": "100"}).log_flush_interval_ms == 100
    d = make({"log.dirs": "/a,/b", "log.dir": "/ignored"})
    assert [str(p) for p in d.log_dir_paths] == ["/a", "/b"]


def test_listeners_and_advertised() -> None:
    c = make({"listeners": "PLAINTEXT://127.0.0.1:9093"})
    assert (c.listener_host, c.listener_port) == ("127.0.0.1", 9093)
    assert (c.advertised_host, c.advertised_port) == ("127.0.0.1", 9093)
    d = make({"listeners": "PLAINTEXT://:9094", "advertised.listeners": "PLAINTEXT://kafka1:19094"})
    assert (d.listener_host, d.listener_port) == ("", 9094)
    assert (d.advertised_host, d.advertised_port) == ("kafka1", 19094)


def test_wildcard_listener_advertises_a_real_host() -> None:
    c = make({})  # PLAINTEXT://:9092
    assert c.listener_host == "" and c.listener_port == 9092
    assert c.advertised_host not in ("", "0.0.0.0")
    assert make({"listeners": "PLAINTEXT://0.0.0.0:1"}).listener_host == ""


def test_parse_listener_ipv6() -> None:
    assert parse_listener("PLAINTEXT://[::1]:9092") == ("PLAINTEXT", "::1", 9092)


# -- broker config: errors and warnings ---------------------------------------------------------


@pytest.mark.parametrize("missing", ["broker.id", "zookeeper.connect"])
def test_required_keys(missing: str) -> None:
    props = dict(BASE)
    del props[missing]
    with pytest.raises(ConfigError, match=missing):
        BrokerConfig.from_dict(props)


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("broker.id", "-1", "at least 0"),
    ("broker.id", "abc", "integer"),
    ("num.partitions", "0", "at least 1"),
    ("auto.create.topics.enable", "yes", "true or false"),
    ("compression.type", "bzip2", "one of"),
    ("log.message.timestamp.type", "Now", "CreateTime"),
    ("log.cleanup.policy", "delete,shred", "compact"),
    ("log.segment.bytes", "10", "at least 14"),
    ("num.partitions", "99999999999", "32-bit"),
    ("listeners", "localhost:9092", "NAME://host:port"),
    ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092", "wildcard"),
    ("log.cleaner.min.cleanable.ratio", "1.5", "between 0 and 1"),
])
def test_invalid_values_name_key_value_and_allowed(key: str, value: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        make({key: value})
    message = str(info.value)
    assert key in message and value in message and allowed in message
    assert isinstance(info.value, ValueError)


def test_unknown_key_warns_but_is_not_an_error(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="weir.config"):
        c = make({"no.such.key": "1"})
    assert c.unknown == ["no.such.key"]
    assert any("no.such.key" in r.getMessage() for r in caplog.records)


def test_from_file(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=5\nzookeeper.connect: zk:2181\nlog.segment.bytes 1024\n")
    c = BrokerConfig.from_file(path)
    assert (c.broker_id, c.zookeeper_connect, c.log_segment_bytes) == (5, "zk:2181", 1024)
    with pytest.raises(ConfigError, match="Cannot read"):
        BrokerConfig.from_file(tmp_path / "missing.properties")


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError):
        getattr(make({}), "not_a_config")  # noqa: B009


def test_every_definition_has_doc_and_type_code() -> None:
    for cdef in BROKER_CONFIG_DEFS.values():
        assert cdef.doc and isinstance(cdef.type_code, ConfigType)


# -- topic configs -------------------------------------------------------------------------


def test_topic_key_mapping() -> None:
    expected = {
        "retention.ms": "log.retention.ms", "segment.bytes": "log.segment.bytes",
        "segment.ms": "log.roll.ms", "min.insync.replicas": "min.insync.replicas",
        "unclean.leader.election.enable": "unclean.leader.election.enable",
        "max.message.bytes": "message.max.bytes",
        "message.timestamp.type": "log.message.timestamp.type",
        "retention.bytes": "log.retention.bytes", "index.interval.bytes": "log.index.interval.bytes",
        "segment.index.bytes": "log.index.size.max.bytes",
        "flush.messages": "log.flush.interval.messages", "flush.ms": "log.flush.interval.ms",
        "cleanup.policy": "log.cleanup.policy", "compression.type": "compression.type",
        "file.delete.delay.ms": "log.segment.delete.delay.ms",
        "delete.retention.ms": "log.cleaner.delete.retention.ms",
        "message.downconversion.enable": "log.message.downconversion.enable",
    }
    for topic_key, broker_key in expected.items():
        assert TOPIC_CONFIGS[topic_key].broker_key == broker_key
    assert TOPIC_CONFIGS["leader.replication.throttled.replicas"].broker_key is None


def test_validate_topic_configs_types() -> None:
    typed = validate_topic_configs({"retention.ms": "1000", "cleanup.policy": "compact",
                                    "unclean.leader.election.enable": "true",
                                    "leader.replication.throttled.replicas": "0:1,1:2"})
    assert typed == {"retention.ms": 1000, "cleanup.policy": ["compact"],
                     "unclean.leader.election.enable": True,
                     "leader.replication.throttled.replicas": ["0:1", "1:2"]}


@pytest.mark.parametrize(("overrides", "key"), [
    ({"retention.mss": "1"}, "retention.mss"),
    ({"segment.bytes": "lots"}, "segment.bytes"),
    ({"min.insync.replicas": "0"}, "min.insync.replicas"),
    ({"cleanup.policy": "keep"}, "cleanup.policy"),
    ({"follower.replication.throttled.replicas": "x"}, "follower.replication.throttled.replicas"),
])
def test_validate_topic_configs_errors(overrides: dict[str, str], key: str) -> None:
    with pytest.raises(KafkaError) as info:
        validate_topic_configs(overrides)
    assert info.value.code == ErrorCode.invalid_config
    assert key in info.value.message


def test_topic_config_merges_broker_defaults_and_overrides() -> None:
    broker = make({"log.retention.hours": "1", "log.segment.bytes": "2048"})
    eff = topic_config(broker, {"segment.bytes": "4096"})
    assert set(eff) == set(TOPIC_CONFIGS)
    assert eff["segment.bytes"] == 4096
    assert eff["retention.ms"] == 3600 * 1000
    assert eff["max.message.bytes"] == 1048588
    assert eff["cleanup.policy"] == ["delete"]
    assert eff["leader.replication.throttled.replicas"] == []
    assert topic_config(broker)["segment.bytes"] == 2048


def test_describe_topic_config_sources() -> None:
    broker = make({"log.retention.hours": "1"})
    entries = {e.name: e for e in describe_topic_config(broker, {"segment.bytes": "4096"})}
    seg, ret, mir = entries["segment.bytes"], entries["retention.ms"], entries["min.insync.replicas"]
    assert (seg.value, seg.source, seg.is_default) == ("4096", 1, False)
    # log.retention.hours in the file: Kafka drops it from retention.ms's synonyms
    assert (ret.value, ret.source, ret.is_default) == ("3600000", 5, True)
    assert (mir.value, mir.source, mir.is_default) == ("1", 5, True)
    assert seg.type == ConfigType.INT and ret.type == ConfigType.LONG
    assert entries["unclean.leader.election.enable"].value == "false"
    assert [s.name for s in seg.synonyms] == ["segment.bytes", "log.segment.bytes"]
    assert not seg.read_only and not seg.sensitive and seg.doc


def test_describe_broker_config() -> None:
    broker = make({"num.partitions": "4"})
    entries = {e.name: e for e in describe_broker_config(broker)}
    assert entries["num.partitions"].value == "4"
    assert entries["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG
    assert entries["log.segment.bytes"].is_default
    assert entries["broker.rack"].value is None
    assert entries["num.partitions"].read_only and entries["broker.id"].read_only
    assert not entries["log.segment.bytes"].read_only  # dynamic (DynamicLogConfig)
    assert not entries["max.connections"].read_only


def test_describe_topic_config_synonyms_in_kafka_order() -> None:
    broker = make({"min.insync.replicas": "2", "log.retention.hours": "24"})
    entries = {e.name: e for e in describe_topic_config(broker, {"min.insync.replicas": "3"})}
    mir = entries["min.insync.replicas"]
    assert (mir.value, mir.source) == ("3", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.value, s.source) for s in mir.synonyms] == [
        ("min.insync.replicas", "3", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("min.insync.replicas", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ("min.insync.replicas", "1", ConfigSource.DEFAULT_CONFIG)]
    # ConfigHelper.configSynonyms drops the unit synonyms before log.retention.ms: the
    # effective value, but no synonym and so DEFAULT_CONFIG (Kafka 3.x)
    ret = entries["retention.ms"]
    assert (ret.value, ret.source, ret.is_default, ret.synonyms) == (
        "86400000", ConfigSource.DEFAULT_CONFIG, True, [])
    seg = entries["segment.bytes"]  # left at its default: DEFAULT_CONFIG, one synonym
    assert (seg.source, seg.is_default) == (ConfigSource.DEFAULT_CONFIG, True)
    assert [(s.name, s.source) for s in seg.synonyms] == [
        ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG)]
    thr = entries["leader.replication.throttled.replicas"]  # no broker synonym
    assert (thr.source, thr.synonyms, thr.read_only) == (ConfigSource.DEFAULT_CONFIG, [], False)


def test_describe_topic_config_default_retention_lists_no_unit_synonym() -> None:
    entries = {e.name: e for e in describe_topic_config(make({}))}
    ret = entries["retention.ms"]
    assert (ret.value, ret.source, ret.is_default, ret.synonyms) == (
        "604800000", ConfigSource.DEFAULT_CONFIG, True, [])
    entries = {e.name: e for e in describe_topic_config(make({"log.retention.ms": "5000"}))}
    assert [(s.name, s.value, s.source) for s in entries["retention.ms"].synonyms] == [
        ("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]


def test_describe_broker_config_synonyms_start_at_the_key() -> None:
    broker = make({"log.retention.ms": "5000"})
    entries = {e.name: e for e in describe_broker_config(broker)}
    ms, hours = entries["log.retention.ms"], entries["log.retention.hours"]
    assert (ms.value, ms.source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.source) for s in ms.synonyms] == [
        ("log.retention.ms", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG)]
    assert (hours.source, hours.is_default) == (ConfigSource.DEFAULT_CONFIG, True)
    assert [s.name for s in hours.synonyms] == ["log.retention.hours"]
    assert entries["zookeeper.connect"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert entries["broker.rack"].synonyms == []


def test_broker_id_above_the_reserved_range_is_refused_while_ids_are_generated() -> None:
    base = {"broker.id": "1001", "zookeeper.connect": "z:1"}
    with pytest.raises(ConfigError, match="broker.id: must not be greater than "
                                          r"reserved.broker.max.id \(1000\)"):
        BrokerConfig(base)
    assert BrokerConfig({**base, "reserved.broker.max.id": "1001"}).broker_id == 1001
    assert BrokerConfig({**base, "broker.id.generation.enable": "false"}).broker_id == 1001


def test_secure_zookeeper_acls_are_refused_rather_than_ignored() -> None:
    base = {"broker.id": "1", "zookeeper.connect": "z:1"}
    assert BrokerConfig({**base, "zookeeper.set.acl": "false"}).broker_id == 1
    with pytest.raises(ConfigError, match="zookeeper.set.acl: secure ZooKeeper ACLs need"):
        BrokerConfig({**base, "zookeeper.set.acl": "true"})

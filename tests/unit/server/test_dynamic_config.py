"""Dynamic broker configs: precedence, validation, describe sources, log levels, and the
reconfiguration of the running parts (weir/server/dynamic_config.py)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from weir.config import BrokerConfig, ConfigSource, describe_broker_config, describe_topic_config
from weir.protocol.errors import ErrorCode, KafkaError
from weir.server.dynamic_config import (
    APPEND,
    DEFAULT_ENTITY,
    DELETE,
    SET,
    DynamicBrokerConfigs,
    alter_loggers,
    broker_entity,
    changed_keys,
    check_describe_name,
    describe_logger_resource,
    usable_stored,
    validated_config,
)
from weir.server.handlers.incremental_alter_configs import incremental
from weir.server.reconfigurables import broker_reconfigurables

STATIC = {"broker.id": "1", "zookeeper.connect": "zk:2181", "log.retention.ms": "1000",
          "min.insync.replicas": "2", "num.partitions": "3"}


def static(**extra: str) -> BrokerConfig:
    return BrokerConfig({**STATIC, **extra})


def error_of(fn, *args) -> KafkaError:
    with pytest.raises(KafkaError) as info:
        fn(*args)
    return info.value


def test_precedence_per_broker_over_default_over_static_over_builtin() -> None:
    cfg = static().with_dynamic({"min.insync.replicas": "3", "log.segment.bytes": "4096"},
                                {"min.insync.replicas": "4"})
    assert cfg.get("min.insync.replicas") == 4          # per broker
    assert cfg.get("log.segment.bytes") == 4096         # cluster default
    assert cfg.get("num.partitions") == 3               # server.properties
    assert cfg.get("log.retention.bytes") == -1         # built-in
    back = cfg.with_dynamic({"min.insync.replicas": "3"}, {})
    assert back.get("min.insync.replicas") == 3 and back.get("log.segment.bytes") == 1073741824


def test_a_dynamic_unit_synonym_hides_the_static_one() -> None:
    """DynamicBrokerConfig.overrideProps: a key set at a higher tier removes its synonyms
    set lower down, so dynamic log.retention.hours beats static log.retention.ms."""
    cfg = static().with_dynamic({"log.retention.hours": "2"}, {})
    assert cfg.get("log.retention.ms") == 2 * 3600000
    assert cfg.originals["log.retention.ms"] == "1000"  # the file is unchanged


def test_describe_reports_dynamic_sources_and_synonyms_in_order() -> None:
    cfg = static().with_dynamic({"min.insync.replicas": "3"}, {"min.insync.replicas": "4"})
    entry = {e.name: e for e in describe_broker_config(cfg)}["min.insync.replicas"]
    assert entry.value == "4" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert [(s.value, s.source) for s in entry.synonyms] == [
        ("4", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("3", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("2", ConfigSource.STATIC_BROKER_CONFIG),
        ("1", ConfigSource.DEFAULT_CONFIG)]
    assert not entry.read_only
    topic = {e.name: e for e in describe_topic_config(cfg, {})}["min.insync.replicas"]
    assert topic.value == "4" and topic.source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert [s.name for s in topic.synonyms] == ["min.insync.replicas"] * 4


def test_describe_of_the_default_resource_lists_only_default_keys() -> None:
    cfg = static().with_dynamic({"log.segment.bytes": "4096"}, {"min.insync.replicas": "4"})
    entries = describe_broker_config(cfg, per_broker=False)
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("log.segment.bytes", "4096", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    assert [s.source for s in entries[0].synonyms] == [
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]


def test_validation_errors_follow_kafka() -> None:
    cfg = static()
    exc = error_of(validated_config, cfg, {"broker.id": "2", "num.partitions": "4"}, "1")
    assert exc.code == ErrorCode.invalid_request
    assert exc.message == ("Invalid config value for resource ConfigResource(type=BROKER, "
                           "name='1'): Cannot update these configs dynamically: "
                           "Set(broker.id, num.partitions)")
    exc = error_of(validated_config, cfg, {"log.retention.bytes": "lots"}, "1")
    assert exc.code == ErrorCode.invalid_request and "log.retention.bytes" in exc.message
    exc = error_of(validated_config, cfg, {"min.insync.replicas": "0"}, "1")
    assert exc.code == ErrorCode.invalid_request and "at least 1" in exc.message
    new = validated_config(cfg, {"log.retention.bytes": "100"}, DEFAULT_ENTITY)
    assert new.get("log.retention.bytes") == 100 and new.dynamic_default


def test_custom_keys_are_stored_as_kafka_stores_them() -> None:
    """DynamicConfig.Broker.validate allows custom properties: a key Weir does not know (a
    topic-level name, a plugin's, a Kafka key Weir lacks) is kept, has no effect, and is
    described as Kafka describes a key of unknown type (sensitive, read-only, no value)."""
    cfg = static()
    new = validated_config(cfg, {"cleanup.policy": "delete", "my.plugin.key": "x"}, "1")
    assert new.dynamic_broker == {"cleanup.policy": "delete", "my.plugin.key": "x"}
    assert new.as_dict() == cfg.as_dict()
    new = validated_config(new, {"sasl.kerberos.min.time.before.relogin": "60000"}, "1")
    assert new.dynamic_broker == {"sasl.kerberos.min.time.before.relogin": "60000"}
    stored = {"my.plugin.key": "x", "broker.id": "5"}
    assert usable_stored(stored, "1") == {"my.plugin.key": "x"}
    described = {e.name: e for e in describe_broker_config(
        cfg.with_dynamic({"other.key": "d"}, {"my.plugin.key": "x"}))}
    mine = described["my.plugin.key"]
    assert (mine.value, mine.source, mine.sensitive, mine.read_only, mine.type) == (
        None, ConfigSource.DYNAMIC_BROKER_CONFIG, True, True, 0)
    assert [(s.name, s.value, s.source) for s in mine.synonyms] == [
        ("my.plugin.key", None, ConfigSource.DYNAMIC_BROKER_CONFIG)]
    assert described["other.key"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    default = describe_broker_config(cfg.with_dynamic({"other.key": "d"}, {}),
                                     per_broker=False)
    assert [(e.name, e.source) for e in default] == [
        ("other.key", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]


def test_per_broker_and_security_keys_follow_kafka() -> None:
    """DynamicBrokerConfig.validateConfigs: listener and SASL keys only per broker, the
    keystore/truststore keys only with a listener prefix."""
    cfg = static()
    prefix = "Invalid config value for resource ConfigResource(type=BROKER, name=''): "
    exc = error_of(validated_config, cfg,
                   {"sasl.kerberos.min.time.before.relogin": "60000"}, DEFAULT_ENTITY)
    assert (exc.code, exc.message) == (
        ErrorCode.invalid_request,
        prefix + "Cannot update these configs at default cluster level, broker id must be "
        "specified: Set(sasl.kerberos.min.time.before.relogin)")
    exc = error_of(validated_config, cfg, {"ssl.keystore.location": "/k.pem"}, "1")
    assert exc.code == ErrorCode.invalid_request
    assert exc.message.endswith("These security configs can be dynamically updated only "
                                "per-listener using the listener prefix: "
                                "Set(ssl.keystore.location)")
    # Weir reloads no listener's TLS settings live: read-only, as any other such key
    exc = error_of(validated_config, cfg,
                   {"listener.name.ssl.ssl.keystore.location": "/k.pem"}, "1")
    assert "Cannot update these configs dynamically" in exc.message


def test_thread_counts_change_by_at_most_a_factor_of_two() -> None:
    cfg = static()  # num.io.threads 8
    assert validated_config(cfg, {"num.io.threads": "16"}, "1").get("num.io.threads") == 16
    assert validated_config(cfg, {"num.io.threads": "4"}, DEFAULT_ENTITY).dynamic_default
    exc = error_of(validated_config, cfg, {"num.io.threads": "17"}, "1")
    assert exc.code == ErrorCode.invalid_request
    assert exc.message.endswith("Dynamic thread count update validation failed for "
                                "num.io.threads=17, value should not be greater than double "
                                "the current value 8")
    exc = error_of(validated_config, cfg, {"num.io.threads": "3"}, "1")
    assert "value should be at least half the current value 8" in exc.message


def test_resource_names() -> None:
    assert broker_entity("", 1) == DEFAULT_ENTITY
    assert broker_entity("1", 1) == "1"
    exc = error_of(broker_entity, "2", 1)
    assert exc.code == ErrorCode.invalid_request
    assert exc.message == "Unexpected broker id, expected 1, but received 2"
    assert error_of(broker_entity, "x", 1).message == \
        "Broker id must be an integer, but it is: x"
    assert check_describe_name("1", 1) is True and check_describe_name("", 1) is False
    assert error_of(check_describe_name, "3", 1).code == ErrorCode.invalid_request


def test_stored_entries_that_cannot_apply_are_ignored() -> None:
    stored = {"broker.id": "5", "bogus": "1", "log.retention.bytes": "x",
              "log.segment.bytes": "4096"}
    assert usable_stored(stored, "1") == {"bogus": "1", "log.segment.bytes": "4096"}
    # DynamicBrokerConfig.fromPersistentProps: per-broker keys stored as defaults are ignored
    stored = {"advertised.listeners": "PLAINTEXT://h:1", "log.segment.bytes": "4096"}
    assert usable_stored(stored, DEFAULT_ENTITY) == {"log.segment.bytes": "4096"}
    assert usable_stored(stored, "1") == stored


def test_incremental_ops_on_broker_keys() -> None:
    cfg = static()
    new = incremental({}, cfg.as_dict(), [("log.cleanup.policy", APPEND, "compact")], "broker")
    assert new == {"log.cleanup.policy": "delete,compact"}
    new = incremental({"log.segment.bytes": "4096"}, cfg.as_dict(),
                      [("log.segment.bytes", DELETE, None)], "broker")
    assert new == {}
    # a custom key is set and deleted as any other; it is no list to append to
    assert incremental({}, cfg.as_dict(), [("nope", SET, "1")], "broker") == {"nope": "1"}
    assert incremental({"nope": "1"}, cfg.as_dict(), [("nope", DELETE, None)], "broker") == {}
    exc = error_of(incremental, {}, cfg.as_dict(), [("nope", APPEND, "1")], "broker")
    assert exc.code == ErrorCode.invalid_config and exc.message.startswith("Unknown broker")


def test_changed_keys_are_the_effective_differences() -> None:
    cfg = static()
    assert changed_keys(cfg, cfg.with_dynamic({}, {})) == set()
    assert changed_keys(cfg, cfg.with_dynamic({"log.retention.hours": "1"}, {})) >= {
        "log.retention.ms", "log.retention.hours"}


def test_logger_levels() -> None:
    name = "weir.test.dynamic.logger"
    logger = logging.getLogger(name)
    parent = logging.getLogger("weir.test.dynamic")
    parent.setLevel(logging.ERROR)
    try:
        assert describe_logger_resource("1", 1)[name] == "ERROR"
        alter_loggers("1", 1, [(name, SET, "TRACE")], validate_only=True)
        assert logger.level == logging.NOTSET
        alter_loggers("1", 1, [(name, SET, "DEBUG")], validate_only=False)
        assert describe_logger_resource("1", 1)[name] == "DEBUG"
        alter_loggers("1", 1, [(name, DELETE, None)], validate_only=False)
        assert describe_logger_resource("1", 1)[name] == "ERROR"
    finally:
        parent.setLevel(logging.NOTSET)
    assert error_of(alter_loggers, "1", 1, [("no.such.logger", SET, "INFO")], False).code == \
        ErrorCode.invalid_config
    exc = error_of(alter_loggers, "1", 1, [(name, SET, "LOUD")], False)
    assert exc.code == ErrorCode.invalid_config and "Valid log levels are" in exc.message
    assert error_of(alter_loggers, "1", 1, [("root", DELETE, None)], False).code == \
        ErrorCode.invalid_request
    assert error_of(alter_loggers, "1", 1, [(name, APPEND, "INFO")], False).code == \
        ErrorCode.invalid_request
    assert error_of(alter_loggers, "2", 1, [(name, SET, "INFO")], False).code == \
        ErrorCode.invalid_request
    assert error_of(describe_logger_resource, "", 1).code == ErrorCode.invalid_request


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args: self.calls.append((name, *args))


def _dynamic(broker: SimpleNamespace, zk: object = None, **parts: object
             ) -> DynamicBrokerConfigs:
    """The shell over a stand-in broker's live config, with the given parts (recorders
    for the others)."""
    kwargs: dict[str, object] = {
        "topic_configs": SimpleNamespace(defaults_changed=lambda: None),
        "throttles": _Recorder(), "servers": lambda: [_Recorder()],
        "alter_log_dirs_quota": None, "cleaner": None, "controller": lambda: None}
    kwargs.update(parts)
    return DynamicBrokerConfigs(broker.broker_id, zk, lambda: broker.config,
                                lambda config: setattr(broker, "config", config),
                                broker_reconfigurables(**kwargs))  # type: ignore[arg-type]


def test_apply_reconfigures_only_what_changed() -> None:
    """BrokerReconfigurables: log defaults, throttles, connection limits, the controller."""
    log_defaults, throttles, sockets, controller = (_Recorder() for _ in range(4))
    broker = SimpleNamespace(broker_id=1, config=static())
    dynamic = _dynamic(broker, topic_configs=SimpleNamespace(
        defaults_changed=lambda: log_defaults.calls.append(1)), throttles=throttles,
        servers=lambda: [sockets], controller=lambda: controller)
    dynamic.apply(broker.config.with_dynamic({}, {}))
    assert not (log_defaults.calls or throttles.calls or sockets.calls or controller.calls)
    dynamic.apply(broker.config.with_dynamic(
        {"log.retention.bytes": "10", "follower.replication.throttled.rate": "1000"}, {}))
    assert log_defaults.calls == [1]
    assert throttles.calls == [("configure", 2**63 - 1, 1000)]
    assert not sockets.calls and not controller.calls
    dynamic.apply(broker.config.with_dynamic(
        broker.config.dynamic_default, {"max.connections": "5",
                                        "unclean.leader.election.enable": "true"}))
    assert sockets.calls[0][0] == "update_limits" and sockets.calls[0][1].max_connections == 5
    assert controller.calls == [("set_unclean_leader_election_enable", True)]
    assert broker.config.get("log.retention.bytes") == 10


class _FakeZk:
    """``/config/brokers/<entity>`` in memory; writes are recorded as notifications."""

    def __init__(self, stored: dict[str, dict[str, str]]) -> None:
        self.stored = stored
        self.notifications: list[str] = []

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        assert entity_type == "brokers"
        return dict(self.stored.get(name, {}))

    def set_entity_config(self, entity_type: str, name: str, configs) -> None:
        self.stored[name] = dict(configs)
        self.notifications.append(f"{entity_type}/{name}")


def _shell(stored: dict[str, dict[str, str]]):
    zk = _FakeZk(stored)
    broker = SimpleNamespace(broker_id=1, config=static())
    return broker, zk, _dynamic(broker, zk)


def test_reload_reads_both_tiers_and_skips_what_cannot_apply() -> None:
    import asyncio

    broker, _zk, dynamic = _shell({"<default>": {"log.segment.bytes": "4096",
                                                 "num.partitions": "9"},
                                   "1": {"min.insync.replicas": "x",
                                         "log.retention.bytes": "50"}})
    asyncio.run(dynamic.reload())
    assert broker.config.dynamic_default == {"log.segment.bytes": "4096"}
    assert broker.config.dynamic_broker == {"log.retention.bytes": "50"}
    assert broker.config.get("num.partitions") == 3
    assert broker.config.get("min.insync.replicas") == 2


def test_alter_stores_with_a_notification_and_applies_here() -> None:
    import asyncio

    broker, zk, dynamic = _shell({})

    def set_segment(current, effective):
        assert effective["log.segment.bytes"] == 1073741824
        return {**current, "log.segment.bytes": "8192"}

    asyncio.run(dynamic.alter("", set_segment, validate_only=True))
    assert zk.notifications == [] and broker.config.get("log.segment.bytes") == 1073741824
    asyncio.run(dynamic.alter("", set_segment, validate_only=False))
    assert zk.stored == {"<default>": {"log.segment.bytes": "8192"}}
    assert zk.notifications == ["brokers/<default>"]
    assert broker.config.get("log.segment.bytes") == 8192
    with pytest.raises(KafkaError) as info:
        asyncio.run(dynamic.alter("2", set_segment, validate_only=False))
    assert info.value.code == ErrorCode.invalid_request
    with pytest.raises(KafkaError):
        asyncio.run(dynamic.alter("1", lambda c, e: {"broker.rack": "r"}, validate_only=False))
    assert zk.notifications == ["brokers/<default>"]


def test_stop_waits_for_a_log_cleaner_restart_in_flight() -> None:
    """A log.cleaner.* change restarts the cleaner in the background (Kafka's
    LogCleaner.reconfigure); stopping the broker lets that restart finish before the cleaner
    is stopped, and the task is not left behind."""
    import asyncio

    async def scenario() -> list[str]:
        events: list[str] = []

        async def reconfigure(config) -> None:
            events.append(f"restart {config.num_threads}")
            await asyncio.sleep(0.01)
            events.append("restarted")

        broker = SimpleNamespace(broker_id=1, config=static())
        dynamic = _dynamic(broker, cleaner=SimpleNamespace(reconfigure=reconfigure))
        dynamic.apply(broker.config.with_dynamic({}, {"log.cleaner.threads": "2"}))
        await dynamic.stop()
        events.append("stopped")
        await dynamic.stop()  # nothing in flight: returns at once
        return events

    assert asyncio.run(scenario()) == ["restart 2", "restarted", "stopped"]

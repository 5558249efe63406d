"""Dynamic broker configs on a real 3-broker cluster: confluent-kafka's and kafka-python's
admin clients alter BROKER resources (one broker and the cluster default, stored in
``/config/brokers/<id>`` / ``<default>``), every broker applies them live through the
``/config/changes`` notification, DescribeConfigs reports the dynamic sources, bad changes
are refused with Kafka's codes, a restarted broker keeps its dynamic value, and
BROKER_LOGGER resources change log levels."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

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
from tests.integration.clients import create_topic, produce, raw_request
from tests.integration.conftest import serve_cluster

pytestmark = pytest.mark.integration

WEIR = [sys.executable, "-m", "weir"]
BROKER = ConfigResource.Type.BROKER
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers; retention checked every half second so that a retention change shows,
    followers fetching at most 16 KiB per partition so that a throttled copy takes many
    fetches."""
    for cluster in serve_cluster(tmp_path_factory, 3, {"log.retention.check.interval.ms": "500",
                                                       "min.insync.replicas": "1",
                                                       "replica.fetch.max.bytes": "16384"}):
        for slot in cluster.brokers:  # every broker's metadata cache knows all three
            one = AdminClient({"bootstrap.servers": f"{slot.host}:{slot.port}"})
            wait_for(lambda one=one: len(one.list_topics(timeout=5).brokers) == 3, 30,
                     what=f"broker {slot.id} knowing 3 brokers")
        yield cluster


@pytest.fixture(scope="module")
def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def _alter(admin, rtype, name: str, *ops: tuple[str, str | None, AlterConfigOpType],
           validate_only: bool = False) -> None:
    res = ConfigResource(rtype, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops])
    admin.incremental_alter_configs([res], request_timeout=30,
                                    validate_only=validate_only)[res].result(30)


def _alter_default(cluster, *ops: tuple[str, str | None, AlterConfigOpType],
                   via: int = 0) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on the cluster default (an empty BROKER name, which neither
    librdkafka nor kafka-python sends) to broker ``via``; (error code, message)."""
    slot = cluster.brokers[via]
    response = raw_request(slot.host, slot.port, 44, 1, validate_only=False, resources=[{
        "resource_type": 4, "resource_name": "", "configs": [
            {"name": k, "config_operation": 0 if op == SET else 1, "value": v}
            for k, v, op in ops]}])
    result = response.responses[0]
    return int(result.error_code), result.error_message


def _default_ok(cluster, *ops, via: int = 0) -> None:
    assert _alter_default(cluster, *ops, via=via) == (0, None)


def _describe_default(cluster, via: int = 0) -> dict[str, tuple[str, int, list]]:
    slot = cluster.brokers[via]
    response = raw_request(slot.host, slot.port, 32, 4, include_synonyms=True, resources=[{
        "resource_type": 4, "resource_name": "", "configuration_keys": None}])
    result = response.results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, int(c.config_source), [(s.name, s.value, int(s.source))
                                                      for s in c.synonyms])
            for c in result.configs}


def _describe(admin, rtype, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res], request_timeout=30)[res].result(30)


def _error_of(fn, *args, **kw) -> KafkaException:
    with pytest.raises(KafkaException) as info:
        fn(*args, **kw)
    return info.value


def _produce_error(cluster, topic: str, partition: int) -> str | None:
    """Produce one 5000-byte record (acks=all); None when acknowledged, else the error."""
    errors: list = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "retries": 0,
                         "message.timeout.ms": 8000})
    producer.produce(topic, bytes(5000), partition=partition,
                     on_delivery=lambda err, _m: errors.append(err))
    producer.flush(15)
    if not errors:
        return "no delivery report"
    return None if errors[0] is None else errors[0].name()


TOO_LARGE = "MSG_SIZE_TOO_LARGE"


def _leaders(admin, topic: str) -> dict[int, int]:
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    return {p.id: p.leader for p in meta.partitions.values()}


@pytest.fixture
def clean_dynamic(cluster, admin):
    """Remove every dynamic broker config the test left behind."""
    yield
    zk = cluster.zk()
    for entity in ["<default>", *map(str, cluster.broker_ids)]:
        if zk.get_entity_config("brokers", entity):
            zk.set_entity_config("brokers", entity, {})


def test_cluster_default_applies_live_on_every_broker(
        cluster, admin, topic_name, clean_dynamic):
    """message.max.bytes (the default of the topic's max.message.bytes) and
    min.insync.replicas as cluster defaults: every leader, one per broker, applies them."""
    create_topic(cluster.bootstrap, topic_name, partitions=3, replication=2)
    leaders = wait_for(lambda: (ls := _leaders(admin, topic_name)) and
                       len(set(ls.values())) == 3 and ls, 30, what="a leader on each broker")
    assert all(_produce_error(cluster, topic_name, p) is None for p in leaders)

    _default_ok(cluster, ("message.max.bytes", "1000", SET), ("min.insync.replicas", "2", SET))
    assert cluster.zk().get_entity_config("brokers", "<default>") == {
        "message.max.bytes": "1000", "min.insync.replicas": "2"}
    for p in leaders:
        wait_for(lambda p=p: _produce_error(cluster, topic_name, p) == TOO_LARGE,
                 30, interval_s=0.2, what=f"partition {p} refusing 5000 bytes")
    for b in cluster.broker_ids:
        entry = _describe(admin, BROKER, str(b))["min.insync.replicas"]
        assert (entry.value, entry.source) == (
            "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        topic_entry = _describe(admin, ConfigResource.Type.TOPIC, topic_name)[
            "max.message.bytes"]
        assert (topic_entry.value, topic_entry.source) == (
            "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

    described = _describe_default(cluster, via=2)  # the default resource: only its keys
    assert described["message.max.bytes"] == ("1000", 3, [("message.max.bytes", "1000", 3)])
    assert set(described) == {"message.max.bytes", "min.insync.replicas"}

    _default_ok(cluster, ("message.max.bytes", None, DELETE))
    for p in leaders:
        wait_for(lambda p=p: _produce_error(cluster, topic_name, p) is None, 30,
                 interval_s=0.2, what=f"partition {p} accepting 5000 bytes again")


def test_per_broker_value_wins_on_that_broker_only(cluster, admin, topic_name, clean_dynamic):
    create_topic(cluster.bootstrap, topic_name, partitions=3, replication=2)
    leaders = wait_for(lambda: (ls := _leaders(admin, topic_name)) and
                       len(set(ls.values())) == 3 and ls, 30, what="a leader on each broker")
    target = cluster.broker_ids[0]
    _default_ok(cluster, ("message.max.bytes", "2000000", SET))
    _alter(admin, BROKER, str(target), ("message.max.bytes", "1000", SET))
    assert cluster.zk().get_entity_config("brokers", str(target)) == {
        "message.max.bytes": "1000"}

    own = _describe(admin, BROKER, str(target))["message.max.bytes"]
    assert (own.value, own.source) == ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    other = cluster.broker_ids[1]
    theirs = _describe(admin, BROKER, str(other))["message.max.bytes"]
    assert (theirs.value, theirs.source) == (
        "2000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

    for p, leader in leaders.items():
        expected = TOO_LARGE if leader == target else None
        wait_for(lambda p=p, e=expected: _produce_error(cluster, topic_name, p) == e, 30,
                 interval_s=0.2, what=f"partition {p} led by {leader}: {expected}")


def test_segment_and_retention_defaults_apply_to_existing_logs(
        cluster, admin, topic_name, clean_dynamic):
    """log.segment.bytes and log.retention.bytes as cluster defaults reach every replica
    of a topic without overrides: segments roll small and old ones are deleted."""
    create_topic(cluster.bootstrap, topic_name, partitions=1, replication=3)
    _default_ok(cluster, ("log.segment.bytes", "2048", SET))

    def segments(broker_id: int) -> int:
        part = cluster.broker_dir(broker_id) / "logs" / f"{topic_name}-0"
        return len(list(part.glob("*.log")))

    for _ in range(12):  # one batch per call: a segment rolls before an append
        produce(cluster.bootstrap, topic_name, [bytes(1000)], acks="all")
    for b in cluster.broker_ids:
        wait_for(lambda b=b: segments(b) >= 10, 30, what=f"small segments on broker {b}")
    _default_ok(cluster, ("log.retention.bytes", "4096", SET))
    for b in cluster.broker_ids:  # ~1 KiB segments: at most 4096 bytes kept + the active one
        wait_for(lambda b=b: segments(b) <= 5, 30, what=f"retention on broker {b}")


def test_follower_throttle_applies_live(cluster, admin, kadmin, topic_name, clean_dynamic):
    """follower.replication.throttled.rate set dynamically on the broker receiving a new
    replica (a reassignment; the replica is outside the ISR and listed in the topic's
    follower.replication.throttled.replicas): the copy is held to a trickle, and removing
    the rate lets it finish."""
    from confluent_kafka.admin import NewTopic
    from kafka import TopicPartition as KTopicPartition

    source, target = cluster.broker_ids[0], cluster.broker_ids[1]
    fs = admin.create_topics([NewTopic(topic_name, 1, replica_assignment=[[source]])],
                             request_timeout=30)
    fs[topic_name].result(30)
    for _ in range(40):
        produce(cluster.bootstrap, topic_name, [bytes(10000)], partition=0)
    _alter(admin, ConfigResource.Type.TOPIC, topic_name,
           ("follower.replication.throttled.replicas", "*", SET))
    _alter(admin, BROKER, str(target), ("follower.replication.throttled.rate", "1", SET))

    def size(broker_id: int) -> int:
        part = cluster.broker_dir(broker_id) / "logs" / f"{topic_name}-0"
        return sum(f.stat().st_size for f in part.glob("*.log")) if part.exists() else 0

    total = size(source)
    assert total >= 400000
    result = kadmin.alter_partition_reassignments({KTopicPartition(topic_name, 0):
                                                   [source, target]})
    assert all(err is None for err in result.values()), result
    wait_for(lambda: size(target) > 0, 30, what="the new replica's first fetch")
    for _ in range(15):  # one 16 KiB fetch per quota window at most: far from done
        assert size(target) < total // 2
        time.sleep(0.2)
    _alter(admin, BROKER, str(target), ("follower.replication.throttled.rate", None, DELETE))
    wait_for(lambda: size(target) >= total, 60, what="the copy finishing unthrottled")


def test_refusals_use_kafka_error_codes(cluster, admin):
    broker = str(cluster.broker_ids[0])
    exc = _error_of(_alter, admin, BROKER, broker, ("broker.id", "9", SET))
    assert exc.args[0].name() == "INVALID_REQUEST"
    assert exc.args[0].str() == (
        f"Invalid config value for resource ConfigResource(type=BROKER, name='{broker}'): "
        "Cannot update these configs dynamically: Set(broker.id)")
    code, message = _alter_default(cluster, ("log.retention.bytes", "lots", SET))
    assert code == 42 and "log.retention.bytes" in message  # INVALID_REQUEST (KAFKA-13609)
    exc = _error_of(_alter, admin, BROKER, broker, ("log.retention.bytes", "-", SET))
    assert exc.args[0].name() == "INVALID_REQUEST" and "log.retention.bytes" in str(exc)
    assert _alter_default(cluster, ("broker.rack", "r1", SET))[0] == 42
    code, message = _alter_default(cluster, ("sasl.kerberos.min.time.before.relogin", "1",
                                             SET))
    assert code == 42 and message.endswith(
        "Cannot update these configs at default cluster level, broker id must be specified: "
        "Set(sasl.kerberos.min.time.before.relogin)")
    exc = _error_of(_alter, admin, BROKER, broker, ("ssl.keystore.location", "/k.pem", SET))
    assert exc.args[0].name() == "INVALID_REQUEST"
    assert "only per-listener using the listener prefix" in exc.args[0].str()
    _alter(admin, BROKER, broker, ("log.retention.bytes", "123", SET), validate_only=True)
    assert cluster.zk().get_entity_config("brokers", broker) == {}

    # A per-broker change sent to another broker (clients route it to the named one).
    other = next(b for b in cluster.brokers if b.id != int(broker))
    response = raw_request(other.host, other.port, 44, 1, validate_only=False, resources=[{
        "resource_type": 4, "resource_name": broker, "configs": [
            {"name": "log.retention.bytes", "config_operation": 0, "value": "1"}]}])
    assert response.responses[0].error_code == 42  # INVALID_REQUEST
    assert "Unexpected broker id" in response.responses[0].error_message

    # The same resource twice in one request: both refused, nothing stored.
    twice = {"resource_type": 4, "resource_name": "", "configs": [
        {"name": "log.retention.bytes", "config_operation": 0, "value": "1"}]}
    response = raw_request(other.host, other.port, 44, 1, validate_only=False,
                           resources=[twice, twice])
    assert [(r.error_code, r.error_message) for r in response.responses] == [
        (42, "Each resource must appear at most once.")] * 2
    assert cluster.zk().get_entity_config("brokers", "<default>") == {}


def test_custom_keys_on_a_broker_are_stored_as_kafka_stores_them(cluster, admin,
                                                                   clean_dynamic):
    """Keys Weir does not know, accepted on a BROKER resource as Kafka accepts them
    (custom configs): a topic-level name through the legacy AlterConfigs (confluent-kafka's
    alter_configs on broker 2, cleanup.policy=delete), a SASL key Kafka reconfigures per
    broker (librdkafka's 0081_admin test) through IncrementalAlterConfigs; stored in
    /config/brokers/<id>, described with Kafka's source, without effect."""
    broker = str(cluster.broker_ids[1])
    res = ConfigResource(BROKER, broker, set_config={"cleanup.policy": "delete"})
    assert admin.alter_configs([res], request_timeout=30)[res].result(30) is None
    assert cluster.zk().get_entity_config("brokers", broker) == {"cleanup.policy": "delete"}
    _alter(admin, BROKER, broker, ("sasl.kerberos.min.time.before.relogin", "58000", SET))
    assert cluster.zk().get_entity_config("brokers", broker) == {
        "cleanup.policy": "delete", "sasl.kerberos.min.time.before.relogin": "58000"}
    described = _describe(admin, BROKER, broker)
    entry = described["sasl.kerberos.min.time.before.relogin"]
    assert (entry.value, entry.source, entry.is_sensitive, entry.is_read_only) == (
        None, ConfigSource.DYNAMIC_BROKER_CONFIG.value, True, True)
    assert described["log.cleanup.policy"].value == "delete"  # the broker key: unchanged
    _alter(admin, BROKER, broker, ("cleanup.policy", None, DELETE))
    assert cluster.zk().get_entity_config("brokers", broker) == {
        "sasl.kerberos.min.time.before.relogin": "58000"}


def _advertised_everywhere(cluster, broker_id: int) -> set[tuple[str, int]]:
    """(host, port) of broker ``broker_id`` in a Metadata response from each broker."""
    seen = set()
    for slot in cluster.brokers:
        response = raw_request(slot.host, slot.port, 3, 12, topics=[],
                               allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)
        seen |= {(b.host, int(b.port)) for b in response.brokers if b.node_id == broker_id}
    return seen


def test_advertised_listeners_change_live_on_every_broker(cluster, admin, clean_dynamic):
    """advertised.listeners is a per-broker dynamic config (KIP-226, Kafka's
    DynamicListenerConfig): the broker rewrites its /brokers/ids registration, the
    controller sends every broker UpdateMetadata, and Metadata from every broker shows the
    new endpoint; deleting it goes back to the listener's own."""
    slot = cluster.brokers[2]
    broker = str(slot.id)
    assert _advertised_everywhere(cluster, slot.id) == {(slot.host, slot.port)}
    described = _describe(admin, BROKER, broker)["advertised.listeners"]
    assert not described.is_read_only

    _alter(admin, BROKER, broker, ("advertised.listeners", f"PLAINTEXT://localhost:{slot.port}",
                                   SET))
    wait_for(lambda: _advertised_everywhere(cluster, slot.id) == {("localhost", slot.port)},
             30, what="every broker's Metadata showing the new endpoint")
    epoch_before = cluster.zk().get_broker(slot.id).epoch
    described = _describe(admin, BROKER, broker)["advertised.listeners"]
    assert (described.value, described.source) == (
        f"PLAINTEXT://localhost:{slot.port}", ConfigSource.DYNAMIC_BROKER_CONFIG.value)

    # Refused as Kafka refuses them: a cluster default, a listener the broker does not have
    code, message = _alter_default(cluster, ("advertised.listeners", "PLAINTEXT://h:1", SET))
    assert code == 42 and "broker id must be specified: Set(advertised.listeners)" in message
    exc = _error_of(_alter, admin, BROKER, broker,
                    ("advertised.listeners", f"OTHER://localhost:{slot.port}", SET))
    assert exc.args[0].name() == "INVALID_REQUEST"

    _alter(admin, BROKER, broker, ("advertised.listeners", None, DELETE))
    wait_for(lambda: _advertised_everywhere(cluster, slot.id) == {(slot.host, slot.port)},
             30, what="every broker's Metadata showing the listener's endpoint again")
    # the registration was rewritten, not re-created: the broker epoch is unchanged
    assert cluster.zk().get_broker(slot.id).epoch == epoch_before


@pytest.fixture(scope="module")
def kadmin(cluster):
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    yield client
    client.close()


def test_kafka_python_alter_configs_on_a_broker(cluster, kadmin, clean_dynamic):
    """kafka-python's admin, legacy AlterConfigs and IncrementalAlterConfigs."""
    from kafka.admin import ConfigResource as KResource
    from kafka.admin import ConfigResourceType

    broker = str(cluster.broker_ids[1])
    for incremental in (False, True):
        value = "7200000" if incremental else "3600000"
        res = KResource(ConfigResourceType.BROKER, broker, configs={"log.retention.ms": value})
        assert kadmin.alter_configs([res], incremental=incremental) == {
            "broker": {broker: "OK"}}
        described = kadmin.describe_configs([KResource(ConfigResourceType.BROKER, broker)],
                                            include_synonyms=True)
        entry = described["broker"][broker]["log.retention.ms"]
        assert (entry["value"], entry["config_source"]) == (value, "DYNAMIC_BROKER_CONFIG")
        assert entry["synonyms"][0] == {"name": "log.retention.ms", "value": value,
                                        "source": "DYNAMIC_BROKER_CONFIG"}
    assert cluster.zk().get_entity_config("brokers", broker) == {"log.retention.ms": "7200000"}
    bad = KResource(ConfigResourceType.BROKER, broker, configs={"broker.id": "3"})
    result = kadmin.alter_configs([bad], raise_on_unknown=False)["broker"][broker]
    assert "Error 42" in str(result) and "broker.id" in str(result)


def test_restarted_broker_keeps_its_dynamic_value(cluster, admin, clean_dynamic):
    broker = cluster.broker_ids[2]
    _alter(admin, BROKER, str(broker), ("log.retention.bytes", "777777", SET))
    cluster.stop_broker(broker)
    cluster.start_broker(broker)
    cluster.wait_for_brokers(cluster.broker_ids)
    entry = wait_for(lambda: _describe(admin, BROKER, str(broker))["log.retention.bytes"], 30,
                     interval_s=0.5, what="the restarted broker answering DescribeConfigs")
    assert (entry.value, entry.source) == ("777777", ConfigSource.DYNAMIC_BROKER_CONFIG.value)


def test_connection_limit_per_ip_applies_live(cluster, admin, clean_dynamic):
    """max.connections.per.ip.overrides as a dynamic default: 127.0.0.2 may open none."""
    target = cluster.brokers[0]

    def closed_at_once() -> bool:
        with socket.create_connection((target.host, target.port), timeout=5,
                                      source_address=("127.0.0.2", 0)) as sock:
            sock.settimeout(1.0)
            try:
                return sock.recv(1) == b""
            except TimeoutError:
                return False

    assert not closed_at_once()
    _default_ok(cluster, ("max.connections.per.ip.overrides", "127.0.0.2:0", SET))
    wait_for(closed_at_once, 30, interval_s=0.2, what="connections from 127.0.0.2 refused")
    _default_ok(cluster, ("max.connections.per.ip.overrides", None, DELETE))
    wait_for(lambda: not closed_at_once(), 30, interval_s=0.2, what="127.0.0.2 accepted")


def test_broker_logger_levels(cluster, kadmin):
    """BROKER_LOGGER through kafka-python (librdkafka has no such resource): levels change
    live on the broker named, nothing is stored in ZooKeeper."""
    from kafka.admin import ConfigResource as KResource
    from kafka.admin import ConfigResourceType

    broker = str(cluster.broker_ids[0])
    name = "weir.server.broker"

    def level() -> str:
        got = kadmin.describe_configs(
            [KResource(ConfigResourceType.BROKER_LOGGER, broker, configs=[name, "root"])],
            config_filter="all")["broker_logger"][broker]
        assert got["root"]["value"] == "INFO"
        assert got[name]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
        return got[name]["value"]

    def alter(value, op="SET"):
        res = KResource(ConfigResourceType.BROKER_LOGGER, broker, configs={name: (op, value)})
        return kadmin.alter_configs([res], incremental=True)["broker_logger"][broker]

    assert level() == "INFO"
    assert alter("DEBUG") == "OK" and level() == "DEBUG"
    assert alter(None, "DELETE") == "OK" and level() == "INFO"
    assert "Error 40" in str(alter("LOUD"))  # INVALID_CONFIG
    assert cluster.zk().get_entity_config("brokers", broker) == {}
    slot = next(b for b in cluster.brokers if b.id == int(broker))
    legacy = raw_request(slot.host, slot.port, 33, 2, validate_only=False, resources=[{
        "resource_type": 8, "resource_name": broker,
        "configs": [{"name": name, "value": "DEBUG"}]}]).responses[0]
    assert legacy.error_code == 42 and level() == "INFO"  # AlterConfigs: INVALID_REQUEST


def test_cli_config_for_brokers(cluster, clean_dynamic):
    def weir(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*WEIR, *args, "--bootstrap-server", cluster.bootstrap],
                              check=False, capture_output=True, text=True, timeout=60)

    broker = str(cluster.broker_ids[0])
    done = weir("config", "set", "--broker-default", "log.retention.bytes=5000000")
    assert done.returncode == 0, done.stderr
    done = weir("config", "set", "--broker", broker, "log.retention.bytes=6000000")
    assert done.returncode == 0, done.stderr
    got = json.loads(weir("config", "get", "--broker", broker, "log.retention.bytes",
                          "--json").stdout)
    assert got["broker"] == broker
    [entry] = got["configs"]
    assert (entry["value"], entry["source"]) == ("6000000", "DYNAMIC_BROKER_CONFIG")
    assert entry["synonyms"][:2] == ["DYNAMIC_BROKER_CONFIG:log.retention.bytes=6000000",
                                     "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=5000000"]
    table = weir("config", "get", "--broker-default").stdout
    assert "log.retention.bytes" in table and "5000000" in table
    done = weir("config", "delete", "--broker", broker, "log.retention.bytes")
    assert done.returncode == 0, done.stderr
    done = weir("config", "set", "--broker", broker, "broker.id=7")
    assert done.returncode != 0 and "Cannot update these configs dynamically" in done.stderr
    done = weir("config", "set", "--broker-logger", broker, "weir.server.network=WARN")
    assert done.returncode == 0, done.stderr
    got = json.loads(weir("config", "get", "--broker-logger", broker, "weir.server.network",
                          "--json").stdout)
    assert [(r["name"], r["value"]) for r in got["configs"]] == [("weir.server.network", "WARN")]
    assert weir("config", "delete", "--broker-logger", broker,
                "weir.server.network").returncode == 0


@pytest.mark.slow
def test_unclean_election_enabled_as_cluster_default_elects_offline_partition(
        tmp_path, topic_name):
    """The controller sees the dynamic default too (KafkaController
    .enableDefaultUncleanLeaderElection): an offline partition whose only live replica is out
    of sync gets it as leader as soon as the default turns true."""
    from tests.integration.replication_checks import partition_leaders
    from tests.integration.test_unclean_election import leave_only_out_of_sync_replica
    from weir.ops.cluster import LocalCluster

    cluster = LocalCluster(tmp_path / "data", brokers=2, port_base=0)
    cluster.start(timeout_s=90)
    try:
        create_topic(cluster.bootstrap, topic_name, 1, 2, {"min.insync.replicas": "1"})
        _, survivor = leave_only_out_of_sync_replica(cluster, topic_name)
        wait_for(lambda: partition_leaders(cluster.bootstrap, topic_name)[0] == -1, 30,
                 what="partition offline")
        via = cluster.broker_ids.index(survivor)
        _default_ok(cluster, ("unclean.leader.election.enable", "true", SET), via=via)
        wait_for(lambda: partition_leaders(cluster.bootstrap, topic_name)[0] == survivor, 60,
                 what="unclean leader elected after the default changed")
        assert "Unclean leader election enabled as the broker default" in \
            cluster.log_path(survivor).read_text()
    finally:
        cluster.stop()

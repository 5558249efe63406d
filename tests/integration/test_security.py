"""TLS and SASL against real brokers and real clients.

confluent-kafka, kafka-python and aiokafka over SSL (client certificates), SASL_PLAINTEXT
and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; replication between the brokers
over SASL_SSL; SCRAM users managed with AlterUserScramCredentials; and bad input (wrong
password, unknown user or mechanism, missing, expired or untrusted certificates, garbage,
oversized tokens, requests before authentication), after which the brokers still serve.
"""

from __future__ import annotations

import asyncio
import datetime
import shutil
import ssl
import subprocess
import time
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tests.conftest import wait_for
from tests.integration.clients import consume_assigned, produce
from tests.integration.security_cluster import (
    PLAIN_USERS,
    USERS,
    RawConnection,
    client_tls,
    start_cluster,
)
from weir.security.scram import ScramClient

pytestmark = pytest.mark.integration

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS, METADATA, PRODUCE = 17, 36, 18, 3, 0


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    cluster, material, ports = start_cluster(tmp_path_factory.mktemp("weir-sec"))
    try:
        cluster.start(timeout_s=90)
        _wait_for_metadata(cluster)
    except BaseException:
        _dump(cluster)
        cluster.stop()
        raise
    try:
        yield cluster, material, ports
    finally:
        cluster.stop()


def _dump(cluster) -> None:
    for broker_id in cluster.broker_ids:
        path = cluster.log_path(broker_id)
        if path.exists():
            print(f"---- broker {broker_id} ----")
            print("\n".join(path.read_text(errors="replace").splitlines()[-60:]))


def _wait_for_metadata(cluster) -> None:
    """Until every broker knows every broker (the controller's UpdateMetadata went out over
    the inter-broker listener): topics created earlier could find too few brokers."""
    def known() -> bool:
        for slot in cluster.brokers:
            admin = AdminClient({"bootstrap.servers": f"{slot.host}:{slot.port}"})
            if len(admin.list_topics(timeout=10).brokers) < len(cluster.broker_ids):
                return False
        return True

    wait_for(known, 60, what="every broker in every broker's metadata")


def _bootstrap(ports, listener: str) -> str:
    return ",".join(f"127.0.0.1:{p[listener]}" for p in ports.values())


def _credentials(mechanism: str, user: str = "alice") -> tuple[str, str]:
    return user, PLAIN_USERS[user] if mechanism == "PLAIN" else USERS[user]


def _topic(cluster, replication: int = 2) -> str:
    name = f"sec-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def created() -> bool:
        future = admin.create_topics(
            [NewTopic(name, 1, replication, config={"min.insync.replicas": str(replication)})],
            operation_timeout=30)[name]
        try:
            future.result(30)
        except KafkaException as exc:
            # A broker whose metadata does not list every broker yet (just started).
            if exc.args[0].name() != "INVALID_REPLICATION_FACTOR":
                raise
            return False
        return True

    wait_for(created, 60, interval_s=0.5, what=f"topic {name} created")
    return name


def _librdkafka(material, listener: str, mechanism: str | None) -> dict[str, object]:
    conf: dict[str, object] = {"security.protocol": listener}
    if listener.endswith("SSL"):
        conf["ssl.ca.location"] = str(material.ca)
    if listener == "SSL":
        conf["ssl.certificate.location"] = str(material.client_cert)
        conf["ssl.key.location"] = str(material.client_key)
    if mechanism:
        user, password = _credentials(mechanism)
        conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                     "sasl.password": password})
    return conf


CASES = [("SSL", None)] + [(listener, mechanism)
                           for listener in ("SASL_PLAINTEXT", "SASL_SSL")
                           for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")]


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_confluent_kafka(secured, listener, mechanism):
    cluster, material, ports = secured
    topic = _topic(cluster)
    conf = _librdkafka(material, listener, mechanism)
    bootstrap = _bootstrap(ports, listener)
    values = [f"{listener}-{mechanism}-{i}".encode() for i in range(5)]
    acked = produce(bootstrap, topic, values, acks="all", **conf)
    assert [v for _, _, v in acked] == values
    got = consume_assigned(bootstrap, topic, [0], 5, **conf)
    assert [m.value() for m in got] == values


def _kafka_python_conf(material, listener: str, mechanism: str | None) -> dict:
    conf: dict = {"security_protocol": listener}
    if listener.endswith("SSL"):
        conf["ssl_cafile"] = str(material.ca)
        conf["ssl_check_hostname"] = True
    if listener == "SSL":
        conf["ssl_certfile"] = str(material.client_cert)
        conf["ssl_keyfile"] = str(material.client_key)
    if mechanism:
        user, password = _credentials(mechanism)
        conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                     "sasl_plain_password": password})
    return conf


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_kafka_python(secured, listener, mechanism):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    cluster, material, ports = secured
    topic = _topic(cluster)
    conf = _kafka_python_conf(material, listener, mechanism)
    bootstrap = _bootstrap(ports, listener)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **conf)
    try:
        for i in range(3):
            producer.send(topic, f"kp-{i}".encode()).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=20000, **conf)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got = [next(consumer).value for _ in range(3)]
    finally:
        consumer.close()
    assert got == [b"kp-0", b"kp-1", b"kp-2"]


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_aiokafka(secured, listener, mechanism):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    cluster, material, ports = secured
    topic = _topic(cluster)
    bootstrap = _bootstrap(ports, listener)

    async def run() -> list[bytes]:
        conf: dict = {"security_protocol": listener}
        if listener.endswith("SSL"):
            conf["ssl_context"] = client_tls(material, cert=listener == "SSL")
        if mechanism:
            user, password = _credentials(mechanism)
            conf.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                         "sasl_plain_password": password})
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **conf)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"ak-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap,
                                    auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            got = []
            while len(got) < 3:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got += [m.value for msgs in batch.values() for m in msgs]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"ak-0", b"ak-1", b"ak-2"]


def test_metadata_answers_with_the_listener_of_the_request(secured):
    _cluster, material, ports = secured
    for listener in ("PLAINTEXT", "SASL_SSL"):
        conf = {"bootstrap.servers": _bootstrap(ports, listener),
                **_librdkafka(material, listener,
                              "SCRAM-SHA-512" if listener == "SASL_SSL" else None)}
        meta = AdminClient(conf).list_topics(timeout=30)
        seen = {(b.host, b.port) for b in meta.brokers.values()}
        assert seen == {("127.0.0.1", p[listener]) for p in ports.values()}, listener


def test_replication_between_brokers_runs_over_sasl_ssl(secured):
    """min.insync.replicas=2 and acks=all: every write is acknowledged only after the other
    broker fetched it, over the SASL_SSL inter-broker listener (there is no other way
    between them: the controller and the fetchers use only that listener)."""
    cluster, _material, _ports = secured
    topic = _topic(cluster, replication=2)
    acked = produce(cluster.bootstrap, topic, [b"r1", b"r2"], acks="all")
    assert len(acked) == 2
    meta = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=30)
    partition = meta.topics[topic].partitions[0]
    assert sorted(partition.isrs) == sorted(partition.replicas) == cluster.broker_ids


def _scram_authenticate(conn: RawConnection, mechanism: str, user: str, password: str):
    assert conn.request(SASL_HANDSHAKE, 1, mechanism=mechanism).error_code == 0
    client = ScramClient(mechanism, user, password)
    first = conn.request(SASL_AUTHENTICATE, 2, auth_bytes=client.first())
    if first.error_code != 0:
        return first
    final = conn.request(SASL_AUTHENTICATE, 2, auth_bytes=client.final(first.auth_bytes))
    if final.error_code == 0:
        client.verify(final.auth_bytes)
    return final


def _still_serves(cluster, material, ports) -> None:
    topic = _topic(cluster, replication=2)
    conf = _librdkafka(material, "SASL_SSL", "SCRAM-SHA-256")
    produce(_bootstrap(ports, "SASL_SSL"), topic, [b"ok"], **conf)
    assert consume_assigned(_bootstrap(ports, "SASL_SSL"), topic, [0], 1, **conf)


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("SCRAM-SHA-256", "alice", "wrong"),
    ("SCRAM-SHA-512", "nobody", "whatever"),
    ("PLAIN", "alice", "wrong"),
    ("PLAIN", "nobody", "whatever"),
])
def test_failed_authentication_is_answered_then_the_connection_closes(
        secured, mechanism, user, password):
    _cluster, _material, ports = secured
    conn = RawConnection(ports[1]["SASL_PLAINTEXT"])
    try:
        if mechanism == "PLAIN":
            assert conn.request(SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == 0
            response = conn.request(SASL_AUTHENTICATE, 1,
                                    auth_bytes=f"\0{user}\0{password}".encode())
        else:
            response = _scram_authenticate(conn, mechanism, user, password)
        assert response.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert mechanism in response.error_message
        assert conn.closed_by_peer()
    finally:
        conn.close()


def test_confluent_kafka_with_a_wrong_password_gets_an_authentication_error(secured):
    cluster, material, ports = secured
    errors = []
    conf = {**_librdkafka(material, "SASL_SSL", "SCRAM-SHA-512"), "sasl.password": "nope",
            "bootstrap.servers": _bootstrap(ports, "SASL_SSL"),
            "error_cb": errors.append}
    admin = AdminClient(conf)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    admin.poll(1)
    assert any(e.code() == -169 for e in errors), errors  # _AUTHENTICATION
    _still_serves(cluster, material, ports)


def test_unknown_mechanism_is_refused_with_the_enabled_ones(secured):
    _cluster, _material, ports = secured
    conn = RawConnection(ports[1]["SASL_PLAINTEXT"])
    try:
        response = conn.request(SASL_HANDSHAKE, 1, mechanism="GSSAPI")
        assert response.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert set(response.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert conn.closed_by_peer()
    finally:
        conn.close()


@pytest.mark.parametrize("api_key", [METADATA, PRODUCE])
def test_requests_before_authentication_close_the_connection_unanswered(secured, api_key):
    _cluster, _material, ports = secured
    conn = RawConnection(ports[1]["SASL_PLAINTEXT"])
    try:
        assert conn.request(API_VERSIONS, 3, client_software_name="t",
                            client_software_version="1").error_code == 0
        if api_key == METADATA:
            conn.send_raw(conn.frame(METADATA, 12, topics=None))
        else:
            conn.send_raw(conn.frame(PRODUCE, 9, acks=1, timeout=datetime.timedelta(seconds=1),
                                     topic_data=()))
        assert conn.closed_by_peer()
    finally:
        conn.close()
    conn = RawConnection(ports[1]["SASL_PLAINTEXT"])
    try:  # between handshake and authentication too
        assert conn.request(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256").error_code == 0
        conn.send_raw(conn.frame(METADATA, 12, topics=None))
        assert conn.closed_by_peer()
    finally:
        conn.close()


def test_garbage_and_oversized_tokens(secured):
    cluster, material, ports = secured
    cases = [
        b"\x00\x00\x00\x08garbage!",                      # an unknown API before auth
        b"\xff" * 64,                                     # a negative size
        (1 << 20).to_bytes(4, "big") + b"x" * 16,         # over sasl.server.max.receive.size
    ]
    for data in cases:
        conn = RawConnection(ports[1]["SASL_PLAINTEXT"])
        try:
            conn.send_raw(data)
            assert conn.closed_by_peer(), data[:16]
        finally:
            conn.close()
    conn = RawConnection(ports[1]["SASL_PLAINTEXT"])
    try:  # garbage in the middle of a SCRAM exchange
        assert conn.request(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512").error_code == 0
        response = conn.request(SASL_AUTHENTICATE, 2, auth_bytes=b"\x00\xff not scram")
        assert response.error_code == 58
        assert conn.closed_by_peer()
    finally:
        conn.close()
    for listener in ("SSL", "SASL_SSL"):  # garbage instead of a TLS ClientHello
        conn = RawConnection(ports[1][listener])
        try:
            conn.send_raw(b"\x16\x03\x01\x00\x05hello" + b"\x00" * 100)
            assert conn.closed_by_peer()
        finally:
            conn.close()
    _still_serves(cluster, material, ports)


def _tls_refused(port: int, context: ssl.SSLContext) -> bool:
    """True when the broker refuses the TLS session (during or right after the handshake)."""
    try:
        conn = RawConnection(port, context)
    except (ssl.SSLError, ConnectionError):
        return True
    try:
        conn.request(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    except (ssl.SSLError, ConnectionError):
        return True
    finally:
        conn.close()
    return False


def test_client_certificates(secured):
    cluster, material, ports = secured
    port = ports[1]["SSL"]
    assert not _tls_refused(port, client_tls(material))
    assert _tls_refused(port, client_tls(material, cert=False))
    expired = ssl.create_default_context(cafile=str(material.ca))
    expired.load_cert_chain(str(material.expired_cert), str(material.expired_key))
    assert _tls_refused(port, expired)
    untrusted = ssl.create_default_context(cafile=str(material.ca))
    untrusted.load_cert_chain(str(material.untrusted_cert), str(material.untrusted_key))
    assert _tls_refused(port, untrusted)
    old = client_tls(material)
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    assert _tls_refused(port, old)
    _still_serves(cluster, material, ports)


def test_session_lifetime_and_reauthentication(secured):
    """connections.max.reauth.ms=4000 on SASL_PLAINTEXT (KIP-368): the lifetime is in the
    response; re-authenticating keeps the connection; a request after expiry closes it."""
    _cluster, _material, ports = secured
    port = ports[1]["SASL_PLAINTEXT"]
    kept = RawConnection(port)
    lapsed = RawConnection(port)
    try:
        for conn in (kept, lapsed):
            response = _scram_authenticate(conn, "SCRAM-SHA-256", "bob", USERS["bob"])
            assert response.error_code == 0
            assert response.session_lifetime.total_seconds() == 4.0
            assert conn.request(METADATA, 12, topics=None).brokers
        authenticated = time.monotonic()  # both sessions end by authenticated + 4 s
        while time.monotonic() < authenticated + 2:
            time.sleep(0.1)
        assert _scram_authenticate(kept, "SCRAM-SHA-256", "bob", USERS["bob"]).error_code == 0
        while time.monotonic() < authenticated + 4.4:  # the first sessions have ended
            time.sleep(0.1)
        assert kept.request(METADATA, 12, topics=None).brokers
        lapsed.send_raw(lapsed.frame(METADATA, 12, topics=None))
        assert lapsed.closed_by_peer()
        # Re-authenticating as someone else is refused.
        response = _scram_authenticate(kept, "SCRAM-SHA-256", "alice", USERS["alice"])
        assert response.error_code == 58
    finally:
        kept.close()
        lapsed.close()


def test_scram_users_are_managed_with_the_admin_api(secured):
    cluster, material, ports = secured
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    user = f"u{uuid.uuid4().hex[:6]}"
    results = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                               8192), b"pw-1"),
        UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                               4096), b"pw-1"),
    ])
    for future in results.values():
        future.result(30)
    described = admin.describe_user_scram_credentials([user])[user].result(30)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)]
    # Credentials work on every broker (each read them from ZooKeeper).
    for broker_id in cluster.broker_ids:
        conn = RawConnection(ports[broker_id]["SASL_SSL"], client_tls(material, cert=False))
        try:
            assert _scram_authenticate(conn, "SCRAM-SHA-256", user, "pw-1").error_code == 0
        finally:
            conn.close()
    # Errors with Kafka's codes.
    bad = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("weak", ScramCredentialInfo(
            ScramMechanism.SCRAM_SHA_256, 1000), b"x")])
    with pytest.raises(KafkaException, match="UNACCEPTABLE_CREDENTIAL|iterations"):
        bad["weak"].result(30)
    gone = admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("nobody-here", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND|does not exist"):
        gone["nobody-here"].result(30)
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["nobody-here"])["nobody-here"].result(30)
    # Deleting the credential: every broker refuses it (after the change notification).
    admin.alter_user_scram_credentials([
        UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)])[user].result(30)
    for broker_id in cluster.broker_ids:
        deadline = time.monotonic() + 15
        while True:
            conn = RawConnection(ports[broker_id]["SASL_PLAINTEXT"])
            try:
                code = _scram_authenticate(conn, "SCRAM-SHA-256", user, "pw-1").error_code
            finally:
                conn.close()
            if code == 58 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert code == 58, broker_id
    conn = RawConnection(ports[1]["SASL_PLAINTEXT"])
    try:  # the other mechanism is kept
        assert _scram_authenticate(conn, "SCRAM-SHA-512", user, "pw-1").error_code == 0
    finally:
        conn.close()


def test_librdkafka_reauthenticates_before_its_session_ends(secured):
    """KIP-368 with a real client: over SASL_PLAINTEXT (connections.max.reauth.ms=4000)
    confluent-kafka keeps producing on its connections for more than two session
    lifetimes; had it not re-authenticated, the broker would have closed a connection with
    "SASL session expired"."""
    from confluent_kafka import Producer

    cluster, material, ports = secured
    topic = _topic(cluster)

    def expired() -> int:
        return sum(cluster.log_path(b).read_text(errors="replace").count("SASL session expired")
                   for b in cluster.broker_ids)

    before = expired()
    errors: list = []
    producer = Producer({"bootstrap.servers": _bootstrap(ports, "SASL_PLAINTEXT"),
                         **_librdkafka(material, "SASL_PLAINTEXT", "SCRAM-SHA-256"),
                         "error_cb": errors.append})
    start = time.monotonic()
    sent = 0
    while time.monotonic() - start < 9:
        producer.produce(topic, f"r{sent}".encode(),
                         on_delivery=lambda err, _m: err and errors.append(err))
        sent += 1
        producer.flush(10)
        time.sleep(0.3)
    assert producer.flush(10) == 0
    assert not errors, errors[:3]
    assert expired() == before
    got = consume_assigned(cluster.bootstrap, topic, [0], sent)
    assert len(got) == sent


def test_fuzzed_requests_before_authentication_never_reach_a_handler(secured):
    """Every API and version, valid and mutated, sent first on a SASL connection: only
    ApiVersions, SaslHandshake and SaslAuthenticate may be answered (SaslAuthenticate with
    ILLEGAL_SASL_STATE); anything else is closed unanswered — an answer would mean a
    handler ran for an unauthenticated client."""
    from fuzz.cases import cases
    from fuzz.live import run_cases

    cluster, material, ports = secured
    batch = list(cases(3, 4))
    pre_auth = [c for c in batch if c.target.api_key not in (17, 18, 36)]
    allowed = [c for c in batch if c.target.api_key in (17, 18, 36)]
    port = ports[1]["SASL_PLAINTEXT"]
    outcomes, bad = asyncio.run(run_cases("127.0.0.1", port, pre_auth, wait_s=3.0))
    assert not bad
    assert set(outcomes) == {"closed"}, outcomes
    outcomes, bad = asyncio.run(run_cases("127.0.0.1", port, allowed, wait_s=3.0))
    assert not bad and outcomes["answered"] > 0, outcomes
    _still_serves(cluster, material, ports)


def test_replication_over_mutual_tls(tmp_path):
    """inter.broker.listener.name=SSL with ssl.client.auth=required: the brokers present
    their own certificates to each other (the inter-broker client's keystore)."""
    from tests.integration.security_cluster import broker_settings, make_material
    from weir.ops.cluster import LocalCluster

    certs = tmp_path / "certs"
    certs.mkdir()
    ca, _material = make_material(certs)
    overrides = {}
    for broker_id in (1, 2):
        settings, _ = broker_settings(ca, certs, broker_id)
        settings["inter.broker.listener.name"] = "SSL"
        overrides[broker_id] = settings
    cluster = LocalCluster(tmp_path / "cluster", brokers=2, port_base=0,
                           broker_overrides=overrides,
                           overrides={"offsets.topic.replication.factor": "2"})
    try:
        cluster.start(timeout_s=90)
        _wait_for_metadata(cluster)
        topic = _topic(cluster, replication=2)
        assert len(produce(cluster.bootstrap, topic, [b"m1", b"m2"], acks="all")) == 2
        meta = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic,
                                                                                timeout=30)
        partition = meta.topics[topic].partitions[0]
        assert sorted(partition.isrs) == [1, 2]
    except BaseException:
        _dump(cluster)
        raise
    finally:
        cluster.stop()


def test_large_fetches_over_tls(secured):
    """Fetch responses of several MiB per partition over SASL_SSL (file regions written in
    slices on a TLS connection) arrive whole and in order."""
    cluster, material, ports = secured
    topic = _topic(cluster)
    conf = _librdkafka(material, "SASL_SSL", "SCRAM-SHA-512")
    bootstrap = _bootstrap(ports, "SASL_SSL")
    values = [f"{i:06d}".encode() * 400 for i in range(3000)]  # 2.4 KB each, 7 MB in all
    produce(bootstrap, topic, values, acks="all", **conf)
    got = consume_assigned(bootstrap, topic, [0], len(values), **conf,
                           **{"max.partition.fetch.bytes": 8 << 20,
                              "fetch.max.bytes": 16 << 20})
    assert [m.value() for m in got] == values


@pytest.mark.parametrize(("lines", "key"), [
    (["listeners=SSL://127.0.0.1:0", "security.inter.broker.protocol=SSL"],
     "ssl.keystore.location"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:0",
      "security.inter.broker.protocol=SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN"],
     "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    (["listeners=SASL_PLAINTEXT://127.0.0.1:0",
      "security.inter.broker.protocol=SASL_PLAINTEXT"],
     "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"),
    (["listeners=SSL://127.0.0.1:0", "security.inter.broker.protocol=SSL",
      "ssl.keystore.location=/nonexistent.pem"], "ssl.keystore.location"),
])
def test_bad_security_settings_stop_the_broker_naming_the_key(tmp_path, lines, key):
    import subprocess
    import sys

    config = tmp_path / "server.properties"
    config.write_text("\n".join(["broker.id=1", "zookeeper.connect=127.0.0.1:1",
                                 f"log.dirs={tmp_path / 'logs'}", *lines]) + "\n")
    result = subprocess.run([sys.executable, "-m", "weir", "broker", "start", "--config",
                             str(config)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 2, result.stderr
    assert key in result.stderr and "Traceback" not in result.stderr


def _bare_round(conn: RawConnection, token: bytes) -> bytes:
    """One SASL token after SaslHandshake v0: sent and answered without Kafka headers."""
    conn.send_raw(len(token).to_bytes(4, "big") + token)
    size = int.from_bytes(conn._read(4), "big")
    return conn._read(size)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_handshake_v0_takes_bare_tokens_then_kafka_requests(secured, mechanism):
    """Clients older than KIP-152: SaslHandshake v0, then bare SASL tokens."""
    _cluster, _material, ports = secured
    conn = RawConnection(ports[1]["SASL_PLAINTEXT"])
    try:
        assert conn.request(SASL_HANDSHAKE, 0, mechanism=mechanism).error_code == 0
        user, password = _credentials(mechanism)
        if mechanism == "PLAIN":
            assert _bare_round(conn, f"\0{user}\0{password}".encode()) == b""
        else:
            client = ScramClient(mechanism, user, password)
            first = _bare_round(conn, client.first())
            client.verify(_bare_round(conn, client.final(first)))
        metadata = conn.request(METADATA, 1, topics=None)
        assert len(metadata.brokers) == 2
    finally:
        conn.close()


def test_handshake_v0_with_a_wrong_password_closes_the_connection(secured):
    _cluster, _material, ports = secured
    conn = RawConnection(ports[1]["SASL_PLAINTEXT"])
    try:
        assert conn.request(SASL_HANDSHAKE, 0, mechanism="PLAIN").error_code == 0
        conn.send_raw(len(b"\0alice\0wrong").to_bytes(4, "big") + b"\0alice\0wrong")
        assert conn.closed_by_peer()
    finally:
        conn.close()


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by make deps")
def test_debian_kcat_logs_in_with_scram(secured):
    """Debian's kcat (librdkafka 2.0) looks for SaslHandshake v0 among the broker's versions
    before it uses SASL at all."""
    _cluster, _material, ports = secured
    user, password = _credentials("SCRAM-SHA-512")
    listing = subprocess.run(
        ["kcat", "-b", _bootstrap(ports, "SASL_PLAINTEXT"), "-L", "-m", "15",
         "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-512",
         "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"],
        check=False, capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    assert "2 brokers:" in listing.stdout, listing.stdout

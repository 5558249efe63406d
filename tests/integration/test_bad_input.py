"""Garbage, oversized frames and unknown APIs close one connection; the broker serves on."""

from __future__ import annotations

import socket
import struct

import pytest

from tests.integration.clients import consume_assigned, create_topic, produce

pytestmark = pytest.mark.integration


def _connect(cluster):
    slot = cluster.brokers[0]
    return socket.create_connection((slot.host, slot.port), timeout=10)


def _closed(sock: socket.socket) -> bool:
    """True once the peer has closed the connection."""
    sock.settimeout(10)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True


def _frame(api_key: int, version: int, body: bytes = b"", correlation_id: int = 7) -> bytes:
    client = b"bad-client"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _still_serves(cluster, topic: str) -> None:
    produce(cluster.bootstrap, topic, [b"alive"])
    assert consume_assigned(cluster.bootstrap, topic, [0], 1)


def test_garbage_bytes(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name)
    with _connect(cluster1) as s:
        s.sendall(struct.pack(">i", 12) + b"\xff" * 12)
        assert _closed(s)
    with _connect(cluster1) as s:
        s.sendall(b"\x00\x00\x00\x02ab")  # shorter than any header
        assert _closed(s)
    _still_serves(cluster1, topic_name)


def test_oversized_frame_closes_connection(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name)
    with _connect(cluster1) as s:
        s.sendall(struct.pack(">i", 200 * 1024 * 1024))  # > socket.request.max.bytes
        assert _closed(s)
    with _connect(cluster1) as s:
        s.sendall(struct.pack(">i", -5))
        assert _closed(s)
    _still_serves(cluster1, topic_name)


def test_unknown_api_and_version(cluster1, topic_name):
    create_topic(cluster1.bootstrap, topic_name)
    with _connect(cluster1) as s:
        s.sendall(_frame(9999, 0))
        assert _closed(s)
    with _connect(cluster1) as s:
        s.sendall(_frame(3, 99))  # Metadata v99
        assert _closed(s)
    with _connect(cluster1) as s:
        s.sendall(_frame(0, 9, b"\x01\x02\x03"))  # truncated Produce body
        assert _closed(s)
    _still_serves(cluster1, topic_name)


def test_api_versions_unknown_version_answers_v0_error(cluster1):
    with _connect(cluster1) as s:
        s.sendall(_frame(18, 77, correlation_id=42))
        size = struct.unpack(">i", s.recv(4))[0]
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        correlation_id, error_code, count = struct.unpack_from(">ihi", body, 0)
        assert correlation_id == 42
        assert error_code == 35  # UNSUPPORTED_VERSION
        keys = {struct.unpack_from(">hhh", body, 10 + 6 * i)[0] for i in range(count)}
        assert {0, 1, 3, 18} <= keys


def test_clients_cannot_write_to_the_offsets_topic(cluster1, topic_name):
    """Kafka's ReplicaManager refuses appends to internal topics from clients
    (INVALID_TOPIC_EXCEPTION): a record there that the coordinator cannot decode would
    otherwise break the loading of every group on that partition."""
    from confluent_kafka import Consumer, KafkaError, Producer

    create_topic(cluster1.bootstrap, topic_name)
    produce(cluster1.bootstrap, topic_name, [b"x"])
    consumer = Consumer({"bootstrap.servers": cluster1.bootstrap, "group.id": topic_name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic_name])
        msg = None
        deadline = 60
        while msg is None and deadline > 0:
            msg = consumer.poll(1)
            deadline -= 1
        assert msg is not None and msg.error() is None
        consumer.commit(asynchronous=False)  # the offsets topic exists from here on
    finally:
        consumer.close()
    errors = []
    producer = Producer({"bootstrap.servers": cluster1.bootstrap, "message.timeout.ms": 20000})
    producer.produce("__consumer_offsets", b"garbage", key=b"\xff\xff", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_EXCEPTION, errors[0]

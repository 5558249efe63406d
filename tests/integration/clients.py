"""Small helpers around the real Kafka clients used by the integration tests."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication: int = 1,
                 config: dict[str, str] | None = None, timeout_s: float = 30) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, replication, config=config or {})],
        operation_timeout=timeout_s, request_timeout=timeout_s)
    futures[name].result(timeout=timeout_s)


def produce(bootstrap: str, topic: str, values: list[bytes], *, partition: int | None = None,
            keys: list[bytes] | None = None, timeout_s: float = 60,
            **config: object) -> list[tuple[int, int, bytes]]:
    """Produce and flush; returns (partition, offset, value) of every acknowledged record."""
    acked: list[tuple[int, int, bytes]] = []
    errors: list[object] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    conf.update({k: v for k, v in config.items()})
    producer = Producer(conf)
    for i, value in enumerate(values):
        kwargs = {"value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if keys is not None:
            kwargs["key"] = keys[i]
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(timeout_s)
    assert remaining == 0, f"{remaining} records not delivered"
    assert not errors, f"delivery errors: {errors[:5]}"
    return acked


def consume_assigned(bootstrap: str, topic: str, partitions: list[int], expected: int,
                     timeout_s: float = 60, start: int = 0, **config: object) -> list:
    """Consume by assign() from ``start`` until ``expected`` records arrived."""
    conf = {"bootstrap.servers": bootstrap, "group.id": "unused-by-assign",
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    conf.update(config)
    consumer = Consumer(conf)
    consumer.assign([TopicPartition(topic, p, start) for p in partitions])
    got = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append(msg)
    finally:
        consumer.close()
    return got


def raw_request(host: str, port: int, api_key: int, version: int, *,
                source_host: str | None = None, **fields):
    """One request built from plain values with the broker's own codec, sent on a fresh
    connection; the decoded response (for requests no client library will send).
    ``source_host``: the local address to connect from (another loopback address is
    another client host for ACLs)."""
    import socket
    import struct

    from weir.protocol import codec
    from weir.server.handlers import REGISTRY

    request_cls, response_cls = REGISTRY[api_key].schemas(version)
    body = codec.encode_body(codec.build(request_cls, **fields))
    header = codec.encode_request_header(api_key, version, 1, "test",
                                         bool(request_cls.__flexible__))
    def read_exactly(sock, n: int) -> bytes:
        # A socket with a timeout is non-blocking underneath: MSG_WAITALL may return less.
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    source = (source_host, 0) if source_host else None
    with socket.create_connection((host, port), timeout=30, source_address=source) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", read_exactly(sock, 4))[0]
        frame = read_exactly(sock, size)
    start = codec.skip_tagged_fields(frame, 4) if codec.response_header_flexible(
        api_key, response_cls) else 4
    return codec.decode_body(response_cls, frame, start)


def wait_topic_deleted(cluster, name: str, timeout_s: float = 60.0) -> None:
    """Wait until a deleted topic is gone wherever creating it again looks: ZooKeeper's
    ``/admin/delete_topics/<t>`` and ``/brokers/topics/<t>`` (Kafka's
    ``AdminZkClient.createTopic`` answers TOPIC_ALREADY_EXISTS while either is there: the
    controller removes them after the replicas stopped, after the metadata already dropped
    the topic) and the brokers' Metadata."""
    from tests.conftest import wait_for

    zk = cluster.zk()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def gone() -> bool:
        return (not zk.is_topic_marked_for_deletion(name) and not zk.topic_exists(name)
                and name not in admin.list_topics(timeout=10).topics)

    wait_for(gone, timeout_s, what=f"topic {name!r} deleted from ZooKeeper and the metadata")

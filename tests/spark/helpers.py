"""Kafka-client helpers of the Spark tests (confluent-kafka: producer, admin)."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

TIMEOUT_S = 60


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                  operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    futures[name].result(timeout=TIMEOUT_S)


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_partitions([NewPartitions(name, total)],
                                      operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    futures[name].result(timeout=TIMEOUT_S)


def offsets(bootstrap: str, topic: str, partitions: int, which: str = "latest") -> list[int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    spec = OffsetSpec.latest() if which == "latest" else OffsetSpec.earliest()
    futures = admin.list_offsets({KafkaTP(topic, p): spec for p in range(partitions)},
                                 request_timeout=TIMEOUT_S)
    found = {k.partition: f.result().offset for k, f in futures.items()}
    return [found[p] for p in range(partitions)]


def produce(bootstrap: str, topic: str, records: list[dict]) -> list[tuple[int, int]]:
    """Produce dicts of produce() keyword arguments; returns (partition, offset) per record."""
    acked: dict[int, tuple[int, int]] = {}
    errors: list[object] = []

    def delivered(index: int):
        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
            else:
                acked[index] = (msg.partition(), msg.offset())
        return on_delivery

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
    for i, record in enumerate(records):
        while True:
            try:
                producer.produce(topic, on_delivery=delivered(i), **record)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0, "records not delivered"
    assert not errors, errors[:3]
    return [acked[i] for i in range(len(records))]

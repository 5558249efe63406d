"""Auto-creation raced by many producers (Kafka's AutoTopicCreationManager in ZooKeeper mode):
six confluent-kafka producers, each bootstrapped through a different broker, write to one
brand-new topic at once; the brokers' concurrent creations end in one topic, each loser sees
TOPIC_ALREADY_EXISTS internally, and every record lands."""

from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = [pytest.mark.integration]

PRODUCERS = 6
RECORDS = 40
ROUNDS = 4


def _produce_all(bootstrap: str, topic: str, tag: int, errors: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 60000,
                         "topic.metadata.refresh.interval.ms": 1000})

    def report(err, _msg) -> None:
        if err is not None:
            errors.append(f"producer {tag}: {err.name()} {err.str()}")

    for i in range(RECORDS):
        producer.produce(topic, value=b"%d-%d" % (tag, i), on_delivery=report)
        producer.poll(0)
    left = producer.flush(90)
    if left:
        errors.append(f"producer {tag}: {left} records not delivered")


def _count(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        total = 0
        for p in parts:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            total += high - low
        return total
    finally:
        consumer.close()


def test_producers_racing_to_auto_create_a_topic_lose_nothing(cluster3):
    servers = cluster3.bootstrap.split(",")
    for round_ in range(ROUNDS):
        # A '.' in every other name: the '.'/'_' collision rule must not see the topic itself.
        topic = f"race{'.' if round_ % 2 else '_'}{uuid.uuid4().hex[:8]}"
        errors: list[str] = []
        threads = [threading.Thread(target=_produce_all,
                                    args=(servers[i % len(servers)], topic, i, errors))
                   for i in range(PRODUCERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == [], f"round {round_} ({topic}): {len(errors)} failed: {sorted(set(errors))}"
        assert _count(cluster3.bootstrap, topic) == PRODUCERS * RECORDS

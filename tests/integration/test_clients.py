"""Real Kafka clients against a real Weir cluster: produce, consume, admin."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from tests.conftest import wait_for
from tests.integration.clients import (
    consume_assigned,
    create_topic,
    produce,
    wait_topic_deleted,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("acks", ["1", "all"])
def test_confluent_produce_consume(cluster1, topic_name, acks, compression):
    create_topic(cluster1.bootstrap, topic_name, partitions=2)
    values = [f"{compression}-{acks}-{i}".encode() * 3 for i in range(500)]
    acked = produce(cluster1.bootstrap, topic_name, values, acks=acks,
                    **{"compression.type": compression})
    assert len(acked) == 500
    got = consume_assigned(cluster1.bootstrap, topic_name, [0, 1], 500)
    assert sorted(m.value() for m in got) == sorted(values)
    # each record is read back at the offset its producer was told
    by_pos = {(m.partition(), m.offset()): m.value() for m in got}
    assert all(by_pos[(p, o)] == v for p, o, v in acked)


def test_kafka_python_default_producer_and_consumer(cluster1, topic_name):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=cluster1.bootstrap)  # idempotent by default
    futures = [producer.send(topic_name, key=b"k%d" % i, value=b"v%d" % i) for i in range(300)]
    producer.flush(timeout=60)
    metas = [f.get(timeout=30) for f in futures]
    producer.close(timeout=10)
    assert [m.offset for m in metas] == list(range(300))

    consumer = KafkaConsumer(bootstrap_servers=cluster1.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=20000)
    consumer.assign([TopicPartition(topic_name, 0)])
    records = []
    for record in consumer:
        records.append(record)
        if len(records) == 300:
            break
    consumer.close()
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(300)
    ]


def test_aiokafka_produce_consume(cluster1, topic_name):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=cluster1.bootstrap, acks="all",
                                    enable_idempotence=True)
        await producer.start()
        try:
            for i in range(200):
                await producer.send(topic_name, b"a%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster1.bootstrap,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic_name, 0)])
            got = []
            while len(got) < 200:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                for records in batch.values():
                    got.extend(r.value for r in records)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(run(), 120)) == [b"a%d" % i for i in range(200)]


def test_admin_create_describe_partitions_delete(cluster1, topic_name):
    admin = AdminClient({"bootstrap.servers": cluster1.bootstrap})
    fs = admin.create_topics([NewTopic(topic_name, 2, 1, config={"retention.ms": "3600000"})],
                             operation_timeout=30)
    fs[topic_name].result(30)
    md = admin.list_topics(timeout=10)
    assert len(md.topics[topic_name].partitions) == 2

    # a second create of the same name is refused with TOPIC_ALREADY_EXISTS
    fs = admin.create_topics([NewTopic(topic_name, 1, 1)], operation_timeout=30)
    with pytest.raises(Exception, match="already exists|TOPIC_ALREADY_EXISTS"):
        fs[topic_name].result(30)

    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"

    admin.create_partitions([NewPartitions(topic_name, 4)], operation_timeout=30)[
        topic_name].result(30)
    wait_for(lambda: len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 4,
             30, what="4 partitions")
    produce(cluster1.bootstrap, topic_name, [b"x"], partition=3)

    admin.delete_topics([topic_name], operation_timeout=30)[topic_name].result(30)
    wait_for(lambda: topic_name not in admin.list_topics(timeout=10).topics, 30,
             what="topic deleted")


def test_admin_rejects_bad_topic_requests(cluster1):
    admin = AdminClient({"bootstrap.servers": cluster1.bootstrap})
    bad = {
        "bad name!": NewTopic("bad name!", 1, 1),
        "too-many-replicas": NewTopic("too-many-replicas", 1, 5),
        "bad-config": NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"}),
        "unknown-config": NewTopic("unknown-config", 1, 1, config={"no.such.key": "1"}),
    }
    fs = admin.create_topics(list(bad.values()), operation_timeout=30)
    for name in bad:
        with pytest.raises(KafkaException):
            fs[name].result(30)
    assert not set(bad) & set(admin.list_topics(timeout=10).topics)


def test_list_offsets_earliest_latest_and_by_time(cluster1, topic_name):
    from confluent_kafka import Consumer

    create_topic(cluster1.bootstrap, topic_name)
    produce(cluster1.bootstrap, topic_name, [b"%d" % i for i in range(50)])
    consumer = Consumer({"bootstrap.servers": cluster1.bootstrap, "group.id": "lo"})
    try:
        low, high = consumer.get_watermark_offsets(CkTopicPartition(topic_name, 0), timeout=10)
        assert (low, high) == (0, 50)
        found = consumer.offsets_for_times([CkTopicPartition(topic_name, 0, 0)], timeout=10)
        assert found[0].offset == 0
        future = consumer.offsets_for_times(
            [CkTopicPartition(topic_name, 0, 2**62)], timeout=10)
        assert future[0].offset == -1  # no record that late: the end (Kafka answers -1)
    finally:
        consumer.close()



def test_list_offsets_max_timestamp_is_the_record_in_its_batch(cluster1, topic_name):
    """KIP-734 ListOffsets MAX_TIMESTAMP (-3): the offset of the record holding the largest
    timestamp, also inside a batch (Kafka 3.8+: RecordBatch.offsetOfMaxTimestamp, the fix of
    KAFKA-16310), not the batch's base offset (librdkafka's 0081_admin ListOffsets)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import OffsetSpec

    create_topic(cluster1.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": cluster1.bootstrap, "linger.ms": 1000})
    for ts in (10_000_100, 10_000_400, 10_000_250):  # one batch: offsets 0, 1, 2
        producer.produce(topic_name, b"m", partition=0, timestamp=ts)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": cluster1.bootstrap})
    tp = CkTopicPartition(topic_name, 0)
    found = admin.list_offsets({tp: OffsetSpec.max_timestamp()},
                               request_timeout=30)[tp].result(timeout=30)
    assert (found.offset, found.timestamp) == (1, 10_000_400)

def test_auto_create_topic_on_produce(cluster1, topic_name):
    acked = produce(cluster1.bootstrap, topic_name, [b"auto"])
    assert acked[0][1] == 0


def test_deleting_a_topic_removes_its_committed_offsets(cluster1, topic_name):
    """Kafka's GroupCoordinator.onPartitionsDeleted: once a topic is deleted its committed
    offsets are gone from the group, so a topic created again under the same name is read
    from auto.offset.reset, not from the old topic's offsets."""
    from confluent_kafka import Consumer
    from confluent_kafka import ConsumerGroupTopicPartitions as GroupTps

    group = f"{topic_name}-g"
    keep = f"{topic_name}-keep"
    admin = AdminClient({"bootstrap.servers": cluster1.bootstrap})
    for name in (topic_name, keep):
        create_topic(cluster1.bootstrap, name)
        produce(cluster1.bootstrap, name, [b"old-%d" % i for i in range(10)])
    consumer = Consumer({"bootstrap.servers": cluster1.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[CkTopicPartition(topic_name, 0, 8), CkTopicPartition(keep, 0, 6)],
                        asynchronous=False)
    finally:
        consumer.close()

    def committed() -> dict[str, int]:
        answer = admin.list_consumer_group_offsets([GroupTps(group)])[group].result(30)
        return {tp.topic: tp.offset for tp in answer.topic_partitions if tp.offset >= 0}

    assert committed() == {topic_name: 8, keep: 6}
    admin.delete_topics([topic_name], operation_timeout=30)[topic_name].result(30)
    wait_for(lambda: committed() == {keep: 6}, 30, what="the deleted topic's offsets removed")
    wait_topic_deleted(cluster1, topic_name)  # created again below: not before it is gone

    create_topic(cluster1.bootstrap, topic_name)
    wait_for(lambda: topic_name in admin.list_topics(timeout=10).topics, 30, what="re-created")
    produce(cluster1.bootstrap, topic_name, [b"new-%d" % i for i in range(3)])
    reader = Consumer({"bootstrap.servers": cluster1.bootstrap, "group.id": group,
                       "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        reader.subscribe([topic_name])
        got: list[bytes] = []
        wait_for(lambda: got.extend(m.value() for m in reader.consume(10, 0.5)
                                    if m.error() is None) or len(got) >= 3,
                 60, what="the new topic's records from the start")
        assert got == [b"new-0", b"new-1", b"new-2"]
    finally:
        reader.close()

"""DeleteRecords across replicas, and fetch from follower (KIP-392) with rack-aware brokers."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kio.index import load_request_schema

from tests.conftest import wait_for
from tests.integration.clients import consume_assigned, create_topic, produce
from tests.integration.replication_checks import partition_isrs, partition_leaders
from weir.ops.cluster import LocalCluster
from weir.protocol import codec
from weir.protocol.client import BrokerConnection
from weir.protocol.errors import ErrorCode

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def racked(tmp_path_factory):
    """Three brokers in racks r1, r2, r3 with the rack-aware replica selector."""
    cluster = LocalCluster(tmp_path_factory.mktemp("racks") / "data", brokers=3, port_base=0,
                           overrides={"replica.selector.class": SELECTOR})
    cluster.start(timeout_s=90)
    try:
        for broker_id in cluster.broker_ids:
            cluster.stop_broker(broker_id)
            with open(cluster.config_path(broker_id), "a") as f:
                f.write(f"broker.rack=r{broker_id}\n")
            cluster.start_broker(broker_id)
        cluster.wait_for_brokers(cluster.broker_ids, timeout_s=60)
        yield cluster
    finally:
        cluster.stop()


def test_delete_records_moves_the_low_watermark_on_every_replica(racked, topic_name):
    create_topic(racked.bootstrap, topic_name, 1, 3)
    produce(racked.bootstrap, topic_name, [b"%d" % i for i in range(100)], acks="all")
    admin = AdminClient({"bootstrap.servers": racked.bootstrap})
    futures = admin.delete_records([CkTopicPartition(topic_name, 0, 60)],
                                   operation_timeout=30)
    result = next(iter(futures.values())).result(30)
    assert result.low_watermark == 60
    consumer = Consumer({"bootstrap.servers": racked.bootstrap, "group.id": "dr"})
    try:
        assert consumer.get_watermark_offsets(CkTopicPartition(topic_name, 0), 10) == (60, 100)
    finally:
        consumer.close()
    got = consume_assigned(racked.bootstrap, topic_name, [0], 40)
    assert [m.offset() for m in got] == list(range(60, 100))


def test_consumer_in_a_followers_rack_reads_from_that_follower(racked, topic_name):
    create_topic(racked.bootstrap, topic_name, 1, 3)
    produce(racked.bootstrap, topic_name, [b"r%d" % i for i in range(30)], acks="all")
    wait_for(lambda: len(partition_isrs(racked.bootstrap, topic_name)[0]) == 3, 30,
             what="full ISR")
    leader = partition_leaders(racked.bootstrap, topic_name)[0]
    follower = next(b for b in racked.broker_ids if b != leader)
    slots = {s.id: s for s in racked.brokers}

    async def fetch(broker_id: int) -> object:
        conn = BrokerConnection(slots[broker_id].host, slots[broker_id].port)
        await conn.connect()
        try:
            cls = load_request_schema(1, 11)
            request = codec.build(
                cls, replica_id=-1, max_wait=datetime.timedelta(milliseconds=100),
                min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, rack_id=f"r{follower}",
                topics=[{"topic": topic_name, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}])
            response = await conn.request(request)
            return response.responses[0].partitions[0]
        finally:
            await conn.close()

    at_leader = asyncio.run(fetch(leader))
    assert at_leader.error_code == ErrorCode.none
    assert at_leader.preferred_read_replica == follower
    assert not at_leader.records
    # The follower learns the leader's high watermark with its next fetch (up to
    # replica.fetch.wait.max.ms later) and serves consumers up to it.
    def follower_caught_up():
        result = asyncio.run(fetch(follower))
        return result if result.high_watermark == 30 else None

    at_follower = wait_for(follower_caught_up, 30, what="the follower's high watermark")
    assert at_follower.error_code == ErrorCode.none and at_follower.records

    # A real client with client.rack follows the redirection and reads everything.
    got = consume_assigned(racked.bootstrap, topic_name, [0], 30,
                           **{"client.rack": f"r{follower}"})
    assert [m.value() for m in got] == [b"r%d" % i for i in range(30)]

"""Transaction markers between brokers over a secured inter-broker listener (SASL_SSL,
SCRAM-SHA-512): the coordinator reaches the partition leaders with the listener's TLS and
SASL settings, as the controller channel and the fetchers do."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient

from tests.conftest import wait_for
from tests.integration.clients import create_topic
from tests.integration.security_cluster import start_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _every_broker_knows_every_broker(cluster) -> bool:
    return all(len(AdminClient({"bootstrap.servers": f"{s.host}:{s.port}"})
                   .list_topics(timeout=10).brokers) == len(cluster.broker_ids)
               for s in cluster.brokers)


def test_commit_and_abort_with_markers_over_sasl_ssl(tmp_path):
    cluster, _material, _ports = start_cluster(tmp_path)
    try:
        cluster.start(timeout_s=90)
        wait_for(lambda: _every_broker_knows_every_broker(cluster), 60, interval_s=0.3,
                 what="broker metadata")
        bootstrap = cluster.bootstrap  # PLAINTEXT for the client; brokers talk SASL_SSL
        topic = f"sec-txn-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions=2, replication=2)
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"sec-{topic}",
                      "acks": "all"})
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(6):
            p.produce(topic, f"keep-{i}".encode(), partition=i % 2)
        p.commit_transaction(60)
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, f"drop-{i}".encode(), partition=i % 2)
        p.flush(30)
        p.abort_transaction(60)
        p.begin_transaction()  # the previous markers must be done for this to be served
        p.produce(topic, b"last", partition=0)
        p.commit_transaction(60)

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sec-reader",
                             "isolation.level": "read_committed",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([CTopicPartition(topic, 0, 0), CTopicPartition(topic, 1, 0)])
        seen: list[bytes] = []

        def all_committed_seen() -> bool:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                seen.append(msg.value())
            return len(seen) >= 7

        try:
            wait_for(all_committed_seen, 60, interval_s=0, what="committed records")
        finally:
            consumer.close()
        assert sorted(seen) == sorted([f"keep-{i}".encode() for i in range(6)] + [b"last"])
    finally:
        cluster.stop()

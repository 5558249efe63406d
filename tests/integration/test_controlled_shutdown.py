"""Controlled shutdown: a rolling restart of every broker (SIGTERM) while an idempotent
producer and a group consumer run — zero failed sends, nothing lost or duplicated."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from tests.conftest import wait_for
from tests.integration.clients import consume_assigned, create_topic
from tests.integration.replication_checks import BackgroundProducer, partition_isrs
from weir.ops.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 3


class GroupConsumer:
    """One consumer in a group that counts records only once their offsets are committed.

    Each polled batch is committed synchronously before it is counted, and on a failed
    commit (the coordinator may be moving) every partition is sought back to the batch's
    first record there, so what it counts is exactly what the group consumed: a record
    counted twice would mean the group's committed position went backwards.  (One commit
    per batch, not per record: a commit waits for the offsets topic's replication, and a
    commit per record would make this consumer slower than the producer on a busy machine.)"""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"{topic}-readers",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
        })
        self.consumer.subscribe([topic])
        self.values: list[bytes] = []
        self.errors: list[object] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = []
            for msg in self.consumer.consume(num_messages=500, timeout=0.2):
                if msg.error():
                    self.errors.append(msg.error())
                else:
                    batch.append(msg)
            if not batch:
                continue
            ends: dict[tuple[str, int], int] = {}
            for msg in batch:
                ends[(msg.topic(), msg.partition())] = msg.offset() + 1
            try:
                self.consumer.commit(offsets=[TopicPartition(t, p, end)
                                              for (t, p), end in ends.items()],
                                     asynchronous=False)
            except KafkaException:
                firsts: dict[tuple[str, int], int] = {}
                for msg in batch:
                    firsts.setdefault((msg.topic(), msg.partition()), msg.offset())
                for (t, p), first in firsts.items():
                    try:
                        self.consumer.seek(TopicPartition(t, p, first))
                    except KafkaException:
                        pass  # revoked meanwhile: it resumes from the committed offset
                continue
            self.values.extend(msg.value() for msg in batch)
        self.consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def test_rolling_restart_with_controlled_shutdown(tmp_path, topic_name):
    cluster = LocalCluster(tmp_path / "data", brokers=3, port_base=0,
                           overrides={"controlled.shutdown.retry.backoff.ms": "500"})
    cluster.start(timeout_s=90)
    consumer = None
    try:
        create_topic(cluster.bootstrap, topic_name, PARTITIONS, 3, {"min.insync.replicas": "2"})
        consumer = GroupConsumer(cluster.bootstrap, topic_name)
        with BackgroundProducer(cluster.bootstrap, topic_name, PARTITIONS) as producer:
            wait_for(lambda: producer.acked_count() >= 300, 60, what="first records")
            for broker_id in cluster.broker_ids:
                cluster.stop_broker(broker_id)  # SIGTERM: controlled shutdown, then exit
                log = cluster.log_path(broker_id).read_text()
                assert f"controlled shutdown of broker {broker_id} succeeded" in log
                n = producer.acked_count()
                wait_for(lambda n=n: producer.acked_count() >= n + 200, 60,
                         what=f"progress while broker {broker_id} is down")
                cluster.start_broker(broker_id)
                cluster.wait_for_brokers([broker_id], timeout_s=60)
                wait_for(lambda: all(len(isr) == 3 for isr in
                                     partition_isrs(cluster.bootstrap, topic_name).values()),
                         60, what=f"broker {broker_id} back in every ISR")
            producer.stop()
        assert not producer.failed, f"failed sends: {producer.failed[:5]}"
        acked = {v for _, _, v in producer.acked}
        wait_for(lambda: acked <= set(consumer.values), 90, what="every record consumed")
        consumer.stop()
        # The log holds every record once (the idempotent producer's retries across
        # leader moves were deduplicated) ...
        stored = [m.value() for m in consume_assigned(
            cluster.bootstrap, topic_name, list(range(PARTITIONS)), len(acked))]
        assert len(stored) == len(set(stored)) == len(acked), "duplicates in the log"
        # ... and the group consumed each once.
        assert len(consumer.values) == len(set(consumer.values)), "duplicates consumed"
        assert not set(consumer.values) - acked  # nothing unacknowledged either
    finally:
        if consumer is not None:
            consumer.stop()
        cluster.stop()

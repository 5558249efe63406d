"""An idempotent producer's acknowledgements carry their offsets when the partition leader
is SIGKILLed with sends in flight (real ZooKeeper, three real brokers, confluent-kafka).

librdkafka delivers a message with no offset on two paths only (``rdkafka_request.c``): a
DUPLICATE_SEQUENCE_NUMBER answer, taken for success (Kafka 3.x never sends it for a
produce: a retried batch among the producer's last five gets its original offsets, an older
one OUT_OF_ORDER_SEQUENCE_NUMBER), and ``rd_kafka_dr_implicit_ack``, when a later batch
succeeds while an earlier one waits for its retry after an error.  Both are logged at the
``eos`` debug level (DUPSEQ, IMPLICITACK): the test keeps those lines to name the path if
an offset is ever missing.
"""

from __future__ import annotations

import logging
import signal

import pytest

from tests.conftest import wait_for
from tests.integration.clients import create_topic
from tests.integration.conftest import serve_cluster
from tests.integration.replication_checks import (
    BackgroundProducer,
    partition_isrs,
    partition_leaders,
    verify_exactly_once,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from serve_cluster(tmp_path_factory, 3, {})


class _OffsetlessPaths(logging.Handler):
    """librdkafka's log lines naming an acknowledgement without an offset."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.seen = 0  # every eos line: the client's log does reach this handler

    def emit(self, record: logging.LogRecord) -> None:
        self.seen += 1
        text = record.getMessage()
        if "IMPLICITACK" in text or "DUPSEQ" in text:
            self.lines.append(text)


def test_sigkill_of_the_leader_mid_flight_keeps_every_offset(cluster, topic_name):
    create_topic(cluster.bootstrap, topic_name, PARTITIONS, 3, {"min.insync.replicas": "2"})
    paths = _OffsetlessPaths()
    logger = logging.getLogger(f"librdkafka.{topic_name}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(paths)
    producer = BackgroundProducer(cluster.bootstrap, topic_name, PARTITIONS,
                                  debug="eos", logger=logger, **{"request.timeout.ms": 10000})
    with producer:
        wait_for(lambda: producer.acked_count() >= 300, 60, what="first acknowledgements")
        victim = partition_leaders(cluster.bootstrap, topic_name)[0]
        cluster.kill_broker(victim, signal.SIGKILL)  # with sends to it in flight
        n = producer.acked_count()
        wait_for(lambda: producer.acked_count() >= n + 300, 90,
                 what=f"acknowledgements from a new leader after broker {victim} died")
        cluster.start_broker(victim)
        cluster.wait_for_brokers([victim], timeout_s=60)
        wait_for(lambda: all(len(isr) == 3 for isr in
                             partition_isrs(cluster.bootstrap, topic_name).values()),
                 90, what=f"broker {victim} back in every ISR")
        producer.stop()
    assert not producer.failed, f"failed sends: {producer.failed[:5]}"
    offsetless = [(p, o, v) for p, o, v in producer.acked if o is None or o < 0]
    assert not offsetless, (f"{len(offsetless)} acknowledged without an offset, e.g. "
                            f"{offsetless[:3]}; librdkafka said: {paths.lines[:5]}")
    assert paths.seen and not paths.lines
    verify_exactly_once(cluster.bootstrap, topic_name, PARTITIONS, producer)

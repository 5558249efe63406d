"""acks=all through the DelayedProduce, seen by a client on the wire: with a follower in
the ISR that has stopped fetching (SIGSTOP), an acks=all Produce expires with
REQUEST_TIMED_OUT and still carries the offset its records were appended at, while acks=1
on the same partition is answered at once; once the follower runs again acks=all
completes with NONE."""

from __future__ import annotations

import datetime
import time

import pytest

from tests.conftest import wait_for
from tests.integration.clients import create_topic, raw_request
from tests.integration.conftest import serve_cluster
from tests.integration.replication_checks import partition_isrs, partition_leaders
from weir.protocol.errors import ErrorCode
from weir.records.builder import build_batch

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # A follower that stops fetching stays in the ISR for 30 s: long enough for the
    # test's produces to wait on it.
    yield from serve_cluster(tmp_path_factory, 2, {"replica.lag.time.max.ms": "30000"})


def _produce(slot, topic: str, acks: int, timeout_ms: int) -> tuple[ErrorCode, int, float]:
    """(error, base offset, seconds to the answer) of one Produce v9 of one record."""
    start = time.monotonic()
    response = raw_request(
        slot.host, slot.port, 0, 9, transactional_id=None, acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=[{"name": topic, "partition_data": [
            {"index": 0, "records": build_batch([b"v"])}]}])
    (partition,) = response.responses[0].partition_responses
    return (ErrorCode(partition.error_code), int(partition.base_offset),
            time.monotonic() - start)


def test_acks_all_expires_with_its_offset_while_a_follower_is_stopped(cluster, topic_name):
    create_topic(cluster.bootstrap, topic_name, 1, 2)
    wait_for(lambda: partition_isrs(cluster.bootstrap, topic_name)[0] == [1, 2], 60,
             what="both replicas in the ISR")
    leader_id = partition_leaders(cluster.bootstrap, topic_name)[0]
    leader = next(s for s in cluster.brokers if s.id == leader_id)
    follower = next(s for s in cluster.brokers if s.id != leader_id)
    assert wait_for(lambda: _produce(leader, topic_name, -1, 10_000)[:2]
                    == (ErrorCode.none, 0), 60, what="a first acks=all produce")
    cluster.pause_broker(follower.id)
    try:
        error, offset, took = _produce(leader, topic_name, -1, 500)
        assert (error, offset) == (ErrorCode.request_timed_out, 1)
        assert took >= 0.45
        error, offset, _took = _produce(leader, topic_name, 1, 10_000)
        assert (error, offset) == (ErrorCode.none, 2)
    finally:
        cluster.resume_broker(follower.id)
    error, offset, _took = _produce(leader, topic_name, -1, 30_000)
    assert (error, offset) == (ErrorCode.none, 3)
    assert partition_isrs(cluster.bootstrap, topic_name)[0] == [1, 2]

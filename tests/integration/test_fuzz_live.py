"""Structure-aware fuzzing of a live broker: every API and version it advertises.

Each case is a valid request of a random shape, mutated where decoders break (lengths set
huge, negative or off by one, truncation at field boundaries, random bytes and bodies, the
wrong header version), sent on its own connection. The broker must answer or close that
connection, stay up, keep its memory bounded, and keep serving ordinary clients. Kafka's
``SocketServer`` and its generated ``Readable`` code are the reference: a request that cannot
be parsed closes the connection.
"""

from __future__ import annotations

import asyncio
import os
import struct

import pytest

from fuzz.cases import Case, cases, make_case, targets
from fuzz.live import rss_bytes, run_cases
from tests.integration.clients import consume_assigned, create_topic, produce

pytestmark = pytest.mark.integration

# Enough to rotate every mutation through every API version at least once per seed.
PER_TARGET = 10
SEEDS = (1, 2)


def _still_serves(cluster, topic: str) -> None:
    create_topic(cluster.bootstrap, topic)
    produce(cluster.bootstrap, topic, [b"alive"])
    assert consume_assigned(cluster.bootstrap, topic, [0], 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzzed_requests_never_take_the_broker_down(cluster1, topic_name, seed):
    slot = cluster1.brokers[0]
    pid = cluster1.broker_pid(slot.id)
    assert pid is not None
    batch = list(cases(seed, PER_TARGET))
    outcomes, bad = asyncio.run(run_cases(slot.host, slot.port, batch))
    assert not bad, [(c.target.name, c.target.version, c.mutation, c.seed, o) for c, o in bad]
    assert outcomes["closed"] > 0 and outcomes["answered"] > 0, outcomes
    assert cluster1.broker_pid(slot.id) == pid, "the broker process restarted or died"
    os.kill(pid, 0)
    assert rss_bytes(pid) < 1 << 30, f"broker RSS {rss_bytes(pid)} after {len(batch)} cases"
    _still_serves(cluster1, f"{topic_name}-{seed}")


def test_valid_requests_of_every_api_and_version_are_answered(cluster1):
    """A well-formed request is answered, never met by a closed connection: Kafka closes a
    connection only for bytes it cannot parse. (Fetch v4-v6, which carry no session id, used
    to fail inside the handler and close the connection.)"""
    slot = cluster1.brokers[0]
    batch = [make_case(t, "valid", i) for t in targets() for i in range(3)]
    outcomes, bad = asyncio.run(run_cases(slot.host, slot.port, batch, wait_s=5.0))
    assert not bad
    assert set(outcomes) <= {"answered", "pending"}, outcomes


def test_huge_compact_array_lengths_close_only_that_connection(cluster1, topic_name):
    """The reported crash: a compact array length of 2**34 in Fetch v12, Metadata v10 and
    AlterPartition v2 made the native decoder allocate it and abort the process."""
    slot = cluster1.brokers[0]
    pid = cluster1.broker_pid(slot.id)
    by_key = {(t.api_key, t.version): t for t in targets()}
    huge = b"\x80\x80\x80\x80\x40"  # uvarint 2**34
    crafted = [
        # Metadata v10: topics is the first field.
        Case(by_key[(3, 10)], "crafted", 0, huge + b"\x00" * 40, False),
        # Fetch v12: 25 bytes of fixed fields, then the topics array.
        Case(by_key[(1, 12)], "crafted", 0, b"\x00" * 25 + huge + b"\x00" * 40, False),
        # AlterPartition v2: broker id (4), broker epoch (8), then the topics array.
        Case(by_key[(56, 2)], "crafted", 0, b"\x00" * 12 + huge + b"\x00" * 40, False),
        # Metadata v4 (classic): int32 array length near the maximum.
        Case(by_key[(3, 4)], "crafted", 0, struct.pack(">i", (1 << 31) - 1) + b"\x00" * 8,
             False),
    ]
    outcomes, bad = asyncio.run(run_cases(slot.host, slot.port, crafted))
    assert outcomes == {"closed": len(crafted)}, outcomes
    assert not bad
    assert cluster1.broker_pid(slot.id) == pid
    _still_serves(cluster1, topic_name)


def test_a_topic_too_large_for_zookeeper_is_refused_before_it_is_built(cluster1):
    """A CreateTopics for 2**31-1 partitions made the broker build the whole assignment in
    memory (several GB, the event loop stuck) before ZooKeeper could refuse the znode; it is
    refused at once with INVALID_PARTITIONS."""
    from tests.integration.clients import raw_request
    from weir.protocol.errors import ErrorCode

    slot = cluster1.brokers[0]
    pid = cluster1.broker_pid(slot.id)
    # CreateTopics v7, which librdkafka refuses to send with such a count.
    response = raw_request(slot.host, slot.port, 19, 7, timeout_ms=10000, topics=[
        {"name": "huge", "num_partitions": (1 << 31) - 1, "replication_factor": 1}])
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.invalid_partitions, topic
    assert "jute.maxbuffer" in topic.error_message
    assert cluster1.broker_pid(slot.id) == pid
    assert rss_bytes(pid) < 1 << 30


def test_a_case_is_a_pure_function_of_its_seed():
    target = targets()[0]
    assert make_case(target, "length-huge", 7) == make_case(target, "length-huge", 7)

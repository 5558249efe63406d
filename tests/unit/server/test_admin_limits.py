"""Replica assignment of new topics: over the brokers registered in ZooKeeper, and refused
before being built when it cannot be stored in one znode."""

from __future__ import annotations

import pytest

from weir.protocol.errors import ErrorCode, KafkaError
from weir.server import admin

BROKERS = [1, 2, 3]


def test_huge_partition_counts_are_refused_without_building_the_assignment():
    with pytest.raises(KafkaError) as err:
        admin.plan_assignment(BROKERS, (1 << 31) - 1, 1, None)
    assert err.value.code == ErrorCode.invalid_partitions
    assert "jute.maxbuffer" in err.value.message


def test_adding_partitions_counts_the_existing_ones():
    with pytest.raises(KafkaError):
        admin.plan_assignment(BROKERS, 10, 3, None, start_partition=200_000)


def test_ordinary_sizes_are_planned():
    plan = admin.plan_assignment(BROKERS, 1000, 3, None)
    assert len(plan) == 1000 and all(len(r) == 3 for r in plan.values())
    assert len(admin.plan_assignment(BROKERS, 30_000, 3, None)) == 30_000


def test_replicas_are_assigned_over_the_brokers_registered_in_zookeeper():
    """As Kafka's AdminZkClient: a broker registered a moment ago counts even before this
    broker's metadata cache has heard of it from the controller."""
    import asyncio
    from types import SimpleNamespace

    broker = SimpleNamespace(
        broker_id=1, metadata=SimpleNamespace(brokers={1: None}),
        zk=SimpleNamespace(get_all_brokers=lambda: {1: None, 2: None, 3: None}))
    live = asyncio.run(admin.registered_broker_ids(broker))
    assert live == [1, 2, 3]
    assert all(len(r) == 3 for r in admin.plan_assignment(live, 6, 3, None).values())

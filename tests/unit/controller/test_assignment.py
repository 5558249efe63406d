"""Kafka's rack-unaware replica placement."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from weir.controller.assignment import assign_replicas
from weir.protocol.errors import ErrorCode, KafkaError


def test_fixed_start_matches_kafka_layout() -> None:
    # Kafka's AdminUtils doc example: 5 brokers, 10 partitions, RF 3, start index 0.
    result = assign_replicas([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0)
    assert result[0] == [0, 1, 2]
    assert result[4] == [4, 0, 1]
    assert result[5] == [0, 2, 3]
    assert result[9] == [4, 1, 2]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize(("n_brokers", "partitions", "rf"), [(3, 6, 3), (5, 10, 2), (4, 12, 3),
                                                             (6, 60, 3), (1, 3, 1)])
def test_spreads_evenly(seed: int, n_brokers: int, partitions: int, rf: int) -> None:
    ids = [10 + i for i in range(n_brokers)]
    result = assign_replicas(ids, partitions, rf, rng=random.Random(seed))
    assert sorted(result) == list(range(partitions))
    for replicas in result.values():
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= set(ids)
    leaders = Counter(r[0] for r in result.values())
    assert max(leaders.values()) - min(leaders.values(), default=0) <= 1
    assert len(leaders) == min(n_brokers, partitions)
    total = Counter(b for r in result.values() for b in r)
    assert max(total.values()) - min(total.values()) <= max(1, rf - 1)


def test_start_partition_numbers_new_partitions() -> None:
    result = assign_replicas([1, 2, 3], 2, 2, start_partition=3, rng=random.Random(1))
    assert sorted(result) == [3, 4]


def test_rejects_replication_factor_above_brokers() -> None:
    with pytest.raises(KafkaError) as info:
        assign_replicas([1, 2], 3, 3)
    assert info.value.code == ErrorCode.invalid_replication_factor


@pytest.mark.parametrize("rf", [0, -1])
def test_rejects_non_positive_replication_factor(rf: int) -> None:
    with pytest.raises(KafkaError) as info:
        assign_replicas([1, 2], 3, rf)
    assert info.value.code == ErrorCode.invalid_replication_factor


@pytest.mark.parametrize("partitions", [0, -3])
def test_rejects_non_positive_partitions(partitions: int) -> None:
    with pytest.raises(KafkaError) as info:
        assign_replicas([1, 2], partitions, 1)
    assert info.value.code == ErrorCode.invalid_partitions

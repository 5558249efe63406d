"""Topic assignments that cannot be stored in one znode are refused before being built."""

from __future__ import annotations

import pytest

from weir.protocol.errors import ErrorCode, KafkaError
from weir.server import admin


class _Metadata:
    def __init__(self) -> None:
        self.brokers = {1: None, 2: None, 3: None}


class _Broker:
    def __init__(self) -> None:
        self.broker_id = 1
        self.metadata = _Metadata()


def test_huge_partition_counts_are_refused_without_building_the_assignment():
    with pytest.raises(KafkaError) as err:
        admin.plan_assignment(_Broker(), (1 << 31) - 1, 1, None)
    assert err.value.code == ErrorCode.invalid_partitions
    assert "jute.maxbuffer" in err.value.message


def test_adding_partitions_counts_the_existing_ones():
    with pytest.raises(KafkaError):
        admin.plan_assignment(_Broker(), 10, 3, None, start_partition=200_000)


def test_ordinary_sizes_are_planned():
    plan = admin.plan_assignment(_Broker(), 1000, 3, None)
    assert len(plan) == 1000 and all(len(r) == 3 for r in plan.values())
    assert len(admin.plan_assignment(_Broker(), 30_000, 3, None)) == 30_000

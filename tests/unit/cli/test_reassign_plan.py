"""kafka-reassign-partitions' plan files and --generate: bad input is a named one-line error."""

from __future__ import annotations

import pytest

from weir.cli.reassign import ReassignError, generate, parse_plan
from weir.common import TopicPartition


def test_a_plan_is_read_and_bad_plans_say_what_is_wrong() -> None:
    plan = parse_plan('{"version": 1, "partitions": [{"topic": "t", "partition": 0, '
                      '"replicas": [1, 2]}]}')
    assert plan == {TopicPartition("t", 0): [1, 2]}
    for text, said in (
            ('{"version": 1, "partitions": [{"topic": "t", "partition": 0}]}',
             "a partition entry has no 'replicas'"),
            ("[]", 'expected {"version": 1, "partitions": '),
            ('{"partitions": {"t": 0}}', 'expected {"version": 1, "partitions": '),
            ("{bad", "Expecting property name"),
            ('{"partitions": []}', "the plan names no partitions")):
        with pytest.raises(ReassignError, match="") as info:
            parse_plan(text)
        assert said in str(info.value), text


def test_generate_needs_as_many_brokers_as_replicas() -> None:
    current = {TopicPartition("t", 0): [1, 2, 3], TopicPartition("t", 1): [2, 3, 1]}
    proposed = generate(current, ["t"], [1, 2, 3])
    assert sorted(proposed) == sorted(current) and all(len(r) == 3 for r in proposed.values())
    with pytest.raises(ReassignError) as info:
        generate(current, ["t"], [1, 2])
    assert str(info.value) == ("topic t: INVALID_REPLICATION_FACTOR: Replication factor: 3 "
                               "larger than available brokers: 2")

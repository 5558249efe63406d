"""The offset-reset planner: Kafka's ConsumerGroupCommand rules for each scenario."""

from __future__ import annotations

import pytest

from weir.common import TopicPartition
from weir.ops.offset_reset import (
    ResetError,
    export_csv,
    parse_datetime_ms,
    parse_duration_ms,
    parse_reset_csv,
    parse_topic_partitions,
    plan_reset,
    target_time_ms,
)

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)
STARTS = {A0: 10, A1: 0}
ENDS = {A0: 50, A1: 7}


def plan(scenario, value=None, committed=None, by_time=None, parts=(A0, A1)):
    return plan_reset(scenario, value, parts, committed or {}, STARTS, ENDS, by_time)


def test_earliest_and_latest_use_the_log_bounds():
    assert plan("to-earliest").offsets == {A0: 10, A1: 0}
    assert plan("to-latest").offsets == {A0: 50, A1: 7}


def test_to_offset_is_clamped_into_the_log_with_kafka_warnings():
    result = plan("to-offset", 5)
    assert result.offsets == {A0: 10, A1: 5}
    assert result.warnings == [("New offset (5) is lower than earliest offset for topic "
                                "partition a-0. Value will be set to 10")]
    high = plan("to-offset", 60)
    assert high.offsets == {A0: 50, A1: 7}
    assert "higher than latest offset for topic partition a-1. Value will be set to 7" in (
        high.warnings[1])


def test_shift_by_moves_from_the_committed_offset_and_needs_one():
    assert plan("shift-by", -3, {A0: 20, A1: 2}).offsets == {A0: 17, A1: 0}
    assert plan("shift-by", 4, {A0: 48, A1: 2}).offsets == {A0: 50, A1: 6}
    with pytest.raises(ResetError, match="no current committed offset"):
        plan("shift-by", 1, {A0: 20})


def test_time_scenarios_fall_back_to_the_log_end_for_empty_answers():
    result = plan("to-datetime", "x", by_time={A0: 33, A1: -1})
    assert result.offsets == {A0: 33, A1: 7}
    assert result.warnings == [("Partition 1 from topic a is empty. Falling back to latest "
                                "known offset.")]


def test_to_current_keeps_committed_or_takes_the_end():
    assert plan("to-current", committed={A0: 12}).offsets == {A0: 12, A1: 7}


def test_a_missing_lookup_names_the_partition():
    with pytest.raises(ResetError, match="a-2"):
        plan("to-earliest", parts=(TopicPartition("a", 2),))


def test_durations_follow_java_duration_parse():
    assert parse_duration_ms("PT15M") == 15 * 60_000
    assert parse_duration_ms("P1DT2H") == (24 + 2) * 3_600_000
    assert parse_duration_ms("PT0.5S") == 500
    assert parse_duration_ms("-PT1M") == -60_000
    for bad in ("15m", "P", "PT", "P1H", "PT1D"):
        with pytest.raises(ResetError):
            parse_duration_ms(bad)
    assert target_time_ms("by-duration", "PT1M", 100_000) == 40_000


def test_datetimes_are_utc_unless_they_name_a_zone():
    assert parse_datetime_ms("1970-01-01T00:00:01.500") == 1500
    assert parse_datetime_ms("1970-01-01T01:00:00+01:00") == 0
    assert parse_datetime_ms("1970-01-01T00:00:02Z") == 2000
    for bad in ("1970-01-01", "yesterdayTnoon"):
        with pytest.raises(ResetError):
            parse_datetime_ms(bad)


def test_topic_partition_specs():
    assert parse_topic_partitions("orders") == ("orders", None)
    assert parse_topic_partitions("orders:2,0") == ("orders", [0, 2])
    for bad in (":1", "orders:", "orders:x", "orders:-1"):
        with pytest.raises(ResetError):
            parse_topic_partitions(bad)


def test_reset_plans_from_a_file_round_trip_and_are_clamped():
    csv = export_csv({A1: 3, A0: 99})
    assert csv == "a,0,99\na,1,3\n"
    plan = parse_reset_csv(csv, "g")
    result = plan_reset("from-file", plan, plan, {}, STARTS, ENDS)
    assert result.offsets == {A0: 50, A1: 3} and "Value will be set to 50" in result.warnings[0]
    grouped = parse_reset_csv("g,a,0,12\nother,a,1,1\n", "g")
    assert grouped == {A0: 12}
    with pytest.raises(ResetError, match="No reset plan for group g"):
        parse_reset_csv("other,a,1,1\n", "g")
    with pytest.raises(ResetError, match="line 2"):
        parse_reset_csv("a,0,1\na,x,1\n", "g")

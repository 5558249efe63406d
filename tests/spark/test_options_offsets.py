"""Pure logic of the data source: option checking and offset arithmetic (no Spark run)."""

from __future__ import annotations

import pytest

from weir.common import TopicPartition as TP
from weir.spark.offsets import (
    DataLossError,
    OffsetRange,
    from_json,
    plan_ranges,
    rate_limit,
    split_ranges,
    to_json,
)
from weir.spark.options import OptionError, parse_read_options, parse_write_options

B = {"kafka.bootstrap.servers": "h:1"}


def test_read_defaults_batch_and_stream():
    batch = parse_read_options({**B, "subscribe": "a, b"}, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = parse_read_options({"bootstrap.servers": "h:1", "subscribePattern": "a.*",
                                 "maxOffsetsPerTrigger": "5"}, streaming=True)
    assert stream.starting.kind == "latest" and stream.ending is None
    assert stream.max_offsets_per_trigger == 5
    assert stream.client_conf == {"bootstrap.servers": "h:1"}


def test_options_are_case_insensitive_and_pass_kafka_settings():
    opts = parse_read_options({**B, "SUBSCRIBE": "t", "kafka.client.id": "me",
                               "STARTINGOFFSETS": '{"t":{"0":5,"1":-2}}'}, streaming=True)
    assert opts.starting.offsets == {TP("t", 0): 5, TP("t", 1): -2}
    assert opts.client_conf["client.id"] == "me"


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "t", "kafka.group.id": "g"}, "cannot be overridden"),
    ({"subscribe": "t", "bootstrap.servers": "other:2"}, "disagree"),
    ({"subscribePattern": "("}, "not a valid regex"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":-3}}'}, ">= -2"),
    ({"subscribe": "t", "startingTimestamp": "soon"}, "milliseconds"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "3"}, "not supported"),
    ({"subscribe": "t", "startingOffsetsByTimestampStrategy": "x"}, "'error' or 'latest'"),
])
def test_bad_read_options(options, message):
    with pytest.raises(OptionError, match=message):
        parse_read_options({**B, **options}, streaming=True)


def test_write_options():
    cols = {"value": "binary", "key": "string", "topic": "string"}
    assert parse_write_options({**B}, cols).topic is None
    assert parse_write_options({**B, "topic": "x"}, {"value": "string"}).topic == "x"
    with pytest.raises(OptionError, match="column 'key' must be"):
        parse_write_options({**B, "topic": "x"}, {"value": "string", "key": "int"})
    with pytest.raises(OptionError, match="column 'partition' must be"):
        parse_write_options({**B, "topic": "x"}, {"value": "string", "partition": "bigint"})


def test_offsets_json_round_trip():
    offsets = {TP("b", 1): 7, TP("a", 10): 3, TP("a", 2): 0}
    doc = to_json(offsets)
    assert doc == {"a": {"2": 0, "10": 3}, "b": {"1": 7}}
    assert from_json(doc) == offsets


def test_rate_limit_is_proportional_and_bounded():
    start = {TP("t", 0): 0, TP("t", 1): 100}
    latest = {TP("t", 0): 300, TP("t", 1): 200, TP("t", 2): 10}
    end = rate_limit(start, latest, 41)
    taken = {tp: end[tp] - start.get(tp, 0) for tp in end}
    assert sum(taken.values()) == 41
    assert taken[TP("t", 0)] > taken[TP("t", 1)] > taken[TP("t", 2)] >= 1
    assert rate_limit(start, latest, 10_000) == latest
    tiny = rate_limit(start, latest, 1)
    assert sum(tiny[tp] - start.get(tp, 0) for tp in tiny) == 1


def test_split_ranges():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 0, 10)]
    assert split_ranges(ranges, None, None) == [ranges[0], ranges[2]]
    pieces = split_ranges(ranges, 6, None)
    assert len(pieces) >= 6 and sum(p.size for p in pieces) == 110
    assert all(p.size <= 25 for p in split_ranges(ranges, None, 25))


def test_plan_ranges_data_loss():
    start = {TP("t", 0): 0, TP("gone", 0): 4}
    end = {TP("t", 0): 50, TP("t", 1): 20}
    floors = {TP("t", 0): 10, TP("t", 1): 0}
    with pytest.raises(DataLossError, match="gone-0 is gone"):
        plan_ranges(start, end, lambda tps: floors, True)
    del start[TP("gone", 0)]
    with pytest.raises(DataLossError, match="below the log start"):
        plan_ranges(start, end, lambda tps: floors, True)
    ranges = plan_ranges(start, end, lambda tps: floors, False)
    assert ranges == [OffsetRange("t", 0, 10, 50), OffsetRange("t", 1, 0, 20)]
    with pytest.raises(DataLossError, match="went back"):
        plan_ranges({TP("t", 0): 60}, end, lambda tps: floors, True)


def test_byte_limit_spreads_by_byte_lag_and_always_progresses():
    from weir.spark.offsets import byte_limit

    a, b = TP("t", 0), TP("t", 1)
    start, latest = {a: 0, b: 100}, {a: 1000, b: 200}
    assert byte_limit(start, latest, {a: 100.0, b: 100.0}, 10**9) == latest
    # 1000 records of 100 B and 100 of 1000 B: equal byte lags, half the budget each
    end = byte_limit(start, latest, {a: 100.0, b: 1000.0}, 20_000)
    assert end == {a: 100, b: 110}
    # a budget smaller than one record still reads one record of each lagging partition
    assert byte_limit(start, latest, {a: 100.0, b: 1000.0}, 10) == {a: 1, b: 101}
    assert byte_limit({a: 1000, b: 100}, latest, {}, 50) == {a: 1000, b: 150}  # 1 B each


def test_max_bytes_per_trigger_is_a_streaming_option():
    opts = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "maxBytesPerTrigger": "4096"}
    assert parse_read_options(opts, streaming=True).max_bytes_per_trigger == 4096
    with pytest.raises(OptionError, match="streaming queries only"):
        parse_read_options(opts, streaming=False)
    with pytest.raises(OptionError, match="positive integer"):
        parse_read_options({**opts, "maxBytesPerTrigger": "-1"}, streaming=True)

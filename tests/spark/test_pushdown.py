"""Filter pushdown on batch reads: the pure planning logic, then real Spark on a broker."""

from __future__ import annotations

import datetime
import re

import pytest
from pyspark.sql import functions as F
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from tests.spark.helpers import create_topic, produce
from weir.common import TopicPartition
from weir.spark import pushdown

TP = TopicPartition


def test_partition_and_topic_filters_are_exact_and_choose_partitions():
    filters = [In(("partition",), (0, 2)), Not(EqualTo(("topic",), "b")),
               StringStartsWith(("topic",), "a"), IsNotNull(("partition",))]
    pushed, left = pushdown.push(filters)
    assert left == []
    tps = [TP("a", 0), TP("a", 1), TP("a", 2), TP("b", 0), TP("ab", 2)]
    assert [tp for tp in tps if pushed.wants(tp)] == [TP("a", 0), TP("a", 2), TP("ab", 2)]


def test_offset_bounds_narrow_ranges():
    pushed, left = pushdown.push([GreaterThanOrEqual(("offset",), 10),
                                  LessThan(("offset",), 50), GreaterThan(("offset",), 11),
                                  LessThanOrEqual(("offset",), 60)])
    assert left == []
    assert (pushed.offset_from, pushed.offset_until) == (12, 50)
    start = {TP("t", 0): 0, TP("t", 1): 20, TP("t", 2): 0, TP("t", 3): 70}
    end = {TP("t", 0): 100, TP("t", 1): 30, TP("t", 2): 5, TP("t", 3): 90}
    s, e = pushdown.narrow(start, end, pushed)
    assert (s[TP("t", 0)], e[TP("t", 0)]) == (12, 50)
    assert (s[TP("t", 1)], e[TP("t", 1)]) == (20, 30)
    # nothing wanted: an empty range at the planned end (no data-loss check can trip on it)
    assert (s[TP("t", 2)], e[TP("t", 2)]) == (5, 5)
    assert (s[TP("t", 3)], e[TP("t", 3)]) == (90, 90)


def test_offset_in_is_narrowed_and_left_to_spark():
    f = In(("offset",), (7, 3, 40))
    pushed, left = pushdown.push([f])
    assert left == [f] and left[0] is f
    assert (pushed.offset_from, pushed.offset_until) == (3, 41)


def test_timestamp_lower_bounds_are_pushed_but_left_to_spark():
    at = datetime.datetime(2026, 11, 23, 5, 0, 0, 999, tzinfo=datetime.UTC)
    gt = GreaterThan(("timestamp",), at)
    lt = LessThan(("timestamp",), at)
    pushed, left = pushdown.push([gt, lt])
    assert left == [gt, lt]  # timestamps need not grow with offsets: Spark checks both
    assert pushed.timestamp_from_ms == int(at.timestamp() * 1000)  # rounded down to ms
    start = {TP("t", 0): 0, TP("t", 1): 0, TP("t", 2): 8}
    end = {TP("t", 0): 100, TP("t", 1): 100, TP("t", 2): 100}
    s, e = pushdown.narrow(start, end, pushed, {TP("t", 0): 42, TP("t", 1): None,
                                                TP("t", 2): 3})
    assert s == {TP("t", 0): 42, TP("t", 1): 100, TP("t", 2): 8} and e == end


def test_naive_timestamps_are_utc():
    naive = datetime.datetime(1970, 1, 1, 0, 0, 1)
    assert pushdown.timestamp_ms(naive) == 1000
    assert pushdown.timestamp_ms("not a time") is None


def test_other_columns_and_odd_values_are_left_to_spark():
    filters = [EqualTo(("key",), b"k"), EqualTo(("partition",), "1"),
               In(("partition",), (1, None)), EqualTo(("offset",), True),
               LessThan(("timestamp",), datetime.datetime(2026, 1, 1)),
               EqualTo(("timestampType",), 0), Not(EqualTo(("offset",), 3))]
    pushed, left = pushdown.push(filters)
    assert pushed.empty
    assert left == filters


class _FakeSession:
    """What :func:`weir.spark.register` touches: ``conf`` and ``dataSource.register``."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.settings = conf
        self.registered: list[type] = []
        self.conf = self
        self.dataSource = self

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.settings.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.settings[key] = value

    def register(self, cls: type) -> None:
        self.registered.append(cls)


@pytest.mark.parametrize(("conf", "push", "expected_cls", "expected_conf"), [
    ({}, None, "WeirDataSource", None),
    ({"spark.sql.python.filterPushdown.enabled": "false"}, None, "WeirDataSource", "false"),
    ({"spark.sql.python.filterPushdown.enabled": "True"}, None, "WeirFilteringDataSource",
     "True"),
    ({}, True, "WeirFilteringDataSource", "true"),
    ({"spark.sql.python.filterPushdown.enabled": "true"}, False, "WeirDataSource", "true"),
])
def test_register_follows_the_session_setting(conf, push, expected_cls, expected_conf):
    import weir.spark

    session = _FakeSession(dict(conf))
    weir.spark.register(session, push_filters=push)
    assert [c.__name__ for c in session.registered] == [expected_cls]
    assert session.settings.get(weir.spark.PUSHDOWN_CONF) == expected_conf


# -- real Spark and a real broker ----------------------------------------------------------

BASE_TS = 1_700_000_000_000


@pytest.fixture
def pushing(spark):
    """The session with filter pushdown on, as ``register(spark, push_filters=True)`` sets it."""
    import weir.spark

    weir.spark.register(spark, push_filters=True)
    yield spark
    spark.conf.set(weir.spark.PUSHDOWN_CONF, "false")
    weir.spark.register(spark)


@pytest.fixture(scope="module")
def three(bootstrap) -> str:
    """600 records in 3 partitions, record i in partition i % 3, timestamps 1 s apart."""
    topic = "spark-pushdown"
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 3,
                                "timestamp": BASE_TS + i * 1000} for i in range(600)])
    return topic


def _rows(df) -> set:
    return {(r.partition, r.offset, bytes(r.value)) for r in df.collect()}


@pytest.mark.integration
def test_pushed_filters_read_fewer_records_and_give_the_same_rows(pushing, bootstrap, three):
    def load():
        return (pushing.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", three).option("maxRecordsPerPartition", "10").load())

    everything = load()
    assert everything.rdd.getNumPartitions() == 60  # 3 x 200 records in pieces of 10
    queries = [
        F.col("partition") == 1,
        (F.col("partition").isin(0, 2)) & (F.col("offset") >= 150) & (F.col("offset") < 160),
        F.col("timestamp") >= F.lit(datetime.datetime.fromtimestamp(
            (BASE_TS + 540_000) / 1000, datetime.UTC)),
        (F.col("topic") == three) & (F.col("offset") > 195),
        F.col("topic") == "another-topic",
    ]
    expected_pieces = [20, 2, 6, 3, 0]
    for condition, pieces in zip(queries, expected_pieces, strict=True):
        filtered = load().where(condition)
        assert _rows(filtered) == _rows(everything.where(condition)), condition
        assert filtered.rdd.getNumPartitions() == max(pieces, 1), condition
    assert load().where(F.col("timestamp") >= F.lit(datetime.datetime.fromtimestamp(
        (BASE_TS + 540_000) / 1000, datetime.UTC))).count() == 60
    # exact filters (partition, offset bounds) are not evaluated again; timestamps are
    assert not re.search(r"\bFilter \(", _plan(load().where(F.col("partition") == 1)))
    assert re.search(r"\bFilter \(", _plan(load().where(F.col("timestamp") > F.lit(
        datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)))))


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.integration
def test_without_pushdown_the_same_queries_read_everything(spark, bootstrap, three):
    df = (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", three).option("maxRecordsPerPartition", "10").load()
          .where(F.col("partition") == 1))
    assert df.count() == 200
    assert df.rdd.getNumPartitions() == 60

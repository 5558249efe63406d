"""PySpark data source for Weir topics (and any Kafka cluster): ``format("weir")``.

    import weir.spark
    weir.spark.register(spark)
    df = (spark.read.format("weir")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Options and schema are those of Spark's Kafka source; see README.md in this package.
Needs pyspark>=4.2 (the Python Data Source API with admission control), pyarrow and pandas<3.
"""

from __future__ import annotations

from typing import Any

from weir.spark.offsets import DataLossError
from weir.spark.options import OptionError
from weir.spark.source import SHORT_NAME, WeirDataSource, WeirFilteringDataSource

__all__ = ["SHORT_NAME", "DataLossError", "OptionError", "WeirDataSource",
           "WeirFilteringDataSource", "register"]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, push_filters: bool | None = None) -> None:
    """Register the ``weir`` data source with a SparkSession (idempotent).

    ``push_filters``: whether batch reads take the filters Spark pushes down (on topic,
    partition, offset and timestamp: fewer records fetched).  PySpark pushes filters to
    Python data sources only when ``spark.sql.python.filterPushdown.enabled`` is true, and
    fails the reads of a source that implements pushdown while it is false; so by default
    (None) pushdown follows that setting as it is now, and True sets it to true.
    """
    if push_filters is None:
        push_filters = str(spark.conf.get(PUSHDOWN_CONF, "false")).strip().lower() == "true"
    elif push_filters:
        spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(WeirFilteringDataSource if push_filters else WeirDataSource)

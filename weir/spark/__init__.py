"""PySpark data source for Weir topics (and any Kafka cluster): ``format("weir")``.

    import weir.spark
    weir.spark.register(spark)
    df = (spark.read.format("weir")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

    history = weir.spark.read(spark, {"kafka.bootstrap.servers": "127.0.0.1:9092",
                                      "subscribe": "events"})  # the topic's table + the log

``weir.spark.read`` needs no ``register``; a small read is done on the driver.

Options and schema are those of Spark's Kafka source; see README.md in this package.
Needs pyspark>=4.2 (the Python Data Source API with admission control), pyarrow and pandas<3.
"""

from __future__ import annotations

from typing import Any

from weir.spark.history import read
from weir.spark.offsets import DataLossError
from weir.spark.options import OptionError
from weir.spark.source import SHORT_NAME, WeirDataSource

__all__ = ["SHORT_NAME", "DataLossError", "OptionError", "WeirDataSource", "read", "register"]


def register(spark: Any) -> None:
    """Register the ``weir`` data source with a SparkSession (idempotent)."""
    spark.dataSource.register(WeirDataSource)

"""PySpark data source for Weir topics (and any Kafka cluster): ``format("weir")``.

    import weir.spark
    weir.spark.register(spark)
    df = (spark.read.format("weir")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())      # the topic's table + the log above it

    history = weir.spark.read(spark, {"kafka.bootstrap.servers": "127.0.0.1:9092",
                                      "subscribe": "events"})  # the same, without register

In a session given to :func:`register`, a batch ``spark.read.format("weir")...load()`` is
:func:`read`: the offsets a topic's Iceberg table holds through Spark's Parquet reader, the
rest over the Kafka protocol, a small read on the driver; option ``history`` = ``table``
(the default when a table exists) or ``log`` (:mod:`weir.spark.session`).  Streams, writes
and SQL ``USING weir`` use the Python data source :class:`WeirDataSource` (the log only),
registered with Spark the first time they need it (:mod:`weir.spark.registration`).

Options and schema are those of Spark's Kafka source; see README.md in this package.
Needs pyspark>=4.2 (the Python Data Source API with admission control), pyarrow and pandas<3.
"""

from __future__ import annotations

from typing import Any

from weir.spark import session
from weir.spark.history import read
from weir.spark.offsets import DataLossError
from weir.spark.options import OptionError
from weir.spark.source import SHORT_NAME, WeirDataSource

__all__ = ["SHORT_NAME", "DataLossError", "OptionError", "WeirDataSource", "read", "register"]


def register(spark: Any) -> None:
    """Make ``format("weir")`` work in a SparkSession (idempotent).

    A batch ``spark.read.format("weir")...load()`` in that session then reads as
    :func:`read` does (the topic's table through Spark's Parquet reader, the log above it,
    small reads on the driver); streams, writes and SQL ``USING weir`` use the Python data
    source :class:`WeirDataSource`, which is registered with Spark when first needed
    (:mod:`weir.spark.session`)."""
    session.register(spark)

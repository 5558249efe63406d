"""Clickstream pipeline on Spark: click events → per-page counts per minute → a Weir topic
and a Parquet table.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python examples/clickstream/pipeline.py \
        --bootstrap 127.0.0.1:9092 --output examples/output

Two Structured Streaming queries read the ``clicks`` topic with the ``weir`` data source,
count clicks per page in 1-minute event-time windows (30 s watermark, append mode: each
window is emitted once, when the watermark has passed it) and write the counts

* as JSON records keyed by page to the ``page-counts`` topic (``format("weir")``), and
* to a Parquet table under ``--output``/page_counts.

At the end, a batch query counts clicks per page over the topic's whole history with
``spark.read.format("weir")`` (in a session given to ``weir.spark.register``): from the
topic's Iceberg table where it has one (``docs/tables.md``), and only the newer offsets over
the Kafka protocol.

By default the queries run with ``Trigger.AvailableNow`` (process what is there, then stop);
``--follow`` keeps them running every 10 s.  Checkpoints under ``--output`` make a re-run
continue where the last one stopped: every click is counted exactly once.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import weir.spark

EVENT_SCHEMA = "user string, page string, event_time timestamp"


def page_counts(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """The streaming aggregation: clicks per page per minute."""
    clicks = (spark.readStream.format("weir")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "5000")
              .load()
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.*"))
    return (clicks.withWatermark("event_time", "30 seconds")
            .groupBy(F.window("event_time", "1 minute"), "page").count()
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "page", "count"))


def start_queries(counts: DataFrame, bootstrap: str, output: Path, follow: bool) -> list:
    def trigger(writer):
        return writer.trigger(processingTime="10 seconds") if follow \
            else writer.trigger(availableNow=True)

    to_topic = trigger(
        counts.select(F.col("page").alias("key"),
                      F.to_json(F.struct("window_start", "window_end", "page", "count"))
                      .alias("value"))
        .writeStream.format("weir").outputMode("append")
        .option("kafka.bootstrap.servers", bootstrap).option("topic", "page-counts")
        .option("checkpointLocation", str(output / "checkpoints" / "to-topic"))
    ).queryName("page_counts_to_topic").start()
    to_parquet = trigger(
        counts.writeStream.format("parquet").outputMode("append")
        .option("path", str(output / "page_counts"))
        .option("checkpointLocation", str(output / "checkpoints" / "to-parquet"))
    ).queryName("page_counts_to_parquet").start()
    return [to_topic, to_parquet]


def history(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """Every click so far, as a batch: from the topic's table (Parquet, through Spark's own
    reader) when the topic has one, and only the offsets above the table over the protocol
    (``format("weir")`` of a registered session; see docs/spark.md)."""
    return (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).load()
            .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
            .select("e.*"))


def show_results(spark: SparkSession, bootstrap: str, output: Path, topic: str) -> None:
    clicks = history(spark, bootstrap, topic)
    print(f"topic {topic}: {clicks.count()} clicks in its history; the busiest pages:")
    clicks.groupBy("page").count().orderBy(F.desc("count"), "page").show(5, truncate=False)
    table = spark.read.parquet(str(output / "page_counts"))
    print(f"Parquet table {output / 'page_counts'}: {table.count()} (window, page) rows")
    table.orderBy(F.desc("window_start"), F.desc("count")).show(8, truncate=False)
    records = (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", "page-counts").load())
    print(f"topic page-counts: {records.count()} records; the latest:")
    (records.orderBy(F.desc("offset")).select(F.col("key").cast("string"),
                                               F.col("value").cast("string"))
     .show(5, truncate=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--output", default=str(Path(__file__).parent.parent / "output"))
    parser.add_argument("--follow", action="store_true", help="keep running (10 s trigger)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    output = Path(args.output).resolve()

    spark = (SparkSession.builder.appName("weir-clickstream")
             .master(os.environ.get("SPARK_MASTER", "local[2]"))
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    weir.spark.register(spark)
    try:
        queries = start_queries(page_counts(spark, args.bootstrap, args.topic), args.bootstrap,
                                output, args.follow)
        for query in queries:
            query.awaitTermination()
            if query.exception() is not None:
                raise SystemExit(f"query {query.name} failed: {query.exception()}")
        show_results(spark, args.bootstrap, output, args.topic)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()

"""A streaming query with an ``exactlyOnce`` Weir sink, run as its own process so a test can
SIGKILL it in the middle of its micro-batches (``python -m tests.spark.eo_driver BOOTSTRAP
SOURCE TARGET CHECKPOINT``)."""

from __future__ import annotations

import os
import sys


def main(bootstrap: str, source: str, target: str, checkpoint: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import weir.spark

    spark = (SparkSession.builder.master("local[2]").appName("weir-eo-driver")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "1g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    weir.spark.register(spark)
    stream = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "20").load().selectExpr("value", "partition"))
    query = (stream.writeStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", target).option("exactlyOnce", "true")
             .option("checkpointLocation", checkpoint).start())
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])

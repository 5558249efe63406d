"""Spark Structured Streaming over a Weir topic: Trigger.AvailableNow throughput and the
end-to-end latency of a running query.

    .venv/bin/python -m bench run spark_stream [--records 1000000] [--partitions 4] [--runs 3]
        [--rate 1000] [--seconds 30] [--bootstrap host:port]

One run, one Spark session (``local[2]``), one Weir broker (a LocalCluster in a temp dir
unless ``--bootstrap`` is given):

1. **Throughput** (``trigger(availableNow=True)``): ``--records`` records (100-byte values,
   as ``bench/spark_count.py``) are produced into a topic of ``--partitions`` partitions and
   copied into a Parquet directory.  Then, ``--runs`` times and alternating, a streaming
   query reads everything from ``earliest`` into Spark's ``noop`` sink with a fresh
   checkpoint: once from the weir source, once from the same rows as a Parquet file stream.
   Timed from ``start()`` to the end of ``awaitTermination()``; the rows each query read are
   checked against ``--records``.  Reported: rows/s of each, and their ratio.
2. **End-to-end latency**: a query reads a second topic from ``latest`` with the default
   trigger (the next micro-batch starts as soon as the previous one ends) into a
   ``foreachBatch`` sink that collects each micro-batch's values on the driver.  Once it
   runs, a producer in another process sends ``--rate`` records/s for ``--seconds`` s
   (``linger.ms=5``, ``acks=all``), each value carrying ``time.time_ns()`` taken just before
   ``produce()``.  A record's latency is the time the sink got its micro-batch's rows minus
   that stamp: produced → row in the sink.  Percentiles are over every record; the
   micro-batches' own durations (Spark's ``durationMs``) show where the time goes.

Results: ``bench/results/spark_stream.{md,json}`` (``python -m bench run``), with the commit, the machine and its load average.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.harness import out_dir

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = out_dir()
QUERY_TIMEOUT_S = 600
PERCENTILES = (50, 90, 99, 99.9)
DURATION_KEYS = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets",
                 "triggerExecution")


# -- the paced producer (its own process) ---------------------------------------------------

def paced_producer(bootstrap: str, topic: str, rate: int, seconds: float,
                   start: mp.Event, done: mp.Event) -> None:
    """Send ``rate`` records/s for ``seconds`` s, each value starting with time_ns()."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "enable.idempotence": True})
    producer.list_topics(topic, timeout=30)
    start.wait(QUERY_TIMEOUT_S)
    pad = b"x" * 80
    total = int(rate * seconds)
    begin = time.monotonic()
    for i in range(total):
        due = begin + i / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, value=b"%020d" % time.time_ns() + pad, key=b"%d" % (i % 1000))
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("records not delivered")
    done.set()


# -- streaming queries ------------------------------------------------------------------------

def available_now(spark, reader, work: Path, name: str) -> tuple[float, int, list[dict]]:
    """Run ``reader`` to the end with Trigger.AvailableNow into the noop sink."""
    checkpoint = work / f"cp-{name}-{time.monotonic_ns()}"
    start = time.perf_counter()
    query = (reader.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        if not query.awaitTermination(QUERY_TIMEOUT_S):
            raise RuntimeError(f"{name}: the availableNow query did not finish")
        seconds = time.perf_counter() - start
    finally:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"{name}: {query.exception()}")
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    shutil.rmtree(checkpoint, ignore_errors=True)
    return seconds, sum(p["numInputRows"] for p in progress), progress


class LatencySink:
    """foreachBatch: records (arrival - produce stamp) of every row, in seconds."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.rows = 0
        self.lock = threading.Lock()

    def __call__(self, df, batch_id: int) -> None:
        rows = df.select("value").collect()
        now = time.time_ns()
        lat = [(now - int(r.value[:20])) / 1e9 for r in rows]
        with self.lock:
            self.latencies += lat
            self.rows += len(rows)


def percentiles(values: list[float]) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    out = {f"p{p:g}": round(ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]
                            * 1000, 1) for p in PERCENTILES}
    out["max"] = round(ordered[-1] * 1000, 1)
    out["mean"] = round(statistics.fmean(ordered) * 1000, 1)
    return out


def latency_run(spark, bootstrap: str, topic: str, args: argparse.Namespace,
                work: Path) -> dict:
    import weir.spark  # noqa: F401 - registered by the caller

    sink = LatencySink()
    reader = (spark.readStream.format("weir").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "latest").load())
    query = (reader.writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(work / "cp-latency")).start())
    ctx = mp.get_context("spawn")
    go, done = ctx.Event(), ctx.Event()
    producer = ctx.Process(target=paced_producer,
                           args=(bootstrap, topic, args.rate, args.seconds, go, done))
    producer.start()
    try:
        deadline = time.monotonic() + 120
        while not query.recentProgress:  # the first micro-batch has fixed the start offsets
            if time.monotonic() > deadline or query.exception() is not None:
                raise RuntimeError(f"the latency query did not start: {query.exception()}")
            time.sleep(0.1)
        load_start = os.getloadavg()
        go.set()
        expected = int(args.rate * args.seconds)
        deadline = time.monotonic() + args.seconds + 120
        while sink.rows < expected:
            if time.monotonic() > deadline or query.exception() is not None:
                raise RuntimeError(f"the sink got {sink.rows} of {expected} records:"
                                   f" {query.exception()}")
            time.sleep(0.2)
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
        producer.join(60)
        if producer.is_alive():
            producer.kill()
    batches = [p["durationMs"] for p in progress]
    return {
        "rate": args.rate, "seconds": args.seconds, "records": sink.rows,
        "latency_ms": percentiles(sink.latencies),
        "micro_batches_seen": len(progress),
        "rows_per_micro_batch": round(statistics.fmean(p["numInputRows"] for p in progress), 1)
        if progress else 0,
        "micro_batch_ms_median": {k: statistics.median(b.get(k, 0) for b in batches)
                                  for k in DURATION_KEYS} if batches else {},
        "load_average": [round(x, 2) for x in load_start],
    }


def throughput_runs(spark, bootstrap: str, topic: str, args: argparse.Namespace,
                    work: Path) -> dict:
    parquet = str(work / "stream.parquet")
    (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
     .option("subscribe", topic).load().write.parquet(parquet))
    schema = spark.read.parquet(parquet).schema
    sources = {
        "weir": lambda: (spark.readStream.format("weir")
                         .option("kafka.bootstrap.servers", bootstrap)
                         .option("subscribe", topic).option("startingOffsets", "earliest")
                         .load()),
        "parquet": lambda: spark.readStream.schema(schema).parquet(parquet),
    }
    runs: dict[str, list[dict]] = {name: [] for name in sources}
    for i in range(args.runs + 1):  # the first round warms up (workers, JIT, page cache)
        order = list(sources) if i % 2 == 0 else list(reversed(sources))
        for name in order:
            load = os.getloadavg()[0]
            seconds, rows, progress = available_now(spark, sources[name](), work, name)
            if rows != args.records:
                raise RuntimeError(f"{name}: read {rows} rows, expected {args.records}")
            if i == 0:
                continue
            runs[name].append({"seconds": round(seconds, 3), "micro_batches": len(progress),
                               "load_average": round(load, 2)})
            print(f"availableNow {name}: {seconds:.3f} s ({rows / seconds:,.0f} rows/s),"
                  f" {len(progress)} micro-batch(es), load {load:.2f}", flush=True)
    out: dict = {"runs": runs}
    for name, done in runs.items():
        seconds = [r["seconds"] for r in done]
        out[name] = {"median_s": statistics.median(seconds), "min_s": min(seconds),
                     "max_s": max(seconds),
                     "rows_per_s": round(args.records / statistics.median(seconds))}
    out["ratio"] = round(out["weir"]["rows_per_s"] / out["parquet"]["rows_per_s"], 4)
    pairs = [p["seconds"] / w["seconds"] for w, p in zip(runs["weir"], runs["parquet"],
                                                         strict=True)]
    out["ratio_per_round"] = [round(x, 4) for x in pairs]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=int, default=1000, help="records/s (latency)")
    parser.add_argument("--seconds", type=float, default=30.0, help="latency run length")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()

    from bench.harness import machine
    from bench.spark_count import produce

    info = machine()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="weir-spark-stream-"))
    cluster = None
    if args.bootstrap is None:
        from weir.ops.cluster import LocalCluster

        cluster = LocalCluster(work / "cluster", brokers=1, port_base=0)
        cluster.start(timeout_s=120)
    bootstrap = args.bootstrap or cluster.bootstrap
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import SparkSession

    import weir.spark

    spark = None
    try:
        stamp = int(time.time())
        bulk, live = f"bench-stream-{stamp}", f"bench-latency-{stamp}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(live, args.partitions, 1)])[live].result(60)
        spark = (SparkSession.builder.master(args.master).appName("weir-spark-stream-bench")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        weir.spark.register(spark)
        result: dict = {"records": args.records, "partitions": args.partitions,
                        "master": args.master}
        if not args.skip_throughput:
            produce(bootstrap, bulk, args.records, args.partitions)
            result["available_now"] = throughput_runs(spark, bootstrap, bulk, args, work)
        result["latency"] = latency_run(spark, bootstrap, live, args, work)
        print(json.dumps(result["latency"]), flush=True)
    finally:
        if spark is not None:
            spark.stop()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["machine"] = info
    write_results(result, args)


def write_results(result: dict, args: argparse.Namespace) -> None:
    info = result["machine"]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = [f"# Spark Structured Streaming over Weir — {when}", "",
             (f"Commit `{info['commit']}`; {info['cpu']}, {info['cores']} cores (shared with"
              f" the broker and other work); load average {info['load_average_at_start']} at"
              f" the start, {info['load_average_at_end']} at the end. Spark"
              f" `{result['master']}`, one broker, {result['partitions']} partitions."), ""]
    an = result.get("available_now")
    if an:
        lines += [(f"## Trigger.AvailableNow: {result['records']:,} records (100-byte values)"
                  " into the noop sink"), "",
                  "| source | rows/s (median) | runs (s) | load average per run |",
                  "|---|---:|---|---|"]
        for name in ("weir", "parquet"):
            runs = an["runs"][name]
            lines.append(f"| {name} | {an[name]['rows_per_s']:,} |"
                         f" {', '.join(str(r['seconds']) for r in runs)} |"
                         f" {', '.join(str(r['load_average']) for r in runs)} |")
        lines += ["", (f"Weir / Parquet (rows/s, medians): **{an['ratio']}**; per round:"
                  f" {', '.join(map(str, an['ratio_per_round']))}."), ""]
    lat = result["latency"]
    pct = lat["latency_ms"]
    lines += [f"## End-to-end latency at {lat['rate']} records/s for {lat['seconds']:g} s", "",
              ("Produced (`time.time_ns()` before `produce()`, another process) → row in a"
              " `foreachBatch` sink on the driver; default trigger (micro-batches back to"
              " back)."), "",
              "| records | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | mean ms |",
              "|---:|---:|---:|---:|---:|---:|---:|",
              (f"| {lat['records']:,} | {pct['p50']} | {pct['p90']} | {pct['p99']} |"
               f" {pct['p99.9']} | {pct['max']} | {pct['mean']} |"), "",
              (f"{lat['micro_batches_seen']} micro-batches with records,"
               f" {lat['rows_per_micro_batch']} rows each on average. Median duration of"
               " their phases (Spark's `durationMs`, ms): "
               + ", ".join(f"{k} {v:g}" for k, v in lat["micro_batch_ms_median"].items())
               + "."), "", "Produced by `bench/spark_stream.py`."]
    md = "\n".join(lines) + "\n"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"spark_stream-{when}.json").write_text(
        json.dumps({"when": when, "args": vars(args), **result}, indent=2) + "\n")
    (RESULTS / f"spark_stream-{when}.md").write_text(md)
    (RESULTS / "spark_stream-latest.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

"""Spark batch count over a Weir topic vs. over the same rows as Parquet, in one run.

    .venv/bin/python -m bench run spark_count [--records 1000000] [--partitions 4]
        [--bootstrap host:port]   (default: start a one-broker LocalCluster in a temp dir)

Produces ``--records`` records (100-byte values) into a fresh topic, copies the topic into a
Parquet table with Spark, then times, in ``--runs`` interleaved rounds after a warm-up
round (each round runs every query on both sources back to back, alternating which goes
first, so a change of load on a shared machine hits both):

* ``count``          ``df.count()`` on a DataFrame loaded once
* ``scan count``     ``df.where(length(value) > 0).count()`` (the values must be read; a plain
                     Parquet count is answered from file footers)
* ``load + count``   ``spark.read...load().count()``: a new DataFrame each time, so planning
                     is included (Weir: the Python planning worker, Metadata, ListOffsets;
                     Parquet: file listing and footers)

Weir's figure is the ratio of its rows/s to Parquet's: of the medians, and round by round.
The floor (``bench/spark_floor.py``: the same rows served from memory by a Python data source)
is timed the same way: its ratio bounds what any Python data source can reach here.
Before Spark starts, the record decoder alone (:mod:`weir.spark.decode`) is timed on one
core: 100 000 records with 100-byte values in batches of 1 000, uncompressed and with each
codec, best of 5, as records per second of wall time and of CPU time (the machine may be
shared).  ``--decoder-only`` stops there.  Results, with the commit, the machine and its
load average: ``bench/results/spark_count.{md,json}`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import out_dir

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = out_dir()


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                         "batch.size": 1_000_000, "enable.idempotence": True,
                         "queue.buffering.max.messages": 1_000_000})
    payload = b"x" * 90
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=payload + b"%010d" % i, key=b"%d" % (i % 1000))
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300):
        raise RuntimeError("records not delivered")
    return time.perf_counter() - start


def decoder_bench(repeat: int = 5) -> dict:
    """Records/s of the bulk decoder alone, per codec (wall and CPU time, best of N)."""
    from tests.spark.records import encode_batch
    from weir.spark import decode

    records = [(b"%d" % (i % 1000), b"x" * 90 + b"%010d" % i, []) for i in range(1000)]
    result = {"compiled": decode.COMPILED}
    for codec in ("none", "lz4", "zstd", "snappy", "gzip"):
        buf = b"".join(encode_batch(i * 1000, records, codec=codec) for i in range(100))
        decode.decode(buf, "t", 0, 0, 1 << 62)  # compile or load the cached kernel
        wall = cpu = 0.0
        for _ in range(repeat):
            c0, t0 = time.process_time(), time.perf_counter()
            n = decode.decode(buf, "t", 0, 0, 1 << 62).batch.num_rows
            wall = max(wall, n / (time.perf_counter() - t0))
            cpu = max(cpu, n / max(time.process_time() - c0, 1e-9))
        result[codec] = {"bytes": len(buf), "records_per_s_wall": round(wall),
                         "records_per_s_cpu": round(cpu)}
        print(f"decoder {codec}: {wall:,.0f} records/s (wall), {cpu:,.0f} (cpu)", flush=True)
    return result


def rounds(queries: dict, sources: dict, runs: int) -> dict[str, list[dict]]:
    """Time every (query, source) ``runs`` times, interleaved, after one warm-up round.

    Each round runs every query on both sources back to back (Weir first on even rounds,
    Parquet first on odd ones), so a change of load on the shared machine hits both."""
    measured: dict[str, list[dict]] = {f"{q}/{s}": [] for q in queries for s in sources}
    for i in range(runs + 1):
        order = list(sources) if i % 2 == 0 else list(reversed(sources))
        for name, query in queries.items():
            for source in order:
                load = os.getloadavg()[0]
                start = time.perf_counter()
                query(sources[source])
                seconds = time.perf_counter() - start
                if i:  # round 0 warms up: Python workers, JIT cache, page cache
                    measured[f"{name}/{source}"].append({"seconds": round(seconds, 3),
                                                         "load_average": round(load, 2)})
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--decoder-only", action="store_true")
    args = parser.parse_args()
    from bench.harness import machine

    info = machine()
    decoder = decoder_bench()
    if args.decoder_only:
        return

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="weir-spark-bench-"))
    cluster = None
    if args.bootstrap is None:
        from weir.ops.cluster import LocalCluster

        cluster = LocalCluster(work / "cluster", brokers=1, port_base=0)
        cluster.start(timeout_s=120)
    bootstrap = args.bootstrap or cluster.bootstrap
    try:
        result = run(args, bootstrap, work)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["machine"] = info
    result["decoder"] = decoder
    write_results(result)


def run(args: argparse.Namespace, bootstrap: str, work: Path) -> dict:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import weir.spark
    from bench import spark_floor

    topic = f"bench-spark-{int(time.time())}"
    produce_s = produce(bootstrap, topic, args.records, args.partitions)
    spark = (SparkSession.builder.master(args.master).appName("weir-spark-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    weir.spark.register(spark)
    try:
        def load_weir():
            return (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
                    .option("subscribe", topic).load())

        parquet_path = str(work / "table.parquet")
        weir_df = load_weir()
        weir_df.write.parquet(parquet_path)
        parquet_df = spark.read.parquet(parquet_path)
        n_weir, n_parquet = weir_df.count(), parquet_df.count()
        assert n_weir == n_parquet == args.records, (n_weir, n_parquet)
        per_partition = sorted((r["partition"], r["count"])
                               for r in weir_df.groupBy("partition").count().collect())
        spark_floor.register(spark)

        def load_floor():
            return (spark.read.format("weir_floor").option("topic", topic)
                    .option("rows", ",".join(str(n) for _, n in per_partition)).load())

        sources = {"weir": (weir_df, load_weir),
                   "parquet": (parquet_df, lambda: spark.read.parquet(parquet_path)),
                   "floor": (load_floor(), load_floor)}
        queries = {
            "count": lambda s: s[0].count(),
            "scan count": lambda s: s[0].where(F.length("value") > 0).count(),
            "load + count": lambda s: s[1]().count(),
        }
        measured = rounds(queries, sources, args.runs)
    finally:
        spark.stop()
    stats = {}
    for key, runs in measured.items():
        seconds = [r["seconds"] for r in runs]
        stats[key] = {"runs": runs, "median_s": statistics.median(seconds),
                      "min_s": min(seconds), "max_s": max(seconds),
                      "rows_per_s": round(args.records / statistics.median(seconds))}
    ratios: dict[str, dict] = {"weir": {}, "floor": {}}
    for source, by_query in ratios.items():
        for name in queries:
            w, p = measured[f"{name}/{source}"], measured[f"{name}/parquet"]
            per_round = [b["seconds"] / a["seconds"] for a, b in zip(w, p, strict=True)]
            by_query[name] = {
                "of_medians": round(stats[f"{name}/{source}"]["rows_per_s"]
                                    / stats[f"{name}/parquet"]["rows_per_s"], 4),
                "per_round": [round(x, 4) for x in per_round]}
    return {
        "benchmark": "spark batch count: weir topic vs parquet",
        "records": args.records, "partitions": args.partitions, "value_bytes": 100,
        "master": args.master, "runs": args.runs, "produce_seconds": round(produce_s, 2),
        "results": stats, "weir_to_parquet_ratio": ratios["weir"],
        "floor_to_parquet_ratio": ratios["floor"],
        "pyspark": __import__("pyspark").__version__,
    }


def write_results(result: dict) -> None:
    info = result["machine"]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = [
        f"# Spark batch count: Weir topic vs. Parquet — {when}",
        "",
        (f"Commit `{info['commit']}`; {info['cpu']}, {info['cores']} cores shared by Spark"
         f" `{result['master']}`, its Python workers and the broker (and whatever else ran);"
         f" load average {info['load_average_at_start']} at the start,"
         f" {info['load_average_at_end']} at the end; PySpark {result['pyspark']}."),
        (f"{result['records']:,} records ({result['value_bytes']}-byte values) in"
         f" {result['partitions']} partitions, one broker. {result['runs']} interleaved rounds"
         " after a warm-up round; rows/s from the median."),
        "",
        "| query | source | rows/s | median s | min–max s | runs (s) | 1-min load per run |",
        "|---|---|---:|---:|---|---|---|",
    ]
    for key, value in result["results"].items():
        query, source = key.split("/")
        lines.append(f"| {query} | {source} | {value['rows_per_s']:,} | {value['median_s']} |"
                     f" {value['min_s']}–{value['max_s']} |"
                     f" {', '.join(str(r['seconds']) for r in value['runs'])} |"
                     f" {', '.join(str(r['load_average']) for r in value['runs'])} |")
    for source, label in (("weir", "Weir"), ("floor", "Floor (`bench/spark_floor.py`)")):
        lines += ["", (f"{label} / Parquet (rows/s; ratio of the medians, then each round's"
                  " own):"), ""]
        lines += [f"* {name}: **{r['of_medians']}**"
                  f" (rounds: {', '.join(map(str, r['per_round']))})"
                  for name, r in result[f"{source}_to_parquet_ratio"].items()]
    lines += ["", ("The floor is a Python data source that serves rows of the same shape from"
                   " memory (no broker, no Fetch, no decoding): what Spark itself costs for a"
                   " Python data source. No Python data source can beat it on this machine,"
                   " so its ratio bounds Weir's.")]
    lines += ["", ("`count` and `scan count` reuse one DataFrame per source (planned once:"
                   " Weir's offsets, Parquet's file listing); `load + count` builds a new one"
                   " each time, so it includes planning (for Weir: a Python planning worker,"
                   " Metadata and ListOffsets).")]
    decoder = result.get("decoder")
    if decoder:
        lines += ["", ("Decoder alone (`weir.spark.decode`, one core, 100-byte values, batches of"
                  f" 1 000 records, best of 5; compiled: {decoder['compiled']}):"), "",
                  "| codec | records/s (wall) | records/s (CPU) |", "|---|---:|---:|"]
        lines += [f"| {codec} | {v['records_per_s_wall']:,} | {v['records_per_s_cpu']:,} |"
                  for codec, v in decoder.items() if codec != "compiled"]
    lines += ["", ("Earlier runs: `spark_count.md` (2026-11-22, the columnar read path before"
              " the Python worker's heap was frozen); before the columnar read path (a"
              " confluent-kafka consumer, 2026-11-21): count 234,948 rows/s, ratio 0.0605;"
              " scan count 239,900 rows/s, ratio 0.1158."), "",
              "Produced by `bench/spark_count.py`."]
    md = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"spark_count-{when}.json").write_text(
        json.dumps({"when": when, **result}, indent=2) + "\n")
    (RESULTS / f"spark_count-{when}.md").write_text(md)
    (RESULTS / "spark_count-latest.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

"""A full scan of a topic's history through its Iceberg table vs. the same rows in Parquet
written by Spark, in one Spark session.

    .venv/bin/python -m bench run spark_history_scan [--records 1000000] [--partitions 4]
        [--runs 5] [--bootstrap host:port]

Produces ``--records`` records (100-byte values) into a fresh topic on a one-broker
LocalCluster (or ``--bootstrap``), reads it once over the protocol and writes the rows
(a) as the topic's table, as the topic-table contract says (PyIceberg, partitioned by
identity(partition) and day(timestamp), zstd, the ``weir.next-offsets`` marker covering
every record) and (b) with Spark as plain Parquet.  Then, in ``--runs`` interleaved rounds
after a warm-up round (the order alternating), it times on both:

* ``agg value``  ``sum(length(value))``, ``max(value)``: every value is read;
* ``count``      ``df.count()``.

``weir`` is ``weir.spark.read(spark, ...)`` (history=table: Spark's Parquet reader over the
files PyIceberg plans, and the log above the table, here nothing).  The ratio is Parquet's
median time over Weir's (rows/s of Weir / rows/s of Parquet); the goal is >= 0.8.  CPU
seconds per million rows are the CPU time the Spark JVM and its Python workers used during
the query (``/proc``; the broker is not counted).  Results, with the commit, the machine and
its load: ``bench/results/spark_history_scan.{md,json}`` (``python -m bench run``).
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

from bench.harness import machine, out_dir

TICKS = os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def spark_cpu_s(root: int, skip: set[int]) -> float:
    """CPU seconds of ``root``'s process tree (children reaped included), minus ``skip``."""
    tree = _children()
    total = 0.0
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in skip:
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / TICKS  # utime stime cutime cstime
        todo += tree.get(pid, [])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()
    info = machine()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="weir-history-bench-"))
    cluster = None
    skip: set[int] = set()
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        from weir.ops.cluster import LocalCluster

        cluster = LocalCluster(work / "cluster", brokers=1, port_base=0,
                               overrides={"num.partitions": "1"})
        cluster.start(timeout_s=120)
        bootstrap = cluster.bootstrap
        skip = set(_children().get(os.getpid(), []))  # the broker and ZooKeeper
    try:
        result = run(args, bootstrap, work, skip)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)  # the broker's log, the table, the Parquet
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["machine"] = info
    write_results(result)


def run(args: argparse.Namespace, bootstrap: str, work: Path, skip: set[int]) -> dict:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import weir.spark
    from bench.spark_count import produce
    from tests.spark.tables import catalog_options, open_catalog, write_table

    topic = f"bench-history-{int(time.time())}"
    produce_s = produce(bootstrap, topic, args.records, args.partitions)
    spark = (SparkSession.builder.master(args.master).appName("weir-history-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    weir.spark.register(spark)
    base = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
    try:
        log_df = spark.read.format("weir").options(**base, includeHeaders="true").load()
        rows = log_df.toArrow()
        assert rows.num_rows == args.records
        ends = {r["partition"]: r["end"] for r in
                log_df.groupBy("partition").agg(F.max("offset").alias("end")).collect()}
        # The Parquet path is measured, also for a --records small enough that
        # weir.spark.read would otherwise read it on the driver (weir.spark.driver).
        catalog = {**catalog_options(work / "iceberg"), "weir.driverReadMaxRecords": "0"}
        write_table(open_catalog(catalog), topic, rows, {p: e + 1 for p, e in ends.items()})
        parquet_path = str(work / "spark.parquet")
        log_df.drop("headers").write.parquet(parquet_path)
        sources = {"weir": weir.spark.read(spark, {**base, **catalog}),
                   "parquet": spark.read.parquet(parquet_path)}
        assert sources["weir"].count() == sources["parquet"].count() == args.records
        queries = {
            "agg value": lambda df: df.agg(F.sum(F.length("value")), F.max("value")).collect(),
            "count": lambda df: df.count(),
        }
        plans = {"weir": lambda: weir.spark.read(spark, {**base, **catalog}),
                 "parquet": lambda: spark.read.parquet(parquet_path)}
        root = os.getpid()
        measured: dict[str, list[dict]] = {f"{q}/{s}": [] for q in queries for s in sources}
        planning: dict[str, list[float]] = {s: [] for s in sources}
        for i in range(args.runs + 1):
            order = list(sources) if i % 2 == 0 else list(reversed(sources))
            for source in order:  # a new DataFrame: catalog, files, offsets (not timed above)
                start = time.perf_counter()
                plans[source]()
                if i:
                    planning[source].append(round(time.perf_counter() - start, 3))
            for name, query in queries.items():
                for source in order:
                    load = os.getloadavg()[0]
                    cpu0, start = spark_cpu_s(root, skip), time.perf_counter()
                    query(sources[source])
                    seconds = time.perf_counter() - start
                    cpu = spark_cpu_s(root, skip) - cpu0
                    if i:  # round 0 warms up
                        measured[f"{name}/{source}"].append(
                            {"seconds": round(seconds, 3), "cpu_s": round(cpu, 3),
                             "load_average": round(load, 2)})
        plan = sources["weir"]._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.stop()
    stats = {}
    for key, runs in measured.items():
        median = statistics.median(r["seconds"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        stats[key] = {"runs": runs, "median_s": median,
                      "rows_per_s": round(args.records / median),
                      "cpu_s_per_million_rows": round(cpu / args.records * 1e6, 3)}
    ratios = {}
    for name in queries:
        w, p = measured[f"{name}/weir"], measured[f"{name}/parquet"]
        ratios[name] = {
            "of_medians": round(stats[f"{name}/parquet"]["median_s"]
                                / stats[f"{name}/weir"]["median_s"], 3),
            "per_round": [round(b["seconds"] / a["seconds"], 3)
                          for a, b in zip(w, p, strict=True)],
            "of_cpu_medians": round(stats[f"{name}/parquet"]["cpu_s_per_million_rows"]
                                    / max(stats[f"{name}/weir"]["cpu_s_per_million_rows"],
                                          1e-9), 3)}
    return {"benchmark": "spark history scan: topic table (weir.spark.read) vs spark parquet",
            "dataframe_creation_s": {k: {"median": statistics.median(v), "runs": v}
                                     for k, v in planning.items()},
            "records": args.records, "partitions": args.partitions, "value_bytes": 100,
            "master": args.master, "runs": args.runs, "produce_seconds": round(produce_s, 2),
            "results": stats, "weir_to_parquet_ratio": ratios, "weir_plan": plan,
            "pyspark": __import__("pyspark").__version__}


def write_results(result: dict) -> None:
    info = result["machine"]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = [
        f"# Spark history scan: topic table vs. Parquet written by Spark — {when}", "",
        (f"Commit `{info['commit']}`; {info['cpu']}, {info['cores']} cores shared by Spark"
         f" `{result['master']}`, the broker and other work; load average"
         f" {info['load_average_at_start']} at the start, {info['load_average_at_end']} at"
         f" the end; PySpark {result['pyspark']}."),
        (f"{result['records']:,} records ({result['value_bytes']}-byte values) in"
         f" {result['partitions']} partitions; {result['runs']} interleaved rounds after a"
         " warm-up round."), "",
        "| query | source | rows/s | median s | CPU s per million rows | runs (s) | load |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for key, v in result["results"].items():
        query, source = key.split("/")
        lines.append(f"| {query} | {source} | {v['rows_per_s']:,} | {v['median_s']} |"
                     f" {v['cpu_s_per_million_rows']} |"
                     f" {', '.join(str(r['seconds']) for r in v['runs'])} |"
                     f" {', '.join(str(r['load_average']) for r in v['runs'])} |")
    lines += ["", "Weir / Parquet (Parquet's median time over Weir's; goal >= 0.8):", ""]
    lines += [f"* {name}: **{r['of_medians']}** (rounds: {', '.join(map(str, r['per_round']))});"
              f" of CPU time: {r['of_cpu_medians']}"
              for name, r in result["weir_to_parquet_ratio"].items()]
    lines += ["", "Creating the DataFrame (not in the times above; Weir: DescribeConfigs or the"
              " catalog options, PyIceberg's catalog and file planning, Metadata and"
              " ListOffsets; Parquet: listing and footers), median s: "
              + ", ".join(f"{k} {v['median']}" for k, v in result["dataframe_creation_s"].items())]
    lines += ["", "Weir's physical plan:", "", "```", result["weir_plan"].strip(), "```"]
    results = out_dir()
    (results / "spark_history_scan.json").write_text(json.dumps(result, indent=2))
    (results / "spark_history_scan.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

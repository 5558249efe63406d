"""What it costs Spark to take rows from a Python data source: CPU per query, by variant.

    .venv/bin/python -m bench run spark_cost [--rows 1000000] [--runs 5] [--weir]
        [--conf key=value ...]

Spark ``local[2]`` counts the same number of rows from variants of the floor source
(``bench/spark_floor.py``: Arrow batches served from memory) and from Parquet, and, with
``--weir``, from a Weir topic (a one-broker ``LocalCluster``).  For each (variant, query)
it records the wall time and the CPU time of the JVM (driver and executor: one process in
local mode) and of the Python workers (every process under the JVM), read from
``/proc/<pid>/stat`` before and after each query, over ``--runs`` interleaved rounds
after a warm-up round.  The variants are what a Python data source controls: rows per
Arrow batch, input partitions per core, value size, nullability, and (``columns``) how
much of the cost is the columns a query does not need (the Python Data Source API has no
column pruning).  Results: ``bench/results/spark_cost.{md,json}`` (``python -m bench run``).
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
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return int(fields[1]), sum(int(x) for x in fields[11:15]) / TICK


def cpu_split(jvm: int) -> tuple[float, float]:
    """CPU seconds so far of the JVM and of every process below it (Python workers)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            got = _stat(int(entry))
            if got is not None:
                parents[int(entry)], cpu[int(entry)] = got
    below = 0.0
    for pid, seconds in cpu.items():
        p = parents.get(pid)
        while p and p != jvm:
            p = parents.get(p)
        if p == jvm:
            below += seconds
    return cpu.get(jvm, 0.0), below


def jvm_pid(spark) -> int:
    pid = spark.sparkContext._gateway.proc.pid
    # spark-submit may run java as a child of a shell script
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            got = _stat(int(entry))
            if got and got[0] == pid and "java" in Path(f"/proc/{entry}/cmdline").read_text():
                return int(entry)
    return pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--weir", action="store_true", help="also a Weir topic (a broker)")
    parser.add_argument("--variants", default="",
                        help="comma-separated variant names to run (default: all)")
    parser.add_argument("--conf", action="append", default=[],
                        help="Spark setting key=value for the session (repeatable)")
    parser.add_argument("--tag", default="", help="name part of the result files")
    args = parser.parse_args()
    from bench.harness import machine

    info = machine()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="weir-spark-cost-"))
    cluster = None
    try:
        if args.weir:
            from weir.ops.cluster import LocalCluster

            cluster = LocalCluster(work / "cluster", brokers=1, port_base=0)
            cluster.start(timeout_s=120)
        result = run(args, cluster.bootstrap if cluster else None, work)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["machine"] = info
    write_results(result, args.tag)


def run(args: argparse.Namespace, bootstrap: str | None, work: Path) -> dict:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import weir.spark
    from bench import spark_floor

    n = args.rows
    builder = (SparkSession.builder.master(args.master).appName("weir-spark-cost")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for item in args.conf:
        key, _, value = item.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark_floor.register(spark)
    weir.spark.register(spark)
    jvm = jvm_pid(spark)

    def floor(parts: int = 4, **options: str):
        rows = [n // parts + (1 if i < n % parts else 0) for i in range(parts)]
        reader = (spark.read.format("weir_floor").option("topic", "bench")
                  .option("rows", ",".join(map(str, rows))))
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    try:
        parquet_path = str(work / "table.parquet")
        floor().write.parquet(parquet_path)
        sources = {
            "parquet": spark.read.parquet(parquet_path),
            "floor": floor(),
            "floor, 4 096 rows per batch": floor(batchRows="4096"),
            "floor, 250 000 rows per batch": floor(batchRows="250000"),
            "floor, 2 partitions": floor(parts=2),
            "floor, 8 partitions": floor(parts=8),
            "floor, non-nullable columns": floor(nullable="false"),
            "floor, empty values": floor(valueBytes="0"),
            "floor, value column only": floor(columns="value"),
            "floor, one int column": floor(columns="none"),
            "floor, 4 rows": spark.read.format("weir_floor").option("topic", "bench")
            .option("rows", "1,1,1,1").load(),
        }
        if bootstrap is not None:
            from bench.spark_count import produce

            topic = f"bench-cost-{int(time.time())}"
            produce(bootstrap, topic, n, 4)
            sources["weir"] = (spark.read.format("weir")
                               .option("kafka.bootstrap.servers", bootstrap)
                               .option("subscribe", topic).load())
        if args.variants:
            wanted = {v.strip() for v in args.variants.split(",")} | {"parquet", "floor"}
            sources = {k: v for k, v in sources.items() if k in wanted}
        queries = {"count": lambda df: df.count(),
                   "scan count": lambda df: (df.where(F.length("value") > 0).count()
                                             if "value" in df.columns else df.count())}
        measured: dict[str, list[dict]] = {f"{q}/{s}": [] for q in queries for s in sources}
        for i in range(args.runs + 1):
            order = list(sources) if i % 2 == 0 else list(reversed(sources))
            for qname, query in queries.items():
                for sname in order:
                    load = os.getloadavg()[0]
                    j0, p0 = cpu_split(jvm)
                    t0 = time.perf_counter()
                    got = query(sources[sname])
                    wall = time.perf_counter() - t0
                    j1, p1 = cpu_split(jvm)
                    if i:
                        measured[f"{qname}/{sname}"].append({
                            "seconds": round(wall, 3), "jvm_cpu_s": round(j1 - j0, 3),
                            "python_cpu_s": round(p1 - p0, 3), "rows": got,
                            "load_average": round(load, 2)})
    finally:
        spark.stop()
    stats = {}
    for key, runs in measured.items():
        stats[key] = {"runs": runs, **{
            f"median_{m}": statistics.median(r[m] for r in runs)
            for m in ("seconds", "jvm_cpu_s", "python_cpu_s")}}
    return {"benchmark": "spark: CPU of taking rows from a Python data source", "rows": n,
            "master": args.master, "runs": args.runs, "conf": args.conf, "results": stats,
            "pyspark": __import__("pyspark").__version__}


def write_results(result: dict, tag: str) -> None:
    info = result["machine"]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"spark_cost{'-' + tag if tag else ''}-{when}"
    lines = [
        f"# Spark: CPU of taking rows from a Python data source — {when}", "",
        (f"Commit `{info['commit']}`; {info['cpu']}, {info['cores']} cores shared with other"
         f" work; load average {info['load_average_at_start']} at the start,"
         f" {info['load_average_at_end']} at the end; PySpark {result['pyspark']}; Spark"
         f" `{result['master']}`; settings {result['conf'] or 'default'}."),
        (f"{result['rows']:,} rows per query; {result['runs']} interleaved rounds after a"
         " warm-up round; medians. CPU: the JVM process (driver and executor) and the"
         " processes below it (PySpark's daemon and Python workers), from /proc."), "",
        "| query | source | wall s | JVM CPU s | Python CPU s | 1-min load |",
        "|---|---|---:|---:|---:|---|",
    ]
    for key, v in result["results"].items():
        query, source = key.split("/", 1)
        lines.append(f"| {query} | {source} | {v['median_seconds']:.3f} |"
                     f" {v['median_jvm_cpu_s']:.3f} | {v['median_python_cpu_s']:.3f} |"
                     f" {', '.join(str(r['load_average']) for r in v['runs'])} |")
    lines += ["", "Produced by `bench/spark_cost.py`."]
    md = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps({"when": when, **result}, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()

"""The first query of a Spark session over a Weir topic, against the session's first
``spark.range(10).count()``.

    .venv/bin/python -m bench run spark_first_query [--records 50] [--sessions 3]
        [--bootstrap host:port]   (default: start a one-broker LocalCluster in a temp dir)

Produces ``--records`` records into a fresh topic, then starts fresh Spark sessions (each
in a new Python process, so a new JVM, new Python workers, nothing imported), in two
orders that alternate:

* ``weir-first``: ``spark.read.format("weir")...load().count()`` as the session's first
  query, then a second and third weir count, then ``spark.range(10).count()``;
* ``range-first``: ``spark.range(10).count()`` first, then the weir count.

Each session reports the session start, every query's wall time and its Python workers'
import and compile times (the worker's environment shows in Spark's timings).  The goal: the
first weir count of a session costs at most the first ``range(10).count()`` of a session
plus 2 s.  Results (machine, load average, commit): ``bench/results/spark_first_query.{md,json}``
(``python -m bench run``; run on its own, the module writes into ``bench/.out/``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

from bench.harness import commit as checkout_commit
from bench.harness import out_dir

SESSION = r"""
import json, os, sys, time
from pathlib import Path

def cpu_s():
    # CPU seconds of this process tree: the driver, the JVM, the Python daemons and workers
    tree = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            tree.setdefault(ppid, []).append(int(entry))
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        todo += tree.get(pid, [])
    return total

t0 = time.perf_counter()
from pyspark.sql import SparkSession
import weir.spark
spark = (SparkSession.builder.master("local[2]").appName("first-query")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
weir.spark.register(spark)
out = {"session_start_s": time.perf_counter() - t0}
bootstrap, topic, order, records = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def timed(name, fn):
    c, t = cpu_s(), time.perf_counter()
    fn()
    out[name + "_cpu_s"] = cpu_s() - c
    return time.perf_counter() - t

def weir_count():
    def go():
        n = (spark.read.format("weir").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).load().count())
        assert n == records, (n, records)
    return go

def range_count():
    def go():
        assert spark.range(10).count() == 10
    return go

if order == "weir-first":
    out["weir_1_s"] = timed("weir_1", weir_count())
    out["weir_2_s"] = timed("weir_2", weir_count())
    out["weir_3_s"] = timed("weir_3", weir_count())
    out["range_after_s"] = timed("range_after", range_count())
else:
    out["range_1_s"] = timed("range_1", range_count())
    out["weir_after_range_s"] = timed("weir_after_range", weir_count())
    out["weir_2_s"] = timed("weir_2", weir_count())
spark.stop()
print("RESULT " + json.dumps(out))
"""


def produce(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(topic, key=str(i).encode(), value=b"click %d" % i)
    assert producer.flush(60) == 0


def session(python: str, bootstrap: str, topic: str, order: str, records: int) -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
    start = time.perf_counter()
    proc = subprocess.run([python, "-c", SESSION, bootstrap, topic, order, str(records)],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - start
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"session failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    result.update(order=order, process_wall_s=wall)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=3, help="sessions of each order")
    parser.add_argument("--bootstrap")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python (venv) of the sessions and their workers")
    parser.add_argument("--label", default="", help="a note kept with the results")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    cluster = None
    data_dir = tempfile.TemporaryDirectory(prefix="weir-first-query-")
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        from weir.ops.cluster import LocalCluster

        cluster = LocalCluster(data_dir.name, brokers=1,
                               port_base=0, overrides={"num.partitions": "1"})
        cluster.start(timeout_s=90)
        bootstrap = cluster.bootstrap
    try:
        topic = f"first-query-{int(time.time())}"
        produce(bootstrap, topic, args.records)
        runs = []
        for i in range(args.sessions):
            for order in (("weir-first", "range-first") if i % 2 == 0
                          else ("range-first", "weir-first")):
                load = os.getloadavg()[0]
                run = session(args.python, bootstrap, topic, order, args.records)
                run["load_before"] = load
                runs.append(run)
                print(json.dumps(run), flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
        data_dir.cleanup()
    report(args, runs)


def _median(values: list[float]) -> float:
    values = sorted(values)
    return values[len(values) // 2] if values else float("nan")


def report(args: argparse.Namespace, runs: list[dict]) -> None:
    weir_first = [r["weir_1_s"] for r in runs if r["order"] == "weir-first"]
    range_first = [r["range_1_s"] for r in runs if r["order"] == "range-first"]
    summary = {
        "first weir count (cold session), median s": _median(weir_first),
        "first range(10).count() (cold session), median s": _median(range_first),
        "weir count after range, median s": _median(
            [r["weir_after_range_s"] for r in runs if r["order"] == "range-first"]),
        "second weir count, median s": _median([r["weir_2_s"] for r in runs]),
    }
    summary["first weir count (cold session), median CPU s"] = _median(
        [r["weir_1_cpu_s"] for r in runs if r["order"] == "weir-first"])
    summary["first range(10).count() (cold session), median CPU s"] = _median(
        [r["range_1_cpu_s"] for r in runs if r["order"] == "range-first"])
    summary["weir count after range, median CPU s"] = _median(
        [r["weir_after_range_cpu_s"] for r in runs if r["order"] == "range-first"])
    summary["excess over range + 2 s"] = (summary["first weir count (cold session), median s"]
                                          - summary["first range(10).count() (cold session),"
                                                    " median s"] - 2.0)
    commit = checkout_commit()
    result = {"records": args.records, "label": args.label, "commit": commit,
              "python": args.python, "machine": f"{os.cpu_count()} CPUs, {os.uname().release}",
              "load_avg_end": os.getloadavg(), "summary": summary, "runs": runs}
    print(json.dumps(summary, indent=2))
    if args.no_save:
        return
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    results = out_dir()
    (results / "spark_first_query.json").write_text(json.dumps(result, indent=2))
    lines = [f"# First query of a Spark session ({stamp})", "",
             (f"commit {commit}, {result['machine']}, {args.records} records, label"
             f" {args.label!r}, load average at end {result['load_avg_end']}"), "",
             "| | s |", "|---|---:|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in summary.items()]
    keys = ("session_start_s", "weir_1_s", "weir_1_cpu_s", "weir_2_s", "range_1_s",
            "range_1_cpu_s", "weir_after_range_s", "weir_after_range_cpu_s", "load_before")
    lines += ["", "| order | " + " | ".join(keys) + " |",
              "|---|" + "---:|" * len(keys)]
    for r in runs:
        lines.append(f"| {r['order']} | " + " | ".join(
            "" if r.get(k) is None else f"{r[k]:.2f}" for k in keys) + " |")
    (results / "spark_first_query.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

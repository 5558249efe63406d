"""The first query of a Spark session over a Weir topic, against the session's first
``spark.range(10).count()``.

    .venv/bin/python -m bench run spark_first_query [--records 50] [--sessions 3]
        [--readers format,read] [--bootstrap host:port]
        (default: start a one-broker LocalCluster in a temp dir)

Produces ``--records`` records into a fresh topic, then starts fresh Spark sessions (each
in a new Python process, so a new JVM, new Python workers, nothing imported), in two
orders that alternate:

* ``weir-first``: a weir count as the session's first query, then a second and third weir
  count, then ``spark.range(10).count()``;
* ``range-first``: ``spark.range(10).count()`` first, then the weir count;

and with each reader of ``--readers``: ``format`` is ``weir.spark.register(spark)`` (timed
on its own) then ``spark.read.format("weir")...load().count()``, which in a registered session
reads as ``weir.spark.read`` does (:mod:`weir.spark.session`); ``read`` is
``weir.spark.read(spark, options).count()`` with no ``register``; ``source`` is the Python data
source itself (``weir.spark.registration.load_source``: what ``format("weir")`` did before
``register`` answered it, and what SQL ``USING weir`` still does).  A read this small is done
on the driver (:mod:`weir.spark.driver`) by ``format`` and ``read``.

Each session reports the session start, every query's wall time and the CPU seconds of the
session's whole process tree (driver, JVM, Python daemons and workers, from ``/proc``), and
how many Python processes Spark had started by the end.  The goal: the
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

def spark_pythons():
    # Python processes in this process tree other than the driver: Spark's daemons, workers
    me, n = os.getpid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(b"pyspark" in part for part in cmd) and b"python" in cmd[0]:
                pid, seen = int(entry), set()
                while pid > 1 and pid not in seen:
                    seen.add(pid)
                    if pid == me:
                        n += 1
                        break
                    try:
                        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
                                  .split()[1])
                    except OSError:
                        break
    return n

t0 = time.perf_counter()
from pyspark.sql import SparkSession
import weir.spark
spark = (SparkSession.builder.master("local[2]").appName("first-query")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
out = {"session_start_s": time.perf_counter() - t0}
bootstrap, topic, order, records = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
reader = sys.argv[5]

def timed(name, fn):
    c, t = cpu_s(), time.perf_counter()
    fn()
    out[name + "_cpu_s"] = cpu_s() - c
    return time.perf_counter() - t

def weir_count():
    def go():
        options = {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}
        if reader == "read":
            n = weir.spark.read(spark, options).count()
        elif reader == "source":
            from weir.spark.registration import load_source
            n = load_source(spark, options).count()
        else:
            n = spark.read.format("weir").options(**options).load().count()
        assert n == records, (n, records)
    return go

def range_count():
    def go():
        assert spark.range(10).count() == 10
    return go

if reader == "format":
    # format("weir") needs register(); the Python data source is registered with Spark (which
    # makes it look up the installed ones: a Python daemon and worker, once per JVM) only
    # when a read needs it.  weir.spark.read needs no registration.
    out["register_s"] = timed("register", lambda: weir.spark.register(spark))
if order == "weir-first":
    out["weir_1_s"] = timed("weir_1", weir_count())
    out["weir_2_s"] = timed("weir_2", weir_count())
    out["weir_3_s"] = timed("weir_3", weir_count())
    out["range_after_s"] = timed("range_after", range_count())
else:
    out["range_1_s"] = timed("range_1", range_count())
    out["weir_after_range_s"] = timed("weir_after_range", weir_count())
    out["weir_2_s"] = timed("weir_2", weir_count())
out["spark_pythons"] = spark_pythons()
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


def session(python: str, bootstrap: str, topic: str, order: str, records: int,
            reader: str = "format") -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
    start = time.perf_counter()
    proc = subprocess.run([python, "-c", SESSION, bootstrap, topic, order, str(records),
                           reader],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - start
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"session failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    result.update(order=order, reader=reader, process_wall_s=wall)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=3,
                        help="sessions of each order and reader")
    parser.add_argument("--readers", default="format,read",
                        help="format: register + spark.read.format('weir'); read:"
                        " weir.spark.read; source: the Python data source itself")
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
        readers = [r.strip() for r in args.readers.split(",") if r.strip()]
        for i in range(args.sessions):
            for order in (("weir-first", "range-first") if i % 2 == 0
                          else ("range-first", "weir-first")):
                for reader in (readers if i % 2 == 0 else readers[::-1]):
                    load = os.getloadavg()[0]
                    run = session(args.python, bootstrap, topic, order, args.records, reader)
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
    range_first = [r for r in runs if r["order"] == "range-first"]
    summary: dict[str, float] = {
        "first range(10).count() (cold session), median s": _median(
            [r["range_1_s"] for r in range_first]),
        "first range(10).count() (cold session), median CPU s": _median(
            [r["range_1_cpu_s"] for r in range_first]),
    }
    for reader in dict.fromkeys(r.get("reader", "format") for r in runs):
        mine = [r for r in runs if r.get("reader", "format") == reader]
        cold = [r for r in mine if r["order"] == "weir-first"]
        warm = [r for r in mine if r["order"] == "range-first"]
        name = f"{reader}: "
        summary[name + "first weir count (cold session), median s"] = _median(
            [r["weir_1_s"] for r in cold])
        summary[name + "first weir count (cold session), median CPU s"] = _median(
            [r["weir_1_cpu_s"] for r in cold])
        summary[name + "weir count after range, median s"] = _median(
            [r["weir_after_range_s"] for r in warm])
        summary[name + "weir count after range, median CPU s"] = _median(
            [r["weir_after_range_cpu_s"] for r in warm])
        if reader == "format":
            summary[name + "weir.spark.register, median s"] = _median(
                [r["register_s"] for r in mine])
            summary[name + "weir.spark.register, median CPU s"] = _median(
                [r["register_cpu_s"] for r in mine])
        summary[name + "second weir count, median s"] = _median([r["weir_2_s"] for r in mine])
        summary[name + "Python processes Spark started, median"] = _median(
            [r.get("spark_pythons", float("nan")) for r in mine])
        summary[name + "excess over range + 2 s"] = (
            summary[name + "first weir count (cold session), median s"]
            - summary["first range(10).count() (cold session), median s"] - 2.0)
        if reader == "format":
            summary[name + "register + first weir count, excess over range + 2 s"] = (
                _median([r["register_s"] + r["weir_1_s"] for r in cold])
                - summary["first range(10).count() (cold session), median s"] - 2.0)
            summary[name + "register + first weir count, median CPU s"] = _median(
                [r["register_cpu_s"] + r["weir_1_cpu_s"] for r in cold])
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
    keys = ("session_start_s", "register_s", "register_cpu_s", "weir_1_s", "weir_1_cpu_s", "weir_2_s", "range_1_s",
            "range_1_cpu_s", "weir_after_range_s", "weir_after_range_cpu_s", "spark_pythons",
            "load_before")
    lines += ["", "| order | reader | " + " | ".join(keys) + " |",
              "|---|---|" + "---:|" * len(keys)]
    for r in runs:
        lines.append(f"| {r['order']} | {r.get('reader', 'format')} | " + " | ".join(
            "" if r.get(k) is None else f"{r[k]:.2f}" for k in keys) + " |")
    (results / "spark_first_query.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

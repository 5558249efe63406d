"""``weir audit``: a Spark job comparing every replica of every selected partition.

The driver asks the cluster (Metadata, ListOffsets) for each partition's replicas, leader
and high watermark; each Spark task then reads one partition's replicas from the segment
files in the brokers' log directories (so the executors must see those directories: a
local cluster, or executors on the brokers' hosts with the same paths) and compares them
batch by batch below the high watermark (:mod:`weir.audit.replicas`).  The report (one row
per partition) is written as JSON or Parquet and summarised on stdout.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from weir.audit.replicas import compare, read_replica

log = logging.getLogger(__name__)

REPORT_COLUMNS = ("topic", "partition", "leader", "replicas", "high_watermark",
                  "batches_compared", "first_divergent_offset", "disagreeing", "detail")


def local_cluster_dirs(data_dir: str | Path) -> tuple[str, dict[int, list[str]]]:
    """Bootstrap servers and each broker's log dirs of a ``weir up`` data directory."""
    from weir.config import effective_value, read_properties
    from weir.ops.cluster import LocalCluster

    cluster = LocalCluster(Path(data_dir))
    if not cluster.brokers:
        raise ValueError(f"{data_dir} holds no local cluster")
    dirs = {}
    for slot in cluster.brokers:
        props = read_properties(slot.config)
        dirs[slot.id] = effective_value(props, "log.dirs")
    return cluster.bootstrap, dirs


def plan(bootstrap: str, topics: Sequence[str] | None,
         log_dirs: Mapping[int, list[str]]) -> list[dict[str, Any]]:
    """One task per partition: its replicas' log dirs, leader and high watermark.

    ``topics`` are names or regular expressions (full match); None selects every topic
    except internal ones (``__consumer_offsets`` ...).
    """
    from weir.spark.fetch import LATEST_TS, FetchClient

    client = FetchClient({"bootstrap.servers": bootstrap})
    try:
        names = client.refresh(None)
        if topics:
            patterns = [re.compile(t) for t in topics]
            names = [n for n in names if any(p.fullmatch(n) for p in patterns)]
        else:
            names = [n for n in names if not n.startswith("__")]
        tasks = []
        for (topic, partition), replicas in sorted(client.replicas.items()):
            if topic not in names:
                continue
            leader = client.leader(topic, partition)
            hw = client.list_offset(topic, partition, LATEST_TS) if leader >= 0 else -1
            tasks.append({"topic": topic, "partition": partition, "leader": leader,
                          "high_watermark": hw,
                          "isr": list(client.isr.get((topic, partition), ())),
                          "replicas": {b: list(log_dirs.get(b, [])) for b in replicas}})
        return tasks
    finally:
        client.close()


def audit_partition(task: Mapping[str, Any]) -> dict[str, Any]:
    """Executor side: read and compare the replicas of one partition."""
    hw = int(task["high_watermark"])
    logs = {int(b): read_replica(int(b), dirs, task["topic"], int(task["partition"]),
                                 max(hw, 0))
            for b, dirs in task["replicas"].items()}
    for b, dirs in task["replicas"].items():
        if not dirs:
            logs[int(b)].problem = "log dirs of this broker are not known"
    isr = task.get("isr")
    report = compare(task["topic"], int(task["partition"]), int(task["leader"]), hw, logs,
                     isr=None if isr is None else [int(b) for b in isr])
    if hw < 0:
        report.problems["leader"] = "the partition has no leader: nothing compared"
    return report.to_json()


def run_spark(tasks: list[dict[str, Any]], master: str) -> list[dict[str, Any]]:
    """Run one Spark task per partition (``master`` as ``--master``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()  # called from a Spark application: reuse it
    spark = active or (SparkSession.builder.master(master).appName("weir-audit")
                       .config("spark.ui.enabled", "false")
                       .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    try:
        if not tasks:
            return []
        rdd = spark.sparkContext.parallelize(tasks, min(len(tasks), 1000))
        return rdd.map(audit_partition).collect()
    finally:
        if active is None:
            spark.stop()


def write_report(reports: list[dict[str, Any]], path: str | Path) -> None:
    """JSON (``.json``) or Parquet (anything else, e.g. ``.parquet``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps({"partitions": reports}, indent=2) + "\n")
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{**{k: r[k] for k in REPORT_COLUMNS},
             "behind": json.dumps(r["behind"]), "problems": json.dumps(r["problems"])}
            for r in reports]
    pq.write_table(pa.Table.from_pylist(rows), path)


def summary(reports: Iterable[Mapping[str, Any]]) -> tuple[str, bool]:
    """Printable summary and whether any partition diverged."""
    reports = list(reports)
    diverged = [r for r in reports if r["first_divergent_offset"] is not None]
    lines = [(f"audited {len(reports)} partitions,"
             f" {sum(r['batches_compared'] for r in reports)} batches agree,"
             f" {len(diverged)} diverged")]
    for r in diverged:
        lines.append(f"  DIVERGED {r['topic']}-{r['partition']} at offset"
                     f" {r['first_divergent_offset']} (leader {r['leader']},"
                     f" disagreeing {r['disagreeing']}): {r['detail']}")
    for r in reports:
        for b, end in sorted(r["behind"].items()):
            lines.append(f"  behind {r['topic']}-{r['partition']}: replica {b} ends at {end}"
                         f" (high watermark {r['high_watermark']})")
        for who, problem in sorted(r["problems"].items()):
            lines.append(f"  problem {r['topic']}-{r['partition']} ({who}): {problem}")
    return "\n".join(lines), bool(diverged)


def audit(bootstrap: str, log_dirs: Mapping[int, list[str]], *, master: str = "local[2]",
          topics: Sequence[str] | None = None,
          report_path: str | Path | None = None) -> tuple[list[dict[str, Any]], bool]:
    """Plan, run and report; returns the per-partition reports and whether any diverged."""
    tasks = plan(bootstrap, topics, log_dirs)
    reports = run_spark(tasks, master)
    if report_path is not None:
        write_report(reports, report_path)
    text, diverged = summary(reports)
    print(text)
    return reports, diverged

"""A/B of two revisions of the broker: RF 3 acks=all throughput and the brokers' CPU, interleaved.

    .venv/bin/python -m bench run ab_revisions --base f5235f4 [--head HEAD] [--clusters 2]
        [--rounds 3] [--records 200000] [--producers idempotent,pipelined] [--topics rf3]
        [--latency-seconds 0]

Each revision's ``weir/`` is exported (``git archive``) into a temporary directory, and each
cluster's brokers run from that directory alone: ``PYTHONPATH`` names it and the brokers
start from a neutral working directory. (``python -m weir`` puts the working directory
first on ``sys.path``: started from the checkout, every broker ran the checkout's code
whatever ``PYTHONPATH`` said, and an A/B of that kind compares a revision with itself; in
session 13 two such runs differed by 10-15 % in either direction.) ``--clusters`` clusters
per revision (default 2) show the spread between clusters of the same code, which is of the
size of the effects measured; rounds are interleaved and their order alternates. Each run
is ``bench/replication.py``'s ``measured_run`` (``settle()`` first; CPU seconds from
``/proc``).

With ``--latency-seconds N`` each round also measures produce-to-acknowledgement latency
(acks=all, RF 3, an idempotent producer at 500 records/s for N seconds:
``bench/replication.py``'s ``latency``) on every cluster, and the table gains its p50/p99.
The brokers' CPU is also given per GB of record values produced.

Results: bench/results/ab_revisions.{md,json} (python -m bench run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness import machine, out_dir
from bench.replication import SESSION_TIMEOUT_MS, VALUE, create, latency, measured_run
from weir.ops.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = out_dir()


def export(rev: str, into: Path) -> str:
    """``weir/`` of ``rev`` under ``into``; returns the revision's short hash."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "weir"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], check=True,
                          capture_output=True, text=True).stdout.strip()


def start(tree: Path, data: Path) -> LocalCluster:
    """A 3-broker cluster whose brokers import ``weir`` from ``tree`` only."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree)
    try:
        cluster = LocalCluster(data, brokers=3, port_base=0,
                               session_timeout_ms=SESSION_TIMEOUT_MS,
                               overrides={"replica.lag.time.max.ms": "10000"})
        cluster.start(timeout_s=120)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision A")
    parser.add_argument("--head", default="HEAD", help="git revision B")
    parser.add_argument("--clusters", type=int, default=2, help="clusters per revision")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--producers", default="idempotent,pipelined")
    parser.add_argument("--topics", default="rf3", help="of rf1, rf3")
    parser.add_argument("--latency-seconds", type=float, default=0,
                        help="per round and cluster, acks=all latency at 500 records/s")
    args = parser.parse_args(argv)
    kinds = [k for k in args.producers.split(",") if k]
    topics = [t for t in args.topics.split(",") if t]
    info = machine()
    runs: dict[str, list[dict]] = {}
    latencies: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="weir-bench-ab-") as tmp:
        revs = {"A": export(args.base, Path(tmp) / "A"), "B": export(args.head, Path(tmp) / "B")}
        os.chdir(tmp)  # not the checkout: see the docstring
        clusters: dict[str, LocalCluster] = {}
        try:
            for i in range(args.clusters):
                for side in ("A", "B"):
                    name = f"{side}{i + 1}"
                    clusters[name] = start(Path(tmp) / side, Path(tmp) / f"cluster-{name}")
                    create(clusters[name].bootstrap, "rf1", 1)
                    create(clusters[name].bootstrap, "rf3", 3)
            for cluster in clusters.values():  # connections, metadata, first segments
                for kind in kinds:
                    for topic in topics:
                        measured_run(cluster, topic, 2000, kind)
            for r in range(args.rounds):
                order = list(clusters.items())
                for kind in kinds:
                    for name, cluster in (order if r % 2 == 0 else order[::-1]):
                        for topic in topics:
                            run = measured_run(cluster, topic, args.records, kind)
                            runs.setdefault(f"{kind} {name} {topic}", []).append(run)
                            print(kind, name, topic, f"{run['mb_s']:.1f} MB/s",
                                  run["cpu_s_brokers"], flush=True)
                if args.latency_seconds > 0:
                    for name, cluster in (order if r % 2 == 0 else order[::-1]):
                        lat = latency(cluster.bootstrap, "rf3", 500, args.latency_seconds)
                        latencies.setdefault(name, []).append(lat)
                        print("latency", name, lat, flush=True)
        finally:
            for cluster in clusters.values():
                cluster.stop()
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {"when": when, "machine": info, "revisions": revs, "args": vars(args), "runs": runs,
           "latencies": latencies}
    (RESULTS / f"ab_revisions-{when}.json").write_text(json.dumps(doc, indent=1))
    lines = [f"# A/B of two revisions — {when}", "",
             (f"A = `{revs['A']}`, B = `{revs['B']}`; {info.get('cpu', '?')}, "
              f"{info.get('cores', '?')} cores; Python {sys.version.split()[0]}. "
              f"{args.clusters} clusters of 3 brokers per revision, {args.rounds} interleaved "
              f"rounds of {args.records} records of 1 KiB per producer and topic "
              "(bench/replication.py's producer and measured_run). Load average "
              f"{info['load_average_at_start'][0]} at the start, "
              f"{os.getloadavg()[0]:.2f} at the end."), "",
             ("| producer | topic | cluster | MB/s median (each round) | brokers' CPU s median "
             "| brokers' CPU s per GB |"),
             "|---|---|---|---|---:|---:|"]
    gb = args.records * len(VALUE) / 1e9
    for key, rs in runs.items():
        kind, name, topic = key.split()
        cpu = statistics.median(sum(r["cpu_s_brokers"].values()) for r in rs)
        each = ", ".join(f"{r['mb_s']:.0f}" for r in rs)
        lines.append(f"| {kind} | {topic} | {name} | "
                     f"{statistics.median(r['mb_s'] for r in rs):.1f} ({each}) | {cpu:.2f} "
                     f"| {cpu / gb:.1f} |")
    if latencies:
        lines += ["", (f"acks=all latency, RF 3, 500 records/s for {args.latency_seconds:g} s "
                  "per round:"), "",
                  "| cluster | p50 ms median (each round) | p99 ms median (each round) |",
                  "|---|---|---|"]
        for name, ls in latencies.items():
            p50 = ", ".join(f"{x['p50_ms']:.1f}" for x in ls)
            p99 = ", ".join(f"{x['p99_ms']:.1f}" for x in ls)
            lines.append(f"| {name} | {statistics.median(x['p50_ms'] for x in ls):.1f} ({p50}) "
                         f"| {statistics.median(x['p99_ms'] for x in ls):.1f} ({p99}) |")
    out = RESULTS / f"ab_revisions-{when}.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

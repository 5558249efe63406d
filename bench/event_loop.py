"""Brokers on asyncio's event loop against brokers on uvloop, in one run.

Two 3-broker clusters, one started with ``WEIR_EVENT_LOOP=asyncio`` and one on the default
loop (uvloop, ``weir/server/event_loop.py``), each with a topic of RF 1 and one of RF 3
(min.insync.replicas 2). In interleaved rounds (the order of the clusters alternating),
``bench/replication.py``'s producer (acks=all, idempotent and pipelined; batch.size 256 KiB
or ``--batch-kib``) writes N records of 1 KiB to each topic, ``settle()`` before each run, and every run's
MB/s and the CPU seconds of the brokers and of this process are kept.

    .venv/bin/python -m bench run event_loop [--records N] [--rounds R] [--batch-kib K]

Results: bench/results/event_loop.{md,json} (python -m bench run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench.harness import machine, out_dir
from bench.page_cache import described
from bench.replication import PRODUCERS, SESSION_TIMEOUT_MS, create, measured_run, throughput
from weir.ops.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
RESULTS = out_dir()
LOOPS = {"asyncio": "asyncio", "uvloop": ""}  # name -> WEIR_EVENT_LOOP


def run(records: int, rounds: int, kinds: list[str], batch_kib: int) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="weir-bench-loop-") as tmp:
        clusters: dict[str, LocalCluster] = {}
        saved = os.environ.get("WEIR_EVENT_LOOP")
        try:
            for name, value in LOOPS.items():
                os.environ["WEIR_EVENT_LOOP"] = value  # the brokers inherit it
                cluster = LocalCluster(Path(tmp) / name, brokers=3, port_base=0,
                                       session_timeout_ms=SESSION_TIMEOUT_MS,
                                       overrides={"replica.lag.time.max.ms": "10000"})
                clusters[name] = cluster
                cluster.start(timeout_s=120)
                create(cluster.bootstrap, "rf1", 1)
                create(cluster.bootstrap, "rf3", 3)
        finally:
            if saved is None:
                os.environ.pop("WEIR_EVENT_LOOP", None)
            else:
                os.environ["WEIR_EVENT_LOOP"] = saved
        try:
            for kind in kinds:
                for cluster in clusters.values():  # connections, page cache
                    throughput(cluster.bootstrap, "rf1", 2000, kind, batch_bytes=batch_kib * 1024)
                    throughput(cluster.bootstrap, "rf3", 2000, kind, batch_bytes=batch_kib * 1024)
            for i in range(rounds):
                order = list(clusters.items())
                for kind in kinds:
                    for name, cluster in order if i % 2 == 0 else order[::-1]:
                        for topic in ("rf1", "rf3"):
                            runs.setdefault(f"{kind} {name} {topic}", []).append(
                                measured_run(cluster, topic, records, kind, batch_kib * 1024))
        finally:
            for cluster in clusters.values():
                cluster.stop()
    return runs


def summary(runs: dict[str, list[dict]], kinds: list[str]) -> list[dict]:
    rows = []
    for kind in kinds:
        for name in LOOPS:
            rf1 = [r["mb_s"] for r in runs[f"{kind} {name} rf1"]]
            rf3 = [r["mb_s"] for r in runs[f"{kind} {name} rf3"]]
            cpu = [sum(r["cpu_s_brokers"].values()) for r in runs[f"{kind} {name} rf3"]]
            rows.append({"producer": kind, "loop": name,
                         "rf1_median": statistics.median(rf1), "rf3_median": statistics.median(rf3),
                         "rf3_best": max(rf3),
                         "rf3_over_rf1_pair_median": statistics.median(
                             b / a for a, b in zip(rf1, rf3, strict=True)),
                         "rf3_broker_cpu_s_median": statistics.median(cpu)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--producers", default="idempotent,pipelined")
    parser.add_argument("--batch-kib", type=int, default=256,
                        help="the producer's batch.size in KiB (replication.py: 256)")
    args = parser.parse_args(argv)
    kinds = [k for k in args.producers.split(",") if k]
    info = machine()
    runs = run(args.records, args.rounds, kinds, args.batch_kib)
    rows = summary(runs, kinds)
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"event_loop-{when}.json").write_text(json.dumps(
        {"when": when, "machine": info, "records": args.records, "rounds": args.rounds,
         "producers": {k: PRODUCERS[k] for k in kinds}, "batch_kib": args.batch_kib, "runs": runs, "summary": rows},
        indent=1))
    dropped = all(r["cache_dropped"] for rs in runs.values() for r in rs)
    lines = [f"# Brokers on asyncio's loop and on uvloop — {when}", "",
             (f"Commit `{info['commit']}`; {info.get('cpu', '?')}, {info.get('cores', '?')} "
             f"cores; Python {sys.version.split()[0]}. Two 3-broker clusters, "
             f"{args.rounds} interleaved rounds of {args.records} records of 1 KiB per run; "
             f"bench/replication.py's producer (acks=all, linger.ms 5) with batch.size "
             f"{args.batch_kib} KiB. {described(dropped)} Load average "
             f"{info['load_average_at_start'][0]} at the start, "
             f"{info['load_average_at_end'][0]} at the end."), "",
             ("| producer | loop | RF 1 MB/s (median) | RF 3 MB/s (median) | RF 3 best | "
             "RF 3 ÷ RF 1 (median of rounds) | brokers' CPU s per RF 3 run (median) |"),
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['producer']} | {r['loop']} | {r['rf1_median']:.1f} | "
                     f"{r['rf3_median']:.1f} | {r['rf3_best']:.1f} | "
                     f"{r['rf3_over_rf1_pair_median']:.2f} | {r['rf3_broker_cpu_s_median']:.2f} |")
    lines += ["", "Every run (MB/s; CPU seconds per broker, then this process's):", "",
              "| run | MB/s | CPU s brokers | CPU s client |", "|---|---:|---|---:|"]
    for key, rs in runs.items():
        for r in rs:
            lines.append(f"| {key} | {r['mb_s']:.1f} | "
                         + ", ".join(f"{b}: {c:.2f}" for b, c in r["cpu_s_brokers"].items())
                         + f" | {r['cpu_s_client']:.2f} |")
    text = "\n".join(lines) + "\n"
    (RESULTS / f"event_loop-{when}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Event-loop stalls of a broker while a consumer reads a topic just produced: two trees.

Each round, for the working tree ("new") and a git revision ("base", extracted with
``git archive``) in turn, the one broker of a LocalCluster is (re)started under
``bench/stall_broker.py`` (a watchdog that records every stall of its event loop over
``--stall-ms``, with the frames it was blocked in), N 1-KiB records are produced with
confluent-kafka to a new topic, then read back from offset 0 (``assign()``, 4 MiB per
partition fetch), as ``bench/produce_consume.py`` does.  Reported per read: the stalls
that began during it, the longest, where the loop was, and the time from ``assign()`` to
the first record.

    .venv/bin/python -m bench run fetch_stalls --base c29e705~1

Writes ``bench/results/fetch_stalls.md`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.consume_cpu import consume_once
from bench.harness import out_dir
from bench.produce_consume import (
    BROKER_OVERRIDES,
    KIB,
    RECORD,
    create_topic,
    machine,
    produce,
    producer_config,
)
from bench.produce_cpu import extract
from weir.ops import procs
from weir.ops.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def start_traced(cluster: LocalCluster, tree: Path, stall_log: Path, stall_ms: int) -> None:
    """(Re)start the broker running ``tree``'s code under the stall watchdog."""
    broker_id = cluster.broker_ids[0]
    if cluster.broker_pid(broker_id) is not None:
        cluster.stop_broker(broker_id)
    plain = procs.broker_command
    procs.broker_command = lambda cfg: [  # type: ignore[assignment]
        "env", f"PYTHONPATH={tree}", f"WEIR_STALL_LOG={stall_log}", f"WEIR_STALL_MS={stall_ms}",
        sys.executable, "-P", str(HERE / "stall_broker.py"), *procs.BROKER_ARGV[2:], str(cfg)]
    try:
        cluster.start_broker(broker_id)
        cluster.wait_for_brokers([broker_id], 60)
    finally:
        procs.broker_command = plain


def stalls_between(stall_log: Path, start: float, end: float) -> list[dict]:
    if not stall_log.exists():
        return []
    out = []
    for line in stall_log.read_text().splitlines():
        record = json.loads(line)
        if start <= record["at"] <= end:
            out.append(record)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD", help="git revision of the 'base' broker")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch-kib", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stall-ms", type=int, default=20)
    args = parser.parse_args()
    load_start = os.getloadavg()
    mb = args.records * RECORD / 1e6
    rows = []
    where: dict[str, Counter] = {"base": Counter(), "new": Counter()}
    with tempfile.TemporaryDirectory(prefix="weir-fetch-stalls-") as tmp:
        work = Path(tmp)
        trees = {"base": extract(args.base, work / "base"), "new": ROOT}
        stall_log = work / "stalls.jsonl"
        cluster = LocalCluster(work / "cluster", brokers=1, port_base=0,
                               overrides=BROKER_OVERRIDES)
        try:
            cluster.start(timeout_s=90)
            for rnd in range(args.rounds):
                for name in (("base", "new") if rnd % 2 == 0 else ("new", "base")):
                    start_traced(cluster, trees[name], stall_log, args.stall_ms)
                    bootstrap = cluster.bootstrap
                    pid = cluster.broker_pid(cluster.broker_ids[0])
                    topic = f"stalls-{name}-{rnd}"
                    create_topic(bootstrap, topic)
                    produce(producer_config(bootstrap, args.batch_kib * KIB, "1", 10), topic,
                            args.records)
                    began = time.time()
                    seconds, _cpu, _sys, requests, first = consume_once(
                        bootstrap, topic, args.records, pid)
                    seen = stalls_between(stall_log, began, began + seconds)
                    for record in seen:
                        where[name][record["frames"][-1] if record["frames"] else "?"] += 1
                    longest = max((r["ms"] for r in seen), default=0.0)
                    rows.append((rnd, name, mb / seconds, first * 1000, requests, len(seen),
                                 longest))
                    print(f"#{rnd} {name:4} {mb / seconds:7.1f} MB/s, first record "
                          f"{first * 1000:6.1f} ms, {requests} fetches, {len(seen)} stalls "
                          f"(longest {longest:.0f} ms)", flush=True)
        finally:
            cluster.stop()
    load_end = os.getloadavg()
    info = machine()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = [
        f"# fetch_stalls {stamp}",
        "",
        (f"Working tree on commit `{info['commit']}` (\"new\", uncommitted changes included) "
         f"against `{args.base}` (\"base\"); {info['cpu']}, {info['cores']} cores; load "
         f"average {load_start[0]:.1f} at start, {load_end[0]:.1f} at end."),
        (f"Each read: {args.records} records of 1 KiB just produced (batch.size "
         f"{args.batch_kib} KiB) to a new topic, read from offset 0; stalls of the broker's "
         f"event loop over {args.stall_ms} ms that began during the read."),
        "",
        "| round | tree | MB/s | first record, ms | Fetch requests | stalls | longest, ms |",
        "|---|---|---:|---:|---:|---:|---:|",
        *(f"| {r} | {n} | {s:.1f} | {f:.1f} | {q} | {k} | {m:.0f} |"
          for r, n, s, f, q, k, m in rows),
        "",
        "Where the loop was when a stall was seen (innermost frame):",
        "",
        *(f"- {name}: {count} × `{frame}`" for name in ("base", "new")
          for frame, count in where[name].most_common(5)),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = out_dir() / f"fetch_stalls-{stamp}.md"
    out.write_text(text)
    print(f"written: {out}")


if __name__ == "__main__":
    main()

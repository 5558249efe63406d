"""CPU per MB of consume: the broker of one source tree against another's and the floor's.

The consume ratio of ``produce_consume.py`` is a fraction of a second of wall time per
configuration on a shared 2-core machine, so a single run moves by tens of percent.  The
CPU the server spends per MB it serves does not: this script produces N 1-KiB records
once per server (the configuration of ``produce_consume.py``), then reads them back from
offset 0 with a confluent-kafka consumer (``assign()``, max.partition.fetch.bytes 4 MiB)
several times, interleaving a one-broker Weir cluster running the working tree ("new"),
one running a git revision ("base", extracted with ``git archive``) and the floor server,
and reads each server's CPU time (user + system, ``/proc/<pid>/stat``) around every read.
The consumer's statistics give the number of Fetch requests each read took.

    .venv/bin/python -m bench run consume_cpu                       # base HEAD, 16 KiB batches
    .venv/bin/python -m bench run consume_cpu --base dbe5047 --batch-kib 1024 --rounds 5
    .venv/bin/python -m bench run consume_cpu --fresh --base c29e705~1 --new c29e705

Writes ``bench/results/consume_cpu.md`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from bench.harness import out_dir
from bench.produce_consume import (
    BROKER_OVERRIDES,
    KIB,
    RECORD,
    FloorProcess,
    create_topic,
    machine,
    produce,
    producer_config,
)
from bench.produce_cpu import cpu_s, extract, start_tree
from weir.ops.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
FETCH_BYTES = 4 * 1024 * 1024


def consume_once(bootstrap: str, topic: str, records: int, pid: int
                 ) -> tuple[float, float, float, int, float]:
    """(seconds, server CPU s, of which system, Fetch requests, seconds to the first
    record) of one read from offset 0."""
    fetches: list[int] = []

    def on_stats(raw: str) -> None:
        stats = json.loads(raw)
        fetches.append(sum(b.get("req", {}).get("Fetch", 0)
                           for b in stats.get("brokers", {}).values()))

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "max.partition.fetch.bytes": FETCH_BYTES, "fetch.max.bytes": 4 * FETCH_BYTES,
        "receive.message.max.bytes": 4 * FETCH_BYTES + (1 << 20),
        "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 256 * 1024,
        "statistics.interval.ms": 100, "stats_cb": on_stats,
    })
    try:
        consumer.list_topics(topic, timeout=30)
        consumer.poll(0.2)  # the first statistics: Fetch requests before the read
        first = fetches[-1] if fetches else 0
        before = cpu_s(pid)
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = 0
        first_at = 0.0
        deadline = start + 120
        while seen < records:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"consumed {seen} of {records} records from {topic}")
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                seen += 1
            if seen and not first_at:
                first_at = time.perf_counter() - start
        seconds = time.perf_counter() - start
        after = cpu_s(pid)
        consumer.pause([TopicPartition(topic, 0)])
        count = len(fetches)
        stop = time.monotonic() + 5
        while len(fetches) < count + 2 and time.monotonic() < stop:
            consumer.poll(0.1)
        requests = (fetches[-1] if fetches else 0) - first
        return (seconds, after[0] + after[1] - before[0] - before[1], after[1] - before[1],
                requests, first_at)
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD", help="git revision of the 'base' broker")
    parser.add_argument("--new", default=None,
                        help="git revision of the 'new' broker (default: the working tree)")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch-kib", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fresh", action="store_true",
                        help="each read right after producing its records to a new topic "
                        "(as produce_consume.py does)")
    parser.add_argument("--no-base", action="store_true", help="only the working tree and floor")
    args = parser.parse_args()
    load_start = os.getloadavg()
    mb = args.records * RECORD / 1e6
    rows: list[tuple[int, str, float, float, float, int, float]] = []
    targets = ("new", "floor") if args.no_base else ("base", "new", "floor")
    with tempfile.TemporaryDirectory(prefix="weir-consume-cpu-") as tmp:
        work = Path(tmp)
        new_tree = None if args.new is None else extract(args.new, work / "new")
        trees = {"new": new_tree}
        if not args.no_base:
            trees["base"] = extract(args.base, work / "base")
        cluster = LocalCluster(work / "cluster", brokers=1, port_base=0,
                               overrides=BROKER_OVERRIDES)
        floor = None
        try:
            cluster.start(timeout_s=90)
            floor = FloorProcess(work / "floor")
            topic = "consume-cpu"
            config = producer_config(cluster.bootstrap, args.batch_kib * KIB, "1", 10)
            create_topic(cluster.bootstrap, topic)
            produce(config, topic, args.records)
            produce(producer_config(floor.bootstrap, args.batch_kib * KIB, "1", 10), topic,
                    args.records)
            running = "new" if args.new is None else ""  # started on the working tree
            for rnd in range(-1, args.rounds):  # round -1 warms up (page cache, connections)
                order = list(targets) if rnd % 2 == 0 else list(reversed(targets))
                for target in order:
                    if target == "floor":
                        pid, bootstrap = floor.proc.pid, floor.bootstrap
                    else:
                        if running != target:  # the broker restarted on the other tree
                            start_tree(cluster, trees[target])
                            cluster.wait_for_brokers(cluster.broker_ids, 60)
                            running = target
                        bootstrap = cluster.bootstrap
                        pid = cluster.broker_pid(cluster.broker_ids[0])
                        consume_once(bootstrap, topic, 1000, pid)  # leader known, warm
                    read = topic
                    if args.fresh:  # as produce_consume.py: a new topic, read at once
                        read = f"fresh-{target}-{rnd + 1}"
                        if target != "floor":
                            create_topic(bootstrap, read)
                        produce(producer_config(bootstrap, args.batch_kib * KIB, "1", 10),
                                read, args.records)
                    seconds, used, system, requests, first = consume_once(
                        bootstrap, read, args.records, pid)
                    if rnd < 0:
                        continue
                    rows.append((rnd, target, mb / seconds, used, system, requests, first))
                    per = used * 1e6 / requests if requests else float("nan")
                    print(f"#{rnd} {target:5} {mb / seconds:7.1f} MB/s  server "
                          f"{used * 1000 / mb:6.3f} ms CPU/MB ({system * 1000 / mb:.3f} "
                          f"system), {requests} fetches, {per:.0f} us CPU per fetch, first record "
                          f"after {first * 1000:.1f} ms",
                          flush=True)
        finally:
            if floor is not None:
                floor.stop()
            cluster.stop()
    load_end = os.getloadavg()
    med = {}
    for t in targets:
        mine = [r for r in rows if r[1] == t]
        med[t] = (statistics.median(r[2] for r in mine),
                  statistics.median(r[3] * 1000 / mb for r in mine),
                  statistics.median(r[3] * 1e6 / r[5] for r in mine if r[5]),
                  statistics.median(r[6] * 1000 for r in mine))
    info = machine()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    ref = med["floor"][1]
    lines = [
        f"# consume_cpu {stamp}",
        "",
        ((f"Working tree on commit `{info['commit']}` (\"new\", uncommitted changes included)"
          if args.new is None else f"`{args.new}` (\"new\")")
         + ("" if args.no_base else f" against `{args.base}` (\"base\")")
         + f"; {info['cpu']}, {info['cores']} cores; load average {load_start[0]:.1f} at "
         f"start, {load_end[0]:.1f} at end."),
        (f"{args.records} records of 1 KiB produced with batch.size {args.batch_kib} KiB, read "
         f"from offset 0 ({FETCH_BYTES >> 20} MiB per partition fetch), {args.rounds} "
         "interleaved rounds"
         + (", each read right after its records were produced to a new topic." if args.fresh
            else ", the same topic read again each time.")),
        "",
        ("| round | server | MB/s | server CPU ms per MB | of which system | Fetch requests "
         "| first record, ms |"),
        "|---|---|---:|---:|---:|---:|---:|",
        *(f"| {p} | {t} | {s:.1f} | {u * 1000 / mb:.3f} | {k * 1000 / mb:.3f} | {n} "
          f"| {f * 1000:.1f} |" for p, t, s, u, k, n, f in rows),
        "",
        ("| median | MB/s | server CPU ms per MB | ÷ floor | CPU us per Fetch "
         "| first record, ms |"),
        "|---|---:|---:|---:|---:|---:|",
        *(f"| {t} | {s:.1f} | {c:.3f} | {c / ref:.2f} | {f:.0f} | {w:.1f} |"
          for t, (s, c, f, w) in med.items()),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = out_dir() / f"consume_cpu-{stamp}.md"
    out.write_text(text)
    print(f"written: {out}")


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"{time.monotonic() - started:.0f} s")

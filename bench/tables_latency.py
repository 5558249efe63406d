"""Produce latency with a topic table on and off: the translator must not delay produce.

    .venv/bin/python -m bench run tables_latency    # 2 rounds, 20 s per phase, 2,000 records/s
    .venv/bin/python -m bench run tables_latency --quick   # 10 s per phase, 1 round

One 3-broker cluster (``LocalCluster``, its embedded SQLite catalog); two topics of 3
partitions, RF 3, ``min.insync.replicas=2``: ``plain`` (``weir.iceberg.mode=disabled``) and
``table`` (``key_value``, ``weir.iceberg.target.lag.ms=2000``: a commit per partition every
second or so, the translator always busy).  Phases alternate (plain, table, plain, table...)
so the machine's load drifts into both alike.  Each phase produces 512-byte records at a
fixed rate (paced by schedule) with a confluent-kafka producer (``acks=all``, idempotent,
``linger.ms`` 0); a polling thread stamps each delivery.  Reported: p50 / p99 / p99.9 / max
of send → ack over every sample per mode, the rows the table holds at the end (all of the
``table`` topic's records, checked), and the load average.

Results: bench/results/tables_latency.md (with the machine, load and commit).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from weir.config import read_properties
from weir.ops.cluster import LocalCluster
from weir.server.metrics import parse


def produce_phase(bootstrap: str, topic: str, rate: int, seconds: float) -> list[float]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 0})
    latencies: list[float] = []
    sent_at: dict[int, int] = {}
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            latencies.append((time.perf_counter_ns() - sent_at.pop(int(msg.key()))) / 1e6)

    def poller():
        while not stop.is_set():
            producer.poll(0.001)

    thread = threading.Thread(target=poller, daemon=True)
    thread.start()
    value = os.urandom(512)
    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        due = start + i / rate
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        sent_at[i] = time.perf_counter_ns()
        while True:
            try:
                producer.produce(topic, key=b"%d" % i, value=value, on_delivery=on_delivery)
                break
            except BufferError:
                time.sleep(0.001)
    producer.flush(60)
    stop.set()
    thread.join()
    return latencies


def loop_lag(cluster: LocalCluster) -> tuple[float, float, float]:
    """The brokers' event-loop lag histograms summed: (sum ms, count, observations > 25 ms)."""
    total = count = slow = 0.0
    for broker_id in cluster.broker_ids:
        port = read_properties(cluster.config_path(broker_id))["metrics.http.port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            samples = parse(r.read().decode())
        broker_count = samples.get(("weir_event_loop_lag_ms_count", ()), 0.0)
        total += samples.get(("weir_event_loop_lag_ms_sum", ()), 0.0)
        count += broker_count
        slow += broker_count - samples.get(("weir_event_loop_lag_ms_bucket", (("le", "25.0"),)),
                                           0.0)
    return total, count, slow


def worker_cpu_s(cluster: LocalCluster) -> float:
    """CPU seconds of the brokers' child processes (the table translators' workers; the log
    cleaner's too, idle here), from /proc."""
    pids = {cluster.broker_pid(b) for b in cluster.broker_ids} - {None}
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) in pids:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def percentiles(samples: list[float]) -> str:
    a = np.array(samples)
    p50, p99, p999 = np.percentile(a, [50, 99, 99.9])
    return f"{len(a):,} | {p50:.2f} | {p99:.2f} | {p999:.2f} | {a.max():.2f}"


def table_rows(cluster: LocalCluster, topic: str, expected: int, timeout_s: float = 120) -> int:
    from weir.tables.catalog import catalog_settings, load_catalog, table_identifier

    settings = catalog_settings(read_properties(cluster.config_path(cluster.broker_ids[0])))
    deadline = time.monotonic() + timeout_s
    rows = 0
    while time.monotonic() < deadline:
        table = load_catalog(settings).load_table(table_identifier(settings, topic))
        rows = table.scan().count() if table.current_snapshot() else 0
        if rows >= expected:
            break
        time.sleep(1)
    return rows


def log_end(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tables"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    load_start = os.getloadavg()
    samples: dict[str, list[float]] = {"plain": [], "table": []}
    with tempfile.TemporaryDirectory(prefix="weir-bench-tables-") as tmp:
        cluster = LocalCluster(Path(tmp), brokers=3, port_base=0)
        cluster.serve_metrics = True
        lags = {"plain": [0.0, 0.0, 0.0], "table": [0.0, 0.0, 0.0]}
        cpu = {"plain": 0.0, "table": 0.0}
        try:
            cluster.start(timeout_s=120)
            bootstrap = cluster.bootstrap
            admin = AdminClient({"bootstrap.servers": bootstrap})
            common = {"min.insync.replicas": "2"}
            topics = {"plain": {**common, "weir.iceberg.mode": "disabled"},
                      "table": {**common, "weir.iceberg.mode": "key_value",
                                "weir.iceberg.target.lag.ms": "2000"}}
            for fut in admin.create_topics([NewTopic(t, 3, 3, config=c)
                                            for t, c in topics.items()]).values():
                fut.result(30)
            produce_phase(bootstrap, "plain", 200, 2)  # warm-up: metadata, connections
            produce_phase(bootstrap, "table", 200, 2)
            for _ in range(args.rounds):
                for mode in ("plain", "table"):
                    before, cpu_before = loop_lag(cluster), worker_cpu_s(cluster)
                    samples[mode] += produce_phase(bootstrap, mode, args.rate, args.seconds)
                    after = loop_lag(cluster)
                    cpu[mode] += worker_cpu_s(cluster) - cpu_before
                    for i in range(3):
                        lags[mode][i] += after[i] - before[i]
            expected = log_end(bootstrap, "table", 3)
            rows = table_rows(cluster, "table", expected)
        finally:
            cluster.stop()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=False,
                            capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent).stdout.strip()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = [
        f"# Produce latency with a topic table on and off ({stamp})", "",
        (f"Commit `{commit}`; {platform.machine()}, {os.cpu_count()} CPUs, "
         f"Python {platform.python_version()}; load average at start "
         f"{', '.join(f'{x:.2f}' for x in load_start)}, at end "
         f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}."), "",
        (f"3 brokers, 3 partitions RF 3, min.insync.replicas=2, acks=all idempotent, "
         f"512-byte records at {args.rate}/s, {args.rounds} round(s) of {args.seconds:g} s "
         f"per mode, alternated."), "",
        ("| topic | samples | p50 ms | p99 ms | p99.9 ms | max ms | loop lag mean ms | "
         "loop wake-ups > 25 ms | brokers' worker CPU s |"),
        "|---|---|---|---|---|---|---|---|---|",
        *(f"| {label} | {percentiles(samples[mode])} | "
          f"{lags[mode][0] / max(lags[mode][1], 1):.2f} | {lags[mode][2]:.0f} | "
          f"{cpu[mode]:.1f} |"
          for mode, label in (("plain", "plain (`weir.iceberg.mode=disabled`)"),
                              ("table", "table (`key_value`, target lag 2 s)"))), "",
        ("Loop lag: the brokers' `weir_event_loop_lag_ms` during the phases (how late the "
         "event loops woke a 100 ms timer), summed over the 3 brokers. Worker CPU: the "
         "brokers' child processes (the translator's worker), during the phases."), "",
        f"Table rows at the end: {rows:,} of the topic's {expected:,} records.", "",
    ]
    print("\n".join(lines))  # ``python -m bench run tables_latency`` keeps it as the result
    return 0


if __name__ == "__main__":
    sys.exit(main())

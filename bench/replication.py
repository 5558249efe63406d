"""Replication benchmark: all figures from one run on one 3-broker cluster.

1. Produce throughput with replication factor 3 and acks=all against replication factor 1
   (acks=all), same records, same client settings, interleaved; the ratio is Weir's figure
   (Kafka's published ratio for synchronous 3x replication is about 0.51).
2. End-to-end latency (produce call to delivery report) p50/p99 at a steady moderate rate,
   RF 3, acks=all.
3. Unavailability after SIGKILL of a partition leader: time from the kill until a record
   produced after it is acknowledged, against zookeeper.session.timeout.ms.

    .venv/bin/python bench/replication.py [--records N] [--quick]

Results: bench/results/replication-<UTC date>.{md,json} and bench/results/replication-latest.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from produce_consume import machine  # same folder: the machine description

from weir.cli.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SESSION_TIMEOUT_MS = 6000
VALUE = b"x" * 1024


def create(bootstrap: str, name: str, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, rf, config={"min.insync.replicas": str(min(rf, 2))})],
                        operation_timeout=60)[name].result(60)


def leader_of(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return md.topics[topic].partitions[0].leader


def throughput(bootstrap: str, topic: str, records: int) -> float:
    """MB/s of record values, acks=all."""
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 262144, "enable.idempotence": True,
                         "queue.buffering.max.kbytes": 262144})
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                producer.poll(0.005)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    assert not errors, errors[:3]
    return records * len(VALUE) / elapsed / 1e6


def latency(bootstrap: str, topic: str, rate: int, seconds: float) -> dict[str, float]:
    """Produce-to-acknowledgement latency at ``rate`` records/s (linger 0, acks=all)."""
    samples: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True})
    # A fresh idempotent producer holds its first records for its start-up (connections,
    # metadata, InitProducerId): not replication latency (bench/latency.py reports it apart).
    for _ in range(100):
        producer.produce(topic, VALUE)
        producer.poll(0)
        time.sleep(0.01)
    producer.flush(60)

    def report(err, _msg, sent=None):
        if err is None:
            samples.append((time.perf_counter() - sent) * 1000)

    interval = 1.0 / rate
    next_at = time.perf_counter()
    end = next_at + seconds
    while time.perf_counter() < end:
        sent = time.perf_counter()
        producer.produce(topic, VALUE, on_delivery=lambda e, m, s=sent: report(e, m, s))
        producer.poll(0)
        next_at += interval
        delay = next_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    producer.flush(60)
    samples.sort()
    return {"records": len(samples), "p50_ms": statistics.median(samples),
            "p99_ms": samples[int(len(samples) * 0.99) - 1], "max_ms": samples[-1]}


def unavailability(cluster: LocalCluster, topic: str) -> float:
    """Seconds from SIGKILL of the leader until a record produced after it is acknowledged."""
    acked_after: list[float] = []
    killed_at: list[float] = []
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True, "message.timeout.ms": 60000,
                         "retry.backoff.ms": 50, "retry.backoff.max.ms": 200,
                         "topic.metadata.refresh.fast.interval.ms": 50})

    def on_delivery(err, _msg, sent):
        if err is None and killed_at and sent > killed_at[0]:
            acked_after.append(time.perf_counter())

    def run() -> None:
        while not stop.is_set():
            sent = time.perf_counter()
            producer.produce(topic, VALUE, on_delivery=lambda e, m, s=sent: on_delivery(e, m, s))
            producer.poll(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(2)
    victim = leader_of(cluster.bootstrap, topic)
    killed_at.append(time.perf_counter())
    cluster.kill_broker(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while not acked_after and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(10)
    producer.flush(60)
    cluster.start_broker(victim)
    cluster.wait_for_brokers([victim], timeout_s=60)
    if not acked_after:
        raise RuntimeError("produce never succeeded after the leader was killed")
    return acked_after[0] - killed_at[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60000)
    parser.add_argument("--quick", action="store_true", help="fewer records and one repeat")
    parser.add_argument("--repeat", type=int, default=2,
                        help="interleaved RF 1 / RF 3 pairs (more on a busy machine)")
    args = parser.parse_args(argv)
    records = 15000 if args.quick else args.records
    repeats = 1 if args.quick else args.repeat
    with tempfile.TemporaryDirectory(prefix="weir-bench-repl-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, port_base=0,
                               session_timeout_ms=SESSION_TIMEOUT_MS,
                               overrides={"replica.lag.time.max.ms": "10000"})
        cluster.start(timeout_s=120)
        try:
            create(cluster.bootstrap, "rf1", 1)
            create(cluster.bootstrap, "rf3", 3)
            throughput(cluster.bootstrap, "rf1", 2000)  # warm up both paths
            throughput(cluster.bootstrap, "rf3", 2000)
            runs: dict[str, list[float]] = {"rf1": [], "rf3": []}
            for _ in range(repeats):
                for topic in ("rf1", "rf3"):
                    runs[topic].append(throughput(cluster.bootstrap, topic, records))
            rf1, rf3 = max(runs["rf1"]), max(runs["rf3"])
            lat = latency(cluster.bootstrap, "rf3", rate=500, seconds=5 if args.quick else 10)
            outage = unavailability(cluster, "rf3")
        finally:
            cluster.stop()
    # Each pair ran back to back: its ratio shares the machine's load of those seconds.
    pair_median = statistics.median(b / a for a, b in zip(runs["rf1"], runs["rf3"], strict=True))
    info = machine()
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    commit = info["commit"]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    doc = {"when": when, "commit": commit, "machine": info, "records": records,
           "throughput_mb_s": runs, "rf3_over_rf1": rf3 / rf1,
           "pair_ratios_median": pair_median, "latency": lat,
           "unavailability_s": outage, "session_timeout_ms": SESSION_TIMEOUT_MS}
    md = "\n".join([
        f"# Replication benchmark — {when}",
        "",
        (f"Commit `{commit}`; {info.get('cpu', '?')}, {info.get('cores', '?')} cores; "
        f"Python {sys.version.split()[0]}. One 3-broker Weir cluster on loopback; one "
        f"partition per topic; {records} records of 1 KiB per run, best of {repeats}; "
        "confluent-kafka, acks=all, idempotent, batch.size 256 KiB, linger.ms 5."),
        "",
        "| figure | value |",
        "|---|---:|",
        f"| produce RF 1, acks=all (MB/s) | {rf1:.1f} |",
        f"| produce RF 3, acks=all, min.insync.replicas=2 (MB/s) | {rf3:.1f} |",
        f"| **RF 3 / RF 1** (Kafka's published figure: about 0.51) | **{rf3 / rf1:.2f}** |",
        f"| RF 3 / RF 1, median over the {repeats} back-to-back pairs | {pair_median:.2f} |",
        (f"| load average at start / end | {info['load_average_at_start'][0]} / "
         f"{info['load_average_at_end'][0]} |"),
        f"| latency p50 at 500 records/s, RF 3 (ms) | {lat['p50_ms']:.1f} |",
        f"| latency p99 at 500 records/s, RF 3 (ms) | {lat['p99_ms']:.1f} |",
        f"| unavailability after SIGKILL of the leader (s) | {outage:.2f} |",
        f"| zookeeper.session.timeout.ms (s) | {SESSION_TIMEOUT_MS / 1000:.1f} |",
        "",
        ("Unavailability is measured from the kill to the first acknowledgement of a record "
        "produced after it; the goal is at most the session timeout plus 1 s."),
        "",
    ])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"replication-{when}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (RESULTS / f"replication-{when}.md").write_text(md)
    (RESULTS / "replication-latest.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

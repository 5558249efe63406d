"""Replication benchmark: all figures from one run on one 3-broker cluster.

1. Produce throughput with replication factor 3 and acks=all against replication factor 1
   (acks=all), same records, same client settings, interleaved; the ratio is Weir's figure
   (Kafka's published ratio for synchronous 3x replication is about 0.51).  Two producers:
   ``idempotent`` (the issue's figure; librdkafka then keeps ONE produce request per
   partition in flight, see below) and ``pipelined`` (idempotence off,
   ``max.in.flight.requests.per.connection=5``, as the Java producer of Kafka's published
   figure).  Each run records the CPU seconds of every broker process and of this process
   (the client's librdkafka threads included) and librdkafka's produce round trip (``rtt``
   from its statistics), so a run shows whether it was bound by CPU or by waiting.
2. End-to-end latency (produce call to delivery report) p50/p99 at a steady moderate rate,
   RF 3, acks=all.
3. Unavailability after SIGKILL of a partition leader: time from the kill until a record
   produced after it is acknowledged, against zookeeper.session.timeout.ms.

    .venv/bin/python -m bench run replication [--records N] [--quick]

Results: bench/results/replication.{md,json} (python -m bench run).

librdkafka's idempotent producer caps a partition's in-flight *messages* (not requests) at 5
(``rd_kafka_toppar_producer_serve``: ``RD_KAFKA_IDEMP_MAX_INFLIGHT - rktp_msgs_inflight``),
so with batches of more than 4 records it sends the next request of a partition only after
the previous one was acknowledged: one partition's throughput is then batch size ÷ round
trip, and with acks=all the round trip includes a replication round trip.
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

from bench.harness import machine, out_dir
from bench.page_cache import described, settle
from weir.ops.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
RESULTS = out_dir()
SESSION_TIMEOUT_MS = 6000
VALUE = b"x" * 1024
WARM_RECORDS = 500


def create(bootstrap: str, name: str, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, rf, config={"min.insync.replicas": str(min(rf, 2))})],
                        operation_timeout=60)[name].result(60)


def leader_of(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return md.topics[topic].partitions[0].leader


PRODUCERS = {
    "idempotent": {"enable.idempotence": True},
    "pipelined": {"enable.idempotence": False, "max.in.flight.requests.per.connection": 5},
}
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def throughput(bootstrap: str, topic: str, records: int, producer_kind: str = "idempotent",
               rtts: list[float] | None = None, batch_bytes: int = 262144) -> float:
    """MB/s of record values, acks=all.  ``rtts``: receives librdkafka's produce round trips
    to the partition leader (its statistics' per-broker ``rtt`` p50, ms, once a second);
    ``batch_bytes``: the producer's ``batch.size`` (bench/event_loop.py varies it)."""
    errors: list[object] = []

    def stats(text: str) -> None:
        if rtts is None:
            return
        for broker in json.loads(text).get("brokers", {}).values():
            rtt = broker.get("rtt", {})
            if broker.get("nodeid", -1) >= 0 and rtt.get("cnt", 0):
                rtts.append(rtt["p50"] / 1000)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": batch_bytes, "queue.buffering.max.kbytes": 262144,
                         "statistics.interval.ms": 1000, "stats_cb": stats,
                         **PRODUCERS[producer_kind]})
    # Connections, metadata and (idempotent) the producer id first, not timed: at 200 MB/s
    # a run lasts about a second, and the producer's start-up took a third of that.
    for _ in range(WARM_RECORDS):
        producer.produce(topic, VALUE, on_delivery=lambda e, m: e and errors.append(e))
    producer.flush(60)
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


def measured_run(cluster: LocalCluster, topic: str, records: int, kind: str,
                 batch_bytes: int = 262144) -> dict:
    """One throughput run with the CPU seconds each process spent in it, after
    ``settle()`` (page_cache.py: no run inherits the page cache of the runs before it)."""
    dropped = settle()
    pids = {b: cluster.broker_pid(b) for b in cluster.broker_ids}
    before = {b: cpu_seconds(pid) for b, pid in pids.items() if pid}
    own = own_cpu_seconds()
    rtts: list[float] = []
    start = time.perf_counter()
    mb_s = throughput(cluster.bootstrap, topic, records, kind, rtts, batch_bytes)
    wall = time.perf_counter() - start
    brokers = {b: round(cpu_seconds(pid) - before[b], 3) for b, pid in pids.items()
               if pid and b in before}
    client = round(own_cpu_seconds() - own, 3)
    cores = os.cpu_count() or 1
    gb = (records + WARM_RECORDS) * len(VALUE) / 1e9  # the brokers' CPU covers the warm-up
    return {"mb_s": mb_s, "wall_s": round(wall, 3), "cpu_s_brokers": brokers,
            "cpu_s_client": client,
            # CPU per unit of work: on a shared machine this holds still where MB/s does not
            "broker_cpu_s_per_gb": round(sum(brokers.values()) / gb, 2),
            # share of the machine's CPU time these processes used during the run
            "cpu_busy": round((sum(brokers.values()) + client) / (wall * cores), 3),
            "rtt_p50_ms": round(statistics.median(rtts), 2) if rtts else None,
            "load_1min": round(os.getloadavg()[0], 2), "cache_dropped": dropped}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--quick", action="store_true", help="fewer records and one repeat")
    parser.add_argument("--repeat", type=int, default=2,
                        help="interleaved RF 1 / RF 3 pairs (more on a busy machine)")
    parser.add_argument("--producers", default="idempotent,pipelined",
                        help=f"comma-separated, of {', '.join(PRODUCERS)}")
    parser.add_argument("--skip-latency", action="store_true",
                        help="throughput only (no latency, no SIGKILL)")
    args = parser.parse_args(argv)
    records = 15000 if args.quick else args.records
    repeats = 1 if args.quick else args.repeat
    kinds = [k for k in args.producers.split(",") if k]
    lat: dict[str, float] = {}
    outage = float("nan")
    info = machine()  # the load average before the cluster starts
    with tempfile.TemporaryDirectory(prefix="weir-bench-repl-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, port_base=0,
                               session_timeout_ms=SESSION_TIMEOUT_MS,
                               overrides={"replica.lag.time.max.ms": "10000"})
        cluster.start(timeout_s=120)
        try:
            create(cluster.bootstrap, "rf1", 1)
            create(cluster.bootstrap, "rf3", 3)
            for kind in kinds:
                throughput(cluster.bootstrap, "rf1", 2000, kind)  # warm up both paths
                throughput(cluster.bootstrap, "rf3", 2000, kind)
            runs: dict[str, dict[str, list[dict]]] = {k: {"rf1": [], "rf3": []} for k in kinds}
            for _ in range(repeats):
                for kind in kinds:
                    for topic in ("rf1", "rf3"):
                        runs[kind][topic].append(
                            measured_run(cluster, topic, records, kind))
            if not args.skip_latency:
                lat = latency(cluster.bootstrap, "rf3", rate=500,
                              seconds=5 if args.quick else 10)
                outage = unavailability(cluster, "rf3")
        finally:
            cluster.stop()
    figures = {}
    for kind in kinds:
        rf1 = [r["mb_s"] for r in runs[kind]["rf1"]]
        rf3 = [r["mb_s"] for r in runs[kind]["rf3"]]
        # Each pair ran back to back: its ratio shares the machine's load of those seconds.
        figures[kind] = {"rf1_best": max(rf1), "rf3_best": max(rf3),
                         "rf3_over_rf1": max(rf3) / max(rf1),
                         "pair_ratios": [b / a for a, b in zip(rf1, rf3, strict=True)],
                         "pair_ratios_median": statistics.median(
                             b / a for a, b in zip(rf1, rf3, strict=True))}
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    commit = info["commit"]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    doc = {"when": when, "commit": commit, "machine": info, "records": records,
           "producers": {k: PRODUCERS[k] for k in kinds}, "runs": runs, "figures": figures,
           "latency": lat, "unavailability_s": outage,
           "session_timeout_ms": SESSION_TIMEOUT_MS}
    if "idempotent" in figures:  # the keys earlier result files had
        doc["rf3_over_rf1"] = figures["idempotent"]["rf3_over_rf1"]
        doc["pair_ratios_median"] = figures["idempotent"]["pair_ratios_median"]
    lines = [
        f"# Replication benchmark — {when}",
        "",
        (f"Commit `{commit}`; {info.get('cpu', '?')}, {info.get('cores', '?')} cores; "
         f"Python {sys.version.split()[0]}. One 3-broker Weir cluster on loopback; one "
         f"partition per topic; {records} records of 1 KiB per run, best of {repeats}; "
         "confluent-kafka, acks=all, batch.size 256 KiB, linger.ms 5; producers: "
         + "; ".join(f"{k} {PRODUCERS[k]}" for k in kinds) + ". Timed from after "
         f"{WARM_RECORDS} records sent and flushed by the same producer. "
         + described(all(r["cache_dropped"] for k in runs.values() for t in k.values()
                         for r in t))),
        "",
        "| figure | value |",
        "|---|---:|",
    ]
    for kind, fig in figures.items():
        lines += [
            f"| {kind}: produce RF 1, acks=all (MB/s, best) | {fig['rf1_best']:.1f} |",
            (f"| {kind}: produce RF 3, acks=all, min.insync.replicas=2 (MB/s, best) | "
            f"{fig['rf3_best']:.1f} |"),
            (f"| **{kind}: RF 3 / RF 1** (Kafka's published figure: about 0.51) | "
            f"**{fig['rf3_over_rf1']:.2f}** |"),
            (f"| {kind}: RF 3 / RF 1, median over the {repeats} back-to-back pairs | "
            f"{fig['pair_ratios_median']:.2f} |"),
        ]
    lines.append(f"| load average at start / end | {info['load_average_at_start'][0]} / "
                 f"{info['load_average_at_end'][0]} |")
    if lat:
        lines += [f"| latency p50 at 500 records/s, RF 3, idempotent (ms) | {lat['p50_ms']:.1f} |",
                  f"| latency p99 at 500 records/s, RF 3, idempotent (ms) | {lat['p99_ms']:.1f} |",
                  f"| unavailability after SIGKILL of the leader (s) | {outage:.2f} |",
                  f"| zookeeper.session.timeout.ms (s) | {SESSION_TIMEOUT_MS / 1000:.1f} |"]
    lines += ["", ("Every run (CPU seconds per process; busy = their CPU ÷ (wall × cores); rtt = "
              "librdkafka's produce round-trip p50):"), "",
              ("| producer | topic | MB/s | wall s | CPU s brokers | broker CPU s / GB | "
               "CPU s client | busy | rtt p50 ms | load |"),
              "|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for kind in kinds:
        for i in range(repeats):
            for topic in ("rf1", "rf3"):
                r = runs[kind][topic][i]
                brokers = ", ".join(f"{b}: {c:.2f}" for b, c in r["cpu_s_brokers"].items())
                rtt = "–" if r["rtt_p50_ms"] is None else f"{r['rtt_p50_ms']:.1f}"
                per_gb = r.get("broker_cpu_s_per_gb", "–")
                lines.append(f"| {kind} | {topic} | {r['mb_s']:.1f} | {r['wall_s']:.2f} | "
                             f"{brokers} | {per_gb} | {r['cpu_s_client']:.2f} | "
                             f"{r['cpu_busy']:.2f} | "
                             f"{rtt} | {r['load_1min']} |")
    if lat:
        lines += ["", ("Unavailability is measured from the kill to the first acknowledgement "
                       "of a record produced after it; the goal is at most the session "
                       "timeout plus 1 s.")]
    lines.append("")
    md = "\n".join(lines)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"replication-{when}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (RESULTS / f"replication-{when}.md").write_text(md)
    (RESULTS / "replication-latest.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

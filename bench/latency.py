"""Latency benchmark: produce (send → ack) and end to end (send → consumer receives),
acks=all, replication factor 3, min.insync.replicas=2, at fixed record rates.

    .venv/bin/python -m bench run latency                      # 500 and 5000 records/s, 30 s per rate and producer
    .venv/bin/python -m bench run latency --quick              # 10 s each
    .venv/bin/python -m bench run latency --rates 500 --seconds 60 --repeat 3

What one run does:

1. Starts a 3-broker Weir cluster (``LocalCluster``, managed ZooKeeper, free ports, each
   broker with a ``metrics.http.port``) and, per rate, creates a fresh topic (1 partition,
   RF 3, ``min.insync.replicas=2``).
2. Starts a **consumer in another process** (confluent-kafka ``Consumer``, ``assign()`` at
   the log end, default fetch settings), which stamps each record's arrival with
   ``time.time_ns()``.
3. Produces 1 KiB records at the given rate with a confluent-kafka ``Producer``
   (``acks=all``, ``linger.ms`` 0 unless ``--linger-ms``), once per producer
   configuration of ``--producers`` (both by default, as in ``replication.py``):
   ``idempotent`` and ``pipelined`` (idempotence off, 5 requests in flight).  librdkafka's
   idempotent producer keeps one request per partition in flight once 5 records are in
   flight, so a round trip that is late holds everything produced meanwhile for the next
   one; a pipelined producer sends it in the requests after.  The first 8 bytes of each value
   are its send time (``time.time_ns()``).  A separate thread polls the producer so each
   delivery callback runs as soon as librdkafka has the acknowledgement; the callback
   records ``time.time_ns()``.  librdkafka's own figure (``Message.latency()``) is kept too.
   The sender paces by schedule, not by sleeping a fixed interval, so a stall does not lower
   the offered rate (no coordinated omission on the sending side).
4. Reports p50, p99, p99.9 and max over **every sample** (numpy percentiles), for produce
   and end to end, and the brokers' ``weir_event_loop_lag_ms`` histogram accumulated during
   the run (how often and how long the event loops stalled).

Goal (issue: latency): p99 ≤ 5 × p50 and p99.9 ≤ 10 × p50 at both rates.  Producer,
consumer and three brokers share the machine; the load average is recorded with each run.

Results: bench/results/latency.{md,json} (python -m bench run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import re
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import cluster as bench_cluster
from bench.harness import machine, out_dir
from bench.page_cache import settle
from weir.config import read_properties
from weir.ops.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
RESULTS = out_dir()
VALUE_SIZE = 1024
_STAMP = struct.Struct(">q")
PERCENTILES = (50, 99, 99.9)
SAMPLES_DIR = ""  # --samples
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- consumer (its own process) -------------------------------------------------------------

def consume(bootstrap: str, topic: str, expected: int, ready: mp.Event, out: str,
            deadline_s: float) -> None:
    """Receive ``expected`` records from the log end; write (send_ns, recv_ns) pairs."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "latest"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_END)])
    # The assignment takes effect once the first fetch position is known: poll until then.
    until = time.monotonic() + 30
    while time.monotonic() < until:
        consumer.consume(1, 0.05)
        if consumer.position([TopicPartition(topic, 0)])[0].offset >= 0:
            break
    ready.set()
    sent, received = [], []
    until = time.monotonic() + deadline_s
    while len(received) < expected and time.monotonic() < until:
        # poll(), not consume(n, timeout): consume waits for n records or the timeout, which
        # would add up to the timeout to every record's measured arrival.
        msg = consumer.poll(0.1)
        now = time.time_ns()
        if msg is not None and msg.error() is None:
            stamp = _STAMP.unpack_from(msg.value())[0]
            if stamp > 0:  # 0: the producer's warm-up
                sent.append(stamp)
                received.append(now)
    consumer.close()
    np.save(out, np.array([sent, received], dtype=np.int64))


# -- producer ---------------------------------------------------------------------------

def _send_at_rate(producer: Producer, topic: str, rate: int, seconds: float, stamp,
                  pad: bytes, report) -> None:
    """Paced by schedule: a stall does not lower the offered rate afterwards."""
    interval = 1.0 / rate
    start = time.perf_counter()
    total = int(rate * seconds)
    for n in range(total):
        delay = start + n * interval - time.perf_counter()
        if delay > 0.0005:
            time.sleep(delay)
        sent = stamp()
        if report is None:
            producer.produce(topic, _STAMP.pack(sent) + pad)
        else:
            producer.produce(topic, _STAMP.pack(sent) + pad,
                             on_delivery=lambda e, m, s=sent: report(e, m, s))


PRODUCER_OVERRIDES: dict[str, str] = {}  # --producer
# --producers: the two producer configurations of replication.py.  ``idempotent`` is what
# the Java client does by default since Kafka 3.0; librdkafka caps it at one produce
# request per partition in flight once five records are in flight.  ``pipelined`` is
# idempotence off with five requests in flight (the Java client's window; librdkafka's
# own default producer is idempotence off too).
PRODUCERS: dict[str, dict[str, object]] = {
    "idempotent": {"enable.idempotence": True},
    "pipelined": {"enable.idempotence": False, "max.in.flight.requests.per.connection": 5},
}


def _client_stats(text: str, topic: str, into: dict[str, list[float]]) -> None:
    """From librdkafka's statistics (once a second): records per produce request (the
    topic's ``batchcnt``), bytes per request (``batchsize``), and the produce round trip
    to the partition leader (broker ``rtt``), as windowed averages and p99s in ms."""
    doc = json.loads(text)
    t = doc.get("topics", {}).get(topic)
    if t and t.get("batchcnt", {}).get("cnt", 0):
        into["batch_records_avg"].append(t["batchcnt"]["avg"])
        into["batch_records_p99"].append(t["batchcnt"]["p99"])
    for broker in doc.get("brokers", {}).values():
        if broker.get("nodeid", -1) >= 0 and broker.get("toppars", {}) \
                and broker.get("rtt", {}).get("cnt", 0):
            into["rtt_p50_ms"].append(broker["rtt"]["p50"] / 1000)
            into["rtt_p99_ms"].append(broker["rtt"]["p99"] / 1000)


def produce(bootstrap: str, topic: str, rate: int, seconds: float, linger_ms: int,
            warmup_s: float = 2.0, client: dict[str, list[float]] | None = None,
            mode: str = "idempotent",
            ) -> tuple[np.ndarray, np.ndarray, int, float, np.ndarray]:
    """Returns (callback latencies ms, librdkafka latencies ms, errors, first record's
    latency ms from a fresh producer, each callback latency's send time in ns);
    ``client`` receives librdkafka's statistics (:func:`_client_stats`) of the measured
    part."""
    stats: dict[str, list[float]] = {k: [] for k in (
        "batch_records_avg", "batch_records_p99", "rtt_p50_ms", "rtt_p99_ms")}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "linger.ms": linger_ms, **PRODUCERS[mode],
                         "statistics.interval.ms": 1000,
                         "stats_cb": lambda text: _client_stats(text, topic, stats),
                         **PRODUCER_OVERRIDES})
    producer.list_topics(topic, timeout=10)  # metadata before the clock starts
    acked: list[int] = []
    sent_at: list[int] = []
    rd_latency: list[float] = []
    errors = [0]
    first_ack: list[int] = []
    stop = threading.Event()

    def poller() -> None:
        while not stop.is_set():
            producer.poll(0.05)

    def report(err, msg, sent_ns):
        if err is not None:
            errors[0] += 1
            return
        acked.append(time.time_ns() - sent_ns)
        sent_at.append(sent_ns)
        lat = msg.latency()
        if lat is not None:
            rd_latency.append(lat * 1000)

    thread = threading.Thread(target=poller, daemon=True)
    thread.start()
    pad = b"x" * (VALUE_SIZE - _STAMP.size)
    # The producer's own start-up (connections, InitProducerId for idempotence, the first
    # metadata) is not steady-state latency: a warm-up at the same rate comes first, with
    # stamp 0 so the consumer skips it; the first record's latency is reported apart.
    first = time.time_ns()
    producer.produce(topic, _STAMP.pack(0) + pad,
                     on_delivery=lambda e, m: first_ack.append(time.time_ns() - first))
    _send_at_rate(producer, topic, rate, warmup_s, lambda: 0, pad, None)
    producer.flush(60)
    acked.clear()
    sent_at.clear()
    rd_latency.clear()
    for values in stats.values():
        values.clear()
    _send_at_rate(producer, topic, rate, seconds, time.time_ns, pad, report)
    producer.flush(60)
    if client is not None:
        client.update({k: [round(v, 2) for v in values] for k, values in stats.items()})
    stop.set()
    thread.join(5)
    if SAMPLES_DIR:  # --samples: every (send time, ack latency) for a later look
        np.save(Path(SAMPLES_DIR) / f"produce-{topic}-{time.time_ns()}.npy",
                np.array([sent_at, acked], dtype=np.int64))
    return (np.array(acked, dtype=np.float64) / 1e6, np.array(rd_latency, dtype=np.float64),
            errors[0], first_ack[0] / 1e6 if first_ack else float("nan"),
            np.array(sent_at, dtype=np.int64))


def summary(ms: np.ndarray) -> dict[str, float]:
    if not len(ms):
        return {"samples": 0}
    p50, p99, p999 = np.percentile(ms, PERCENTILES)
    return {"samples": len(ms), "p50_ms": float(p50), "p99_ms": float(p99),
            "p99.9_ms": float(p999), "max_ms": float(ms.max()), "mean_ms": float(ms.mean()),
            "p99_over_p50": float(p99 / p50), "p99.9_over_p50": float(p999 / p50)}


def tail_episodes(sent_ns: np.ndarray, ms: np.ndarray, gap_ms: float = 50.0) -> dict:
    """The samples at or above p99.9, grouped into episodes: records sent less than
    ``gap_ms`` apart are one episode.  A few long episodes are stalls of something every
    record waited behind (a process off the CPU, a loop stall); hundreds of one-record
    episodes are noise spread over the run."""
    if len(ms) < 1000:
        return {}
    threshold = float(np.percentile(ms, PERCENTILES[2]))
    order = np.argsort(sent_ns[ms >= threshold], kind="stable")
    sent = sent_ns[ms >= threshold][order]
    lat = ms[ms >= threshold][order]
    episodes: list[tuple[int, int]] = []  # (first index, last index) into sent/lat
    for i in range(len(sent)):
        if episodes and (sent[i] - sent[episodes[-1][1]]) / 1e6 < gap_ms:
            episodes[-1] = (episodes[-1][0], i)
        else:
            episodes.append((i, i))
    start = int(sent_ns.min())
    return {"tail_samples": len(sent), "episodes": len(episodes),
            "largest_episode_samples": max(b - a + 1 for a, b in episodes),
            "episodes_at_s": [round((int(sent[a]) - start) / 1e9, 2) for a, _ in episodes][:20],
            "episode_max_ms": [round(float(lat[a:b + 1].max()), 1) for a, b in episodes][:20]}


def _process_cpu() -> dict[int, tuple[str, int, float]]:
    """Every process: (name, parent pid, CPU seconds so far), from /proc."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        out[int(entry.name)] = (name, int(fields[1]),
                                (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS)
    return out


def outside_cpu(before: dict[int, tuple[str, int, float]],
                after: dict[int, tuple[str, int, float]], top: int = 3) -> list[list]:
    """The processes outside the benchmark (not this process or its descendants: the
    brokers, the consumer) that used the most CPU between two :func:`_process_cpu`
    snapshots: [name, pid, seconds].  A kernel thread or a daemon of the machine that
    takes a core for tens of milliseconds shows here, not in any broker's figures.  The
    managed ZooKeeper runs detached from this process, so it may be listed (``java``)."""
    ours = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (_name, ppid, _cpu) in after.items():
            if ppid in ours and pid not in ours:
                ours.add(pid)
                grew = True
    used = [[name, pid, round(cpu - before[pid][2], 3)] for pid, (name, _ppid, cpu)
            in after.items() if pid in before and pid not in ours]
    return sorted((u for u in used if u[2] > 0), key=lambda u: -u[2])[:top]


# -- broker metrics -----------------------------------------------------------------------

_BUCKET = re.compile(r'^weir_event_loop_lag_ms_bucket\{le="([^"]+)"\} (\S+)$', re.MULTILINE)


def loop_lag(ports: list[int]) -> dict[int, dict[str, float]]:
    """Cumulative weir_event_loop_lag_ms buckets of each broker (by metrics port)."""
    out = {}
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        out[port] = {le: float(v) for le, v in _BUCKET.findall(text)}
    return out


def lag_delta(before: dict[int, dict[str, float]], after: dict[int, dict[str, float]]
              ) -> list[dict[str, float]]:
    """Per broker: samples in the run, and how many were ≥ 10, 50, 100 ms late."""
    rows = []
    for port, buckets in after.items():
        d = {le: v - before[port].get(le, 0.0) for le, v in buckets.items()}
        total = d.get("+Inf", 0.0)
        rows.append({"samples": total,
                     "over_10ms": total - d.get("10.0", 0.0),
                     "over_50ms": total - d.get("50.0", 0.0),
                     "over_100ms": total - d.get("100.0", 0.0)})
    return rows


# -- one rate -----------------------------------------------------------------------------

def _await_brokers_in_metadata(bootstrap: str, count: int, timeout_s: float = 120) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while len(admin.list_topics(timeout=10).brokers) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {count} brokers in the metadata")
        time.sleep(0.2)


def run_rate(cluster: LocalCluster, ports: list[int], rate: int, seconds: float,
             linger_ms: int, tag: str, tmp: Path, mode: str = "idempotent") -> dict:
    topic = f"lat-{rate}-{mode}-{tag}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deadline = time.monotonic() + 120
    while True:  # the controller may not have seen every broker register yet
        try:
            admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})],
                                operation_timeout=60)[topic].result(60)
            break
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.INVALID_REPLICATION_FACTOR \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    total = int(rate * seconds)
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    out = str(tmp / f"{topic}.npy")
    proc = ctx.Process(target=consume, args=(cluster.bootstrap, topic, total, ready, out,
                                             seconds + 60))
    proc.start()
    if not ready.wait(60):
        proc.kill()
        raise RuntimeError("consumer did not start")
    dropped = settle()  # page_cache.py: the run does not inherit earlier runs' pages
    load_start = os.getloadavg()
    lag_before = loop_lag(ports)
    cpu_before = _process_cpu()
    client: dict[str, list[float]] = {}
    acked, rd, errors, first, sent = produce(cluster.bootstrap, topic, rate, seconds,
                                             linger_ms, client=client, mode=mode)
    others = outside_cpu(cpu_before, _process_cpu())
    lag_after = loop_lag(ports)
    proc.join(seconds + 90)
    if proc.exitcode != 0:
        raise RuntimeError(f"consumer exited with {proc.exitcode}")
    sent, received = np.load(out)
    e2e = (received - sent) / 1e6
    return {"rate": rate, "producer": mode, "seconds": seconds, "records": total,
            "errors": errors,
            "consumed": len(e2e), "first_record_ms": first, "produce": summary(acked),
            "produce_librdkafka": summary(rd), "end_to_end": summary(e2e),
            "loop_lag": lag_delta(lag_before, lag_after), "client_stats": client,
            "produce_tail": tail_episodes(sent, acked), "outside_cpu_s": others,
            "cache_dropped": dropped,
            "load_average": [round(x, 2) for x in load_start],
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}


def _mode(run: dict) -> str:
    return run["producer"]


def fmt(s: dict) -> str:
    if not s.get("samples"):
        return "– | – | – | – | –"
    return (f"{s['p50_ms']:.1f} | {s['p99_ms']:.1f} | {s['p99.9_ms']:.1f} | "
            f"{s['max_ms']:.1f} | {s['p99_over_p50']:.1f} / {s['p99.9_over_p50']:.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="500,5000")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--linger-ms", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="10 s per rate")
    parser.add_argument("--samples", default="", metavar="DIR",
                        help="keep every produce sample (send time ns, latency ns) as .npy here")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="broker config override (repeatable)")
    parser.add_argument("--producers", default="idempotent,pipelined",
                        help=f"producer configurations to run, of {', '.join(PRODUCERS)}")
    parser.add_argument("--producer", action="append", default=[], metavar="KEY=VALUE",
                        help="producer config override (repeatable), e.g. "
                             "enable.idempotence=false")
    args = parser.parse_args(argv)
    global SAMPLES_DIR
    SAMPLES_DIR = args.samples
    PRODUCER_OVERRIDES.update(kv.split("=", 1) for kv in args.producer)
    seconds = 10.0 if args.quick else args.seconds
    rates = [int(r) for r in args.rates.split(",")]
    modes = args.producers.split(",")
    unknown = [m for m in modes if m not in PRODUCERS]
    if unknown:
        parser.error(f"unknown --producers {unknown}: choose from {list(PRODUCERS)}")
    overrides = dict(kv.split("=", 1) for kv in args.config)
    info = machine()
    runs = []
    with tempfile.TemporaryDirectory(prefix="weir-bench-lat-") as tmpdir:
        tmp = Path(tmpdir)
        with bench_cluster(tmp / "cluster", 3, timeout_s=120, serve_metrics=True,
                           overrides=overrides) as cluster:
            cluster.wait_for_brokers(cluster.broker_ids, timeout_s=120)
            _await_brokers_in_metadata(cluster.bootstrap, 3)
            ports = [int(read_properties(cluster.config_path(b))["metrics.http.port"])
                     for b in cluster.broker_ids]
            for i in range(args.repeat):
                for rate in rates:
                    for mode in modes:
                        run = run_rate(cluster, ports, rate, seconds, args.linger_ms, str(i),
                                       tmp, mode)
                        print(json.dumps(run), flush=True)
                        runs.append(run)
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    doc = {"when": when, "machine": info, "linger_ms": args.linger_ms, "overrides": overrides,
           "producer_overrides": PRODUCER_OVERRIDES, "runs": runs}
    lines = [
        f"# Latency benchmark — {when}",
        "",
        (f"Commit `{info['commit']}`; {info['cpu']}, {info['cores']} cores, "
         f"{info['ram_gib']} GiB RAM; Python {info['python']}; confluent-kafka "
         f"{info['confluent_kafka']} (librdkafka {info['librdkafka']})."),
        ("3 brokers, 1 partition, RF 3, min.insync.replicas=2, acks=all; producers: "
         + "; ".join(f"{m} {PRODUCERS[m]}" for m in modes) + "; "
         f"linger.ms={args.linger_ms}, 1 KiB records, {seconds:g} s per run; consumer in "
         f"another process. Broker overrides: {overrides or 'none'}; producer overrides: "
         f"{PRODUCER_OVERRIDES or 'none'}; brokers' event loop: "
         f"{os.environ.get('WEIR_EVENT_LOOP') or 'default (uvloop)'}."),
        "",
        ("| rate/s | producer | what | p50 ms | p99 ms | p99.9 ms | max ms | "
         "p99/p50 / p99.9/p50 | load avg | loop stalls ≥10/50/100 ms (per broker) |"),
        "|---:|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for run in runs:
        stalls = ", ".join(f"{int(b['over_10ms'])}/{int(b['over_50ms'])}/{int(b['over_100ms'])}"
                           for b in run["loop_lag"])
        load = run["load_average"][0]
        for what, key in (("produce", "produce"), ("produce (librdkafka)", "produce_librdkafka"),
                          ("end to end", "end_to_end")):
            lines.append(f"| {run['rate']} | {_mode(run)} | {what} | {fmt(run[key])} | {load} "
                         f"| {stalls} |")
    lines += ["", ("librdkafka's statistics over each measured run (per second: average and p99 "
                   "of records per produce request, produce round trip p50 / p99 to the "
                   "leader; the median of the seconds, and their worst):"), ""]
    for run in runs:
        c = run["client_stats"]

        def med_max(key: str, c: dict = c) -> str:
            v = c.get(key) or []
            return f"{float(np.median(v)):.1f} / {max(v):.1f}" if v else "–"

        lines.append(f"* {run['rate']}/s {_mode(run)}: records per request avg {med_max('batch_records_avg')}, "
                     f"p99 {med_max('batch_records_p99')}; round trip p50 "
                     f"{med_max('rtt_p50_ms')} ms, p99 {med_max('rtt_p99_ms')} ms")
    lines += ["", ("Where each run's produce p99.9 tail came from: the samples at or above "
                   "it, grouped into episodes (records sent less than 50 ms apart), each "
                   "episode's start in the run and worst latency; and the processes outside "
                   "the benchmark that used the most CPU during the run (CPU seconds):"), ""]
    for run in runs:
        t = run["produce_tail"]
        where = ", ".join(f"{at:g} s ({worst:g} ms)" for at, worst in
                          zip(t.get("episodes_at_s", []), t.get("episode_max_ms", []),
                              strict=True))
        outside = ", ".join(f"{name} {cpu:.2f}" for name, _pid, cpu in run["outside_cpu_s"])
        lines.append(f"* {run['rate']}/s {_mode(run)}: {t.get('tail_samples', 0)} samples in "
                     f"{t.get('episodes', 0)} episodes (largest "
                     f"{t.get('largest_episode_samples', 0)}): {where or '–'}; outside: "
                     f"{outside or 'none'}")
    lines += ["", "Goal: p99 ≤ 5 × p50 and p99.9 ≤ 10 × p50 at both rates.", "",
              "Each producer is warmed up for 2 s at the same rate before its samples count "
              "(the broker's loop-stall counts include that warm-up). A fresh producer's first "
              "record (connection, InitProducerId, metadata) took, in ms: "
              + ", ".join(f"{r['first_record_ms']:.0f} ({r['rate']}/s {_mode(r)})"
                          for r in runs) + ".", ""]
    md = "\n".join(lines)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"latency-{when}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (RESULTS / f"latency-{when}.md").write_text(md)
    (RESULTS / "latency-latest.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

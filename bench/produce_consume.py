"""Produce and consume throughput of one Weir broker against a floor, in the same run.

For each batch size (confluent-kafka ``batch.size``) and acks setting, N 1-KiB records are
produced with confluent-kafka to (a) a one-broker Weir cluster and (b) the floor server
(``bench/floor_server.py``: the least a Kafka-speaking asyncio server must do), then
consumed back by ``assign``.  The figure that matters is weir/floor; beside it, each
server's CPU seconds per GB produced and served (from ``/proc``), which hold still on a
shared machine where MB/s does not.  See bench/README.md.

    .venv/bin/python -m bench run produce_consume [--records N] [--quick] [--profile]

Results go to ``bench/results/produce_consume.{md,json}`` (``python -m bench run``).
``--profile`` instead runs one produce and one consume with the broker under cProfile and
writes its hot spots to ``profile-<timestamp>.txt`` beside its results.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import machine, out_dir, process_cpu_s
from bench.page_cache import described, settle
from weir.ops import procs
from weir.ops.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
RESULTS = out_dir()
PROFILES = HERE / "work"
RECORD = 1024
TICK = os.sysconf("SC_CLK_TCK")
KIB = 1024
BATCH_SIZES = (16 * KIB, 64 * KIB, 256 * KIB, 1024 * KIB)
ACKS = ("1", "all")
BROKER_OVERRIDES = {"message.max.bytes": str(4 << 20), "num.partitions": "1",
                    "auto.create.topics.enable": "false"}
TOPIC_CONFIG = {"max.message.bytes": str(4 << 20)}


@dataclass
class Result:
    target: str  # "weir" or "floor"
    batch_size: int
    acks: str
    records: int
    produce_s: float
    consume_s: float
    repeat: int = 0
    cache_dropped: bool = False  # settle() before the run dropped the page cache
    # CPU seconds the server process spent producing and consuming (None: not measured)
    produce_cpu_s: float | None = None
    consume_cpu_s: float | None = None

    @property
    def mbytes(self) -> float:
        return self.records * RECORD / 1e6

    def to_json(self) -> dict:
        return {**asdict(self),
                "produce_records_per_s": round(self.records / self.produce_s),
                "produce_mb_per_s": round(self.mbytes / self.produce_s, 1),
                "consume_records_per_s": round(self.records / self.consume_s),
                "consume_mb_per_s": round(self.mbytes / self.consume_s, 1),
                **self.cpu_per_gb()}

    def cpu_per_gb(self) -> dict:
        """The server's CPU seconds per GB of record values: on a shared machine this holds
        still where MB/s does not."""
        gb = self.mbytes / 1000
        out = {}
        if self.produce_cpu_s is not None:
            out["produce_server_cpu_s_per_gb"] = round(self.produce_cpu_s / gb, 2)
        if self.consume_cpu_s is not None:
            out["consume_server_cpu_s_per_gb"] = round(self.consume_cpu_s / gb, 2)
        return out


# -- clients -----------------------------------------------------------------------------
def producer_config(bootstrap: str, batch_size: int, acks: str, linger_ms: int) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "batch.size": batch_size,
        "linger.ms": linger_ms,
        "compression.type": "none",
        "message.max.bytes": max(2 * batch_size, 1 << 20),
        "max.in.flight.requests.per.connection": 5,
        "enable.idempotence": False,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1 << 20,
        "delivery.report.only.error": True,
        "log.connection.close": False,
    }


def produce(config: dict, topic: str, records: int) -> float:
    """Produce ``records`` 1-KiB values to partition 0; seconds from first send to flush."""
    errors: list[object] = []
    config = {**config, "on_delivery": lambda err, _msg: errors.append(err)}
    producer = Producer(config)
    producer.list_topics(topic, timeout=30)  # connected, metadata known: not timed
    value = os.urandom(RECORD)
    send, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for i in range(records):
        try:
            send(topic, value, partition=0)
        except BufferError:
            poll(0.01)
            send(topic, value, partition=0)
        if not i & 1023:
            poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} records undelivered, errors: {errors[:3]}")
    return elapsed


def consume(bootstrap: str, topic: str, records: int, fetch_bytes: int) -> float:
    """Read ``records`` from offset 0 by assign; seconds from assign to the last record."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "max.partition.fetch.bytes": fetch_bytes, "fetch.max.bytes": 4 * fetch_bytes,
        "receive.message.max.bytes": 4 * fetch_bytes + (1 << 20),
        "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 256 * 1024,
        "log.connection.close": False,
    })
    try:
        consumer.list_topics(topic, timeout=30)
        seen = 0
        start = time.perf_counter()
        deadline = start + 120
        consumer.assign([TopicPartition(topic, 0, 0)])
        while seen < records:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"consumed {seen} of {records} records from {topic}")
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                seen += 1
        return time.perf_counter() - start
    finally:
        consumer.close()


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1, config=TOPIC_CONFIG)],
                                  operation_timeout=30, request_timeout=30)
    futures[name].result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until the leader is known
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta and meta.error is None and meta.partitions and meta.partitions[0].leader >= 0:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} has no leader")


# -- floor process -----------------------------------------------------------------------
class FloorProcess:
    def __init__(self, data_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "floor_server.py"), "--data-dir", str(data_dir)],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"floor server did not start: {line!r}")
        self.bootstrap = f"127.0.0.1:{int(line.split()[1])}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# -- the run -----------------------------------------------------------------------------
def run_matrix(args: argparse.Namespace, work: Path) -> list[Result]:
    results: list[Result] = []
    cluster = LocalCluster(work / "cluster", brokers=1, port_base=0,
                           overrides=BROKER_OVERRIDES)
    floor = None
    try:
        cluster.start(timeout_s=90)
        floor = FloorProcess(work / "floor")
        targets = (("weir", cluster.bootstrap), ("floor", floor.bootstrap))
        pids = {"weir": cluster.broker_pid(cluster.broker_ids[0]), "floor": floor.proc.pid}
        warm_up(targets, args)
        for repeat in range(args.repeat):
            for batch in args.batch_sizes:
                for acks in args.acks:
                    for target, bootstrap in targets[::-1] if repeat % 2 else targets:
                        results.append(one_run(args, target, bootstrap, batch, acks, repeat,
                                               pids[target]))
    finally:
        if floor is not None:
            floor.stop()
        cluster.stop()
    return results


def warm_up(targets: tuple[tuple[str, str], ...], args: argparse.Namespace) -> None:
    """Not measured: connections, imports, page cache, and on Weir the creation of
    ``__consumer_offsets`` that the consumer's FindCoordinator triggers."""
    for target, bootstrap in targets:
        if target == "weir":
            create_topic(bootstrap, "bench-warm-up")
        produce(producer_config(bootstrap, 64 * KIB, "1", args.linger_ms), "bench-warm-up",
                5000)
        consume(bootstrap, "bench-warm-up", 5000, args.fetch_bytes)


def one_run(args: argparse.Namespace, target: str, bootstrap: str, batch: int, acks: str,
            repeat: int, pid: int | None = None) -> Result:
    """Produce to a fresh topic, then consume it all back; first ``settle()``
    (page_cache.py: no run inherits the page cache of the runs before it)."""
    dropped = settle()
    topic = f"bench-{batch // KIB}k-acks{acks}-r{repeat}"
    if target == "weir":
        create_topic(bootstrap, topic)
    config = producer_config(bootstrap, batch, acks, args.linger_ms)
    cpu0 = process_cpu_s(pid) if pid else None
    p_s = produce(config, topic, args.records)
    cpu1 = process_cpu_s(pid) if pid else None
    c_s = consume(bootstrap, topic, args.records, args.fetch_bytes)
    cpu2 = process_cpu_s(pid) if pid else None
    r = Result(target, batch, acks, args.records, p_s, c_s, repeat, dropped,
               None if cpu0 is None else round(cpu1 - cpu0, 3),
               None if cpu0 is None else round(cpu2 - cpu1, 3))
    j = r.to_json()
    cpu = (f"  server CPU s/GB {j['produce_server_cpu_s_per_gb']} / "
           f"{j['consume_server_cpu_s_per_gb']}" if "produce_server_cpu_s_per_gb" in j else "")
    print(f"#{repeat} {target:5} batch={batch // KIB:5}KiB acks={acks:3} "
          f"produce {j['produce_mb_per_s']:7.1f} MB/s ({j['produce_records_per_s']:7d} rec/s)"
          f"  consume {j['consume_mb_per_s']:7.1f} MB/s{cpu}", flush=True)
    return r


def best_runs(results: list[Result]) -> dict[tuple[str, int, str], Result]:
    """One Result per (target, batch size, acks): the shortest times over the repeats.

    On a shared machine other work only ever slows a run down, so the fastest of N is the
    better estimate of what each server can do (every run is kept in the JSON file).
    """
    groups: dict[tuple[str, int, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.target, r.batch_size, r.acks), []).append(r)
    def median_cpu(values: list[float | None]) -> float | None:
        return None if None in values else statistics.median(values)

    # CPU per run holds still, so its median, not its least, stands for the server
    return {key: Result(key[0], key[1], key[2], runs[0].records,
                        min(r.produce_s for r in runs), min(r.consume_s for r in runs),
                        len(runs), all(r.cache_dropped for r in runs),
                        median_cpu([r.produce_cpu_s for r in runs]),
                        median_cpu([r.consume_cpu_s for r in runs]))
            for key, runs in groups.items()}


def ratios(results: list[Result]) -> list[dict]:
    rows = []
    by_key = best_runs(results)
    for (target, batch, acks), w in by_key.items():
        f = by_key.get(("floor", batch, acks))
        if target != "weir" or f is None:
            continue
        rows.append({"batch_size": batch, "acks": acks,
                     "weir": w.to_json(), "floor": f.to_json(),
                     "produce_ratio": round(f.produce_s / w.produce_s, 2),
                     "consume_ratio": round(f.consume_s / w.consume_s, 2)})
    return rows


def markdown(info: dict, rows: list[dict], args: argparse.Namespace, when: str,
             dropped: bool) -> str:
    machine_line = (f"Commit `{info['commit']}`; {info['cpu']}, {info['cores']} cores, "
                    f"{info['ram_gib']} GiB RAM; Python {info['python']}; kernel "
                    f"{info['kernel']}; load average {info['load_average_at_start']} at start, "
                f"{info['load_average_at_end']} at end; confluent-kafka {info['confluent_kafka']} "
                    f"(librdkafka {info['librdkafka']}).")
    settings = (f"{args.records} records of 1 KiB per run, best of {args.repeat} runs "
                f"(weir and floor interleaved), 1 partition, RF 1, linger.ms={args.linger_ms}, "
                f"compression none, max.in.flight 5; consumer max.partition.fetch.bytes="
                f"{args.fetch_bytes}. MB = 10^6 bytes of record values. "
                + described(dropped))
    header = ("| batch.size | acks | weir produce MB/s | floor produce MB/s | **produce ratio** "
              "| weir consume MB/s | floor consume MB/s | **consume ratio** |")
    out = [f"# Produce/consume benchmark — {when}", "", machine_line, "", settings, "",
           header, "|---:|:---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        w, f = r["weir"], r["floor"]
        out.append(f"| {r['batch_size'] // KIB} KiB | {r['acks']} | {w['produce_mb_per_s']} | "
                   f"{f['produce_mb_per_s']} | **{r['produce_ratio']}** | "
                   f"{w['consume_mb_per_s']} | {f['consume_mb_per_s']} | "
                   f"**{r['consume_ratio']}** |")
    footer = ("Ratio = weir throughput / floor throughput, both measured in this run "
              "(bench/floor_server.py is the floor).")
    out += ["", footer, ""]
    if rows and "produce_server_cpu_s_per_gb" in rows[0]["weir"]:
        out += ["## Server CPU seconds per GB (median over the runs)", "",
                ("The server process's user + system CPU while it took the records and while "
                "it served them back: on a shared machine this holds still where MB/s does "
                f"not. /proc counts in ticks of {1000 / TICK:.0f} ms, "
                f"{1 / TICK / (args.records * RECORD / 1e9):.2f} s/GB at {args.records} "
                "records."), "",
                ("| batch.size | acks | weir produce | floor produce | weir consume | "
                "floor consume |"), "|---:|:---:|---:|---:|---:|---:|"]
        for r in rows:
            w, f = r["weir"], r["floor"]
            out.append(f"| {r['batch_size'] // KIB} KiB | {r['acks']} "
                       f"| {w['produce_server_cpu_s_per_gb']} "
                       f"| {f['produce_server_cpu_s_per_gb']} "
                       f"| {w['consume_server_cpu_s_per_gb']} "
                       f"| {f['consume_server_cpu_s_per_gb']} |")
        out.append("")
    return "\n".join(out)


def write_results(info: dict, results: list[Result], args: argparse.Namespace) -> Path:
    now = datetime.datetime.now(datetime.UTC)
    when = now.strftime("%Y-%m-%d %H:%M UTC")
    stem = f"produce_consume-{now.strftime('%Y%m%dT%H%M%SZ')}"
    rows = ratios(results)
    dropped = bool(results) and all(r.cache_dropped for r in results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {"when": now.isoformat(timespec="seconds"), "machine": info,
           "settings": {"records": args.records, "repeat": args.repeat, "record_bytes": RECORD,
                        "linger_ms": args.linger_ms, "fetch_bytes": args.fetch_bytes},
           "runs": [r.to_json() for r in results], "comparison": rows,
           "page_cache_dropped": dropped}
    (RESULTS / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    text = markdown(info, rows, args, when, dropped)
    (RESULTS / f"{stem}.md").write_text(text)
    (RESULTS / "produce_consume-latest.md").write_text(text)
    return RESULTS / f"{stem}.md"


# -- profiling ---------------------------------------------------------------------------
def run_profile(args: argparse.Namespace, work: Path) -> None:
    """Produce, then consume, each against a broker process running under cProfile.

    The ``.prof`` files go to ``bench/work/`` (ignored by git), a text summary to
    ``profile-<timestamp>.txt`` beside its results.
    """
    RESULTS.mkdir(parents=True, exist_ok=True)
    PROFILES.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    summary = RESULTS / f"profile-{stamp}.txt"
    plain = procs.broker_command
    cluster = LocalCluster(work / "cluster", brokers=1, port_base=0,
                           overrides=BROKER_OVERRIDES)
    batch = args.batch_sizes[0] if len(args.batch_sizes) == 1 else 256 * KIB
    topic = "prof"
    try:
        cluster.start(timeout_s=90)
        warm_up((("weir", cluster.bootstrap),), args)
        create_topic(cluster.bootstrap, topic)
        with summary.open("w") as out:
            out.write(f"commit {machine()['commit']}; {args.records} records, "
                      f"batch.size {batch}, acks=all\n")
            for phase in ("produce", "fetch"):
                prof = PROFILES / f"profile-{phase}.prof"
                seconds = profile_phase(cluster, phase, prof, args, batch, topic)
                out.write(f"\n==== {phase}: {args.records * RECORD / 1e6 / seconds:.1f} MB/s "
                          f"under cProfile ({prof}) ====\n")
                stats = pstats.Stats(str(prof), stream=out)
                stats.sort_stats("tottime").print_stats(25)
                stats.sort_stats("cumulative").print_callees(
                    r"network.py:\d+\((dispatch|begin)\)")
        print(summary.read_text())
        print(f"written: {summary}")
    finally:
        procs.broker_command = plain
        cluster.stop()


def profile_phase(cluster: LocalCluster, phase: str, prof: Path, args: argparse.Namespace,
                  batch: int, topic: str) -> float:
    """Restart broker 1 under cProfile, run ``phase``, stop it (which writes ``prof``)."""
    plain = procs.broker_command
    cluster.stop_broker(1)
    procs.broker_command = lambda cfg: [  # type: ignore[assignment]
        sys.executable, str(HERE / "profile_broker.py"), str(prof),
        *procs.BROKER_ARGV[2:], str(cfg)]
    try:
        cluster.start_broker(1)
        cluster.wait_for_brokers([1], 60)
        create_topic_leader_wait(cluster.bootstrap, topic)
        if phase == "produce":
            config = producer_config(cluster.bootstrap, batch, "all", args.linger_ms)
            seconds = produce(config, topic, args.records)
        else:
            seconds = consume(cluster.bootstrap, topic, args.records, args.fetch_bytes)
        cluster.stop_broker(1)
    finally:
        procs.broker_command = plain
    return seconds


def create_topic_leader_wait(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta and meta.error is None and meta.partitions and meta.partitions[0].leader >= 0:
            return
        time.sleep(0.2)
    raise TimeoutError(f"topic {topic} has no leader after restart")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=None,
                        help="records per run (default 200000; 30000 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer records per run and a single repeat")
    parser.add_argument("--repeat", type=int, default=None,
                        help="runs per configuration, the best reported (default 3; 1 quick)")
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) * KIB for x in s.split(",")],
                        default=list(BATCH_SIZES), help="KiB, comma-separated")
    parser.add_argument("--acks", type=lambda s: s.split(","), default=list(ACKS))
    parser.add_argument("--linger-ms", type=int, default=10)
    parser.add_argument("--fetch-bytes", type=int, default=4 << 20,
                        help="consumer max.partition.fetch.bytes")
    parser.add_argument("--profile", action="store_true",
                        help="profile the broker on one produce and one consume instead")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    args = parser.parse_args(argv)
    if args.records is None:
        args.records = 30_000 if args.quick else 200_000
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    work = Path(tempfile.mkdtemp(prefix="weir-bench-"))
    try:
        if args.profile:
            run_profile(args, work)
            return 0
        info = machine()
        print(f"machine: {info}", flush=True)
        results = run_matrix(args, work)
        info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        path = write_results(info, results, args)
        print(f"\n{(RESULTS / 'produce_consume-latest.md').read_text()}\nwritten: {path}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

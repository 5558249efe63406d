"""CPU per MB of produce: the broker of one source tree against another's and the floor's.

On a shared machine wall-clock throughput swings by 2x between runs; the CPU a server
process spends per MB produced does not (it is what the throughput ratio follows once the
cores are busy).  This script produces N 1-KiB records with confluent-kafka (the
configuration of ``produce_consume.py``) to a one-broker Weir cluster whose broker runs
the code of the working tree ("new") or of a git revision ("base", extracted with
``git archive``), and to the floor server, interleaved in pairs, and reads each server's
CPU time (user + system, ``/proc/<pid>/stat``) before and after every run.

    .venv/bin/python -m bench run produce_cpu                       # base HEAD, 16 KiB, acks=1
    .venv/bin/python -m bench run produce_cpu --base 564a356 --acks all --pairs 5
    .venv/bin/python -m bench run produce_cpu --base 564a356 --replicas 3 --acks all

With ``--replicas 3`` the cluster has three brokers and the topic three replicas
(min.insync.replicas 2); the leader's CPU and each follower's are read (no floor then).

Prints per run MB/s and CPU ms per MB of each server, and the medians; writes
``bench/results/produce_cpu.md`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import out_dir
from bench.produce_consume import (
    BROKER_OVERRIDES,
    KIB,
    RECORD,
    TOPIC_CONFIG,
    FloorProcess,
    create_topic,
    machine,
    produce,
    producer_config,
)
from weir.ops import procs
from weir.ops.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def extract(rev: str, into: Path) -> Path:
    """The ``weir`` package of ``rev`` under ``into`` (for PYTHONPATH)."""
    data = subprocess.run(["git", "archive", rev, "weir"], cwd=ROOT, check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def start_tree(cluster: LocalCluster, tree: Path | None) -> None:
    """(Re)start every broker running the code under ``tree`` (None: the working tree)."""
    ids = cluster.broker_ids
    for broker_id in ids:
        if cluster.broker_pid(broker_id) is not None:
            cluster.stop_broker(broker_id)
    plain = procs.broker_command
    # -P: no current directory on sys.path (it would shadow PYTHONPATH with -m).
    procs.broker_command = lambda cfg: [  # type: ignore[assignment]
        "env", f"PYTHONPATH={tree or ROOT}", sys.executable, "-P", *procs.BROKER_ARGV,
        str(cfg)]
    try:
        for broker_id in ids:
            cluster.start_broker(broker_id)
        cluster.wait_for_brokers(ids, 60)
    finally:
        procs.broker_command = plain


def create_replicated_topic(bootstrap: str, name: str, replicas: int) -> int:
    """A topic of one partition, ``replicas`` replicas (min.insync.replicas 2 when there
    are followers); its leader's id once every replica is in sync."""
    if replicas == 1:
        create_topic(bootstrap, name)
    else:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(name, 1, replicas, config={
            **TOPIC_CONFIG, "min.insync.replicas": "2"})])[name].result(timeout=30)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta and meta.error is None and meta.partitions:
            part = meta.partitions[0]
            if part.leader >= 0 and len(part.isrs) == replicas:
                return part.leader
        time.sleep(0.2)
    raise TimeoutError(f"topic {name} has no leader with every replica in sync")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD", help="git revision of the 'base' broker")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch-kib", type=int, default=16)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--replicas", type=int, default=1,
                        help="brokers and replicas (above 1: no floor, acks as given)")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=10)
    args = parser.parse_args()
    load_start = os.getloadavg()
    mb = args.records * RECORD / 1e6
    # (pair, target, MB/s, leader CPU ms per MB, of which system, followers' mean CPU ms per MB)
    rows: list[tuple[int, str, float, float, float, float]] = []
    targets = ("base", "new") if args.replicas > 1 else ("base", "new", "floor")
    with tempfile.TemporaryDirectory(prefix="weir-produce-cpu-") as tmp:
        work = Path(tmp)
        base = extract(args.base, work / "base")
        cluster = LocalCluster(work / "cluster", brokers=args.replicas, port_base=0,
                               overrides=BROKER_OVERRIDES)
        floor = None
        try:
            cluster.start(timeout_s=90)
            if args.replicas == 1:
                floor = FloorProcess(work / "floor")
            trees = {"base": base, "new": None}
            for pair in range(args.pairs):
                order = list(targets) if pair % 2 == 0 else ["new", "base", *targets[2:]]
                for target in order:
                    topic = f"cpu-{target}-{pair}"
                    if target == "floor":
                        assert floor is not None
                        leader_pid, bootstrap, followers = floor.proc.pid, floor.bootstrap, []
                    else:
                        start_tree(cluster, trees[target])
                        bootstrap = cluster.bootstrap
                        leader = create_replicated_topic(bootstrap, topic, args.replicas)
                        leader_pid = cluster.broker_pid(leader)
                        followers = [cluster.broker_pid(b) for b in cluster.broker_ids
                                     if b != leader]
                    config = producer_config(bootstrap, args.batch_kib * KIB, args.acks,
                                             args.linger_ms)
                    produce(config, topic, 2000)  # warm: connections, page cache
                    pids = [leader_pid, *followers]
                    before = [cpu_s(pid) for pid in pids]
                    seconds = produce(config, topic, args.records)
                    after = [cpu_s(pid) for pid in pids]
                    used = [a[0] + a[1] - b[0] - b[1] for a, b in zip(after, before, strict=True)]
                    system = after[0][1] - before[0][1]
                    follower_ms = (statistics.mean(used[1:]) * 1000 / mb) if followers else 0.0
                    rows.append((pair, target, mb / seconds, used[0] * 1000 / mb,
                                 system * 1000 / mb, follower_ms))
                    print(f"#{pair} {target:5} {mb / seconds:7.1f} MB/s  leader "
                          f"{used[0] * 1000 / mb:6.2f} ms CPU/MB "
                          f"({system * 1000 / mb:.2f} system)"
                          + (f", followers {follower_ms:.2f}" if followers else ""), flush=True)
        finally:
            if floor is not None:
                floor.stop()
            cluster.stop()
    load_end = os.getloadavg()
    med = {t: (statistics.median(r[2] for r in rows if r[1] == t),
               statistics.median(r[3] for r in rows if r[1] == t),
               statistics.median(r[5] for r in rows if r[1] == t))
           for t in targets}
    info = machine()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    ref = med["floor"][1] if "floor" in med else med["base"][1]
    lines = [
        f"# produce_cpu {stamp}",
        "",
        (f"Working tree on commit `{info['commit']}` (\"new\", uncommitted changes included) "
         f"against `{args.base}` (\"base\"); {info['cpu']}, {info['cores']} cores; "
         f"load average {load_start[0]:.1f} at start, {load_end[0]:.1f} at end."),
        (f"{args.records} records of 1 KiB, batch.size {args.batch_kib} KiB, "
         f"acks={args.acks}, {args.replicas} replica(s), {args.pairs} interleaved rounds."),
        "",
        ("| round | server | MB/s | leader CPU ms per MB | of which system "
        "| each follower's CPU ms per MB |"),
        "|---|---|---:|---:|---:|---:|",
        *(f"| {p} | {t} | {s:.1f} | {c:.2f} | {k:.2f} | {f:.2f} |"
          for p, t, s, c, k, f in rows),
        "",
        (f"| median | MB/s | leader CPU ms per MB | ÷ {'floor' if 'floor' in med else 'base'} "
        "| each follower's CPU ms per MB |"),
        "|---|---:|---:|---:|---:|",
        *(f"| {t} | {s:.1f} | {c:.2f} | {c / ref:.2f} | {f:.2f} |"
          for t, (s, c, f) in med.items()),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = out_dir() / f"produce_cpu-{stamp}.md"
    out.write_text(text)
    print(f"written: {out}")


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"{time.monotonic() - started:.0f} s")

"""CPU per MB of produce: the broker of one source tree against another's and the floor's.

On a shared machine wall-clock throughput swings by 2x between runs; the CPU a server
process spends per MB produced does not (it is what the throughput ratio follows once the
cores are busy).  This script produces N 1-KiB records with confluent-kafka (the
configuration of ``produce_consume.py``) to a one-broker Weir cluster whose broker runs
the code of the working tree ("new") or of a git revision ("base", extracted with
``git archive``), and to the floor server, interleaved in pairs, and reads each server's
CPU time (user + system, ``/proc/<pid>/stat``) before and after every run.

    .venv/bin/python bench/produce_cpu.py                       # base HEAD, 16 KiB, acks=1
    .venv/bin/python bench/produce_cpu.py --base 564a356 --acks all --pairs 5

Prints per run MB/s and CPU ms per MB of each server, and the medians; writes
``bench/results/produce_cpu-<UTC time>.md``.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from produce_consume import (
    BROKER_OVERRIDES,
    KIB,
    RECORD,
    FloorProcess,
    create_topic,
    machine,
    produce,
    producer_config,
)

from weir.cli import procs
from weir.cli.cluster import LocalCluster

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


def start_tree(cluster: LocalCluster, tree: Path | None) -> int:
    """(Re)start broker 1 running the code under ``tree`` (None: the working tree)."""
    if cluster.broker_pid(1) is not None:
        cluster.stop_broker(1)
    plain = procs.broker_command
    # -P: no current directory on sys.path (it would shadow PYTHONPATH with -m).
    procs.broker_command = lambda cfg: [  # type: ignore[assignment]
        "env", f"PYTHONPATH={tree or ROOT}", sys.executable, "-P", *procs.BROKER_ARGV,
        str(cfg)]
    try:
        pid = cluster.start_broker(1)
        cluster.wait_for_brokers([1], 60)
    finally:
        procs.broker_command = plain
    return pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD", help="git revision of the 'base' broker")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch-kib", type=int, default=16)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=10)
    args = parser.parse_args()
    load_start = os.getloadavg()
    mb = args.records * RECORD / 1e6
    # (pair, target, MB/s, CPU ms per MB, of which system)
    rows: list[tuple[int, str, float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="weir-produce-cpu-") as tmp:
        work = Path(tmp)
        base = extract(args.base, work / "base")
        cluster = LocalCluster(work / "cluster", brokers=1, port_base=0,
                               overrides=BROKER_OVERRIDES)
        floor = None
        try:
            cluster.start(timeout_s=90)
            floor = FloorProcess(work / "floor")
            trees = {"base": base, "new": None}
            for pair in range(args.pairs):
                order = ["base", "new", "floor"] if pair % 2 == 0 else ["new", "base", "floor"]
                for target in order:
                    if target == "floor":
                        pid, bootstrap = floor.proc.pid, floor.bootstrap
                    else:
                        pid = start_tree(cluster, trees[target])
                        bootstrap = cluster.bootstrap
                    topic = f"cpu-{target}-{pair}"
                    if target != "floor":
                        create_topic(bootstrap, topic)
                    config = producer_config(bootstrap, args.batch_kib * KIB, args.acks,
                                             args.linger_ms)
                    produce(config, topic, 2000)  # warm: connections, page cache
                    before = cpu_s(pid)
                    seconds = produce(config, topic, args.records)
                    after = cpu_s(pid)
                    used = after[0] + after[1] - before[0] - before[1]
                    system = after[1] - before[1]
                    rows.append((pair, target, mb / seconds, used * 1000 / mb,
                                 system * 1000 / mb))
                    print(f"#{pair} {target:5} {mb / seconds:7.1f} MB/s  "
                          f"{used * 1000 / mb:6.2f} ms CPU/MB "
                          f"({system * 1000 / mb:.2f} system)", flush=True)
        finally:
            if floor is not None:
                floor.stop()
            cluster.stop()
    load_end = os.getloadavg()
    med = {t: (statistics.median(r[2] for r in rows if r[1] == t),
               statistics.median(r[3] for r in rows if r[1] == t))
           for t in ("base", "new", "floor")}
    info = machine()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = [
        f"# produce_cpu {stamp}",
        "",
        (f"Working tree on commit `{info['commit']}` (\"new\", uncommitted changes included) "
         f"against `{args.base}` (\"base\"); {info['cpu']}, {info['cores']} cores; "
         f"load average {load_start[0]:.1f} at start, {load_end[0]:.1f} at end."),
        (f"{args.records} records of 1 KiB, batch.size {args.batch_kib} KiB, "
         f"acks={args.acks}, {args.pairs} interleaved rounds."),
        "",
        "| round | server | MB/s | server CPU ms per MB | of which system |",
        "|---|---|---:|---:|---:|",
        *(f"| {p} | {t} | {s:.1f} | {c:.2f} | {k:.2f} |" for p, t, s, c, k in rows),
        "",
        "| median | MB/s | CPU ms per MB | CPU ÷ floor's |",
        "|---|---:|---:|---:|",
        *(f"| {t} | {s:.1f} | {c:.2f} | {c / med['floor'][1]:.2f} |"
          for t, (s, c) in med.items()),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = HERE / "results" / f"produce_cpu-{stamp}.md"
    out.write_text(text)
    print(f"written: {out}")


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"{time.monotonic() - started:.0f} s")

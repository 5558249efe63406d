"""What an idle cluster with thousands of partitions costs each broker's CPU.

Three real broker processes (``LocalCluster``, as ``bench/control_plane.py`` sets them up:
topics of 1,000 partitions created in ZooKeeper, RF 3, preferred leaders spread so each
broker leads a third), nothing produced or consumed.  Once every ISR is full and the
brokers' logs are quiet, each broker's CPU (``/proc/<pid>/stat`` user + system) is read
over ``--seconds``: what remains is the brokers serving each other's idle follower fetches
(each leader answers two followers, each a long poll of ``replica.fetch.wait.max.ms``),
fetching as followers, and their timers.  With ``--py-spy`` one broker is sampled over the
same window and the share of its samples under the leader's Fetch handler, the follower's
fetcher and the rest is reported.

    .venv/bin/python -m bench run idle_cluster [--partitions 3000] [--seconds 20] [--py-spy]
    cd /tmp/old && PYTHONPATH=/tmp/old /work/main/.venv/bin/python /work/main/bench/idle_cluster.py

Results: ``bench/results/idle_cluster.md`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
from bench.control_plane import BROKERS, Bench, load_average
from bench.harness import machine, out_dir

CLK_TCK = os.sysconf("SC_CLK_TCK")
# Where a py-spy stack sample is counted (the first marker found from the innermost frame).
BUCKETS = (
    ("leader: Fetch handler", "handlers/fetch.py"),
    ("follower: fetcher", "replication/fetcher.py"),
    ("follower: fetcher", "replication/leader_endpoint.py"),
    ("controller", "weir/controller/"),
    ("network", "server/network.py"),
)
IDLE_LEAVES = ("(selectors.py:468)", "(threading.py:327)", "(concurrent/futures/thread.py:81)")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def buckets(raw: Path) -> dict[str, float]:
    """Share of the busy samples per bucket from py-spy's raw (collapsed stacks) output,
    and the busy share of all samples (a thread waiting in epoll, on a condition or for
    work is idle)."""
    counts: collections.Counter[str] = collections.Counter()
    idle = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        if stack.rstrip().endswith(IDLE_LEAVES):
            idle += int(n)
            continue
        where = "other (event loop, timers)"
        for name, marker in BUCKETS:
            if marker in stack:
                where = name
                break
        counts[where] += int(n)
    busy = sum(counts.values())
    out = {k: round(v / (busy or 1), 3) for k, v in counts.most_common()}
    out["busy share of all samples"] = round(busy / ((busy + idle) or 1), 3)
    return out


async def measure(bench: Bench, seconds: float, spy: bool, work: Path) -> dict:
    bench.cluster.start(timeout_s=120)
    try:
        await bench.phase("setup", bench.setup)
        await bench.settle(quiet_s=5)
        pids = {b: bench.cluster.broker_pid(b) for b in BROKERS}
        spy_proc = None
        raw = work / f"idle-cluster-broker1-{os.getpid()}.txt"
        if spy:
            spy_proc = await asyncio.create_subprocess_exec(
                str(HERE.parent / ".venv/bin/py-spy"), "record", "-p", str(pids[1]), "-d",
                str(int(seconds)), "-r", "50", "-f", "raw", "-o", str(raw),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load = load_average()
        before = {b: cpu_s(p) for b, p in pids.items()}
        t0 = time.monotonic()
        await asyncio.sleep(seconds)
        wall = time.monotonic() - t0
        used = {b: cpu_s(p) - before[b] for b, p in pids.items()}
        out = {"load_before": load, "load_after": load_average(), "seconds": round(wall, 1),
               "cpu_share": {str(b): round(used[b] / wall, 3) for b in BROKERS}}
        if spy_proc is not None:
            await asyncio.wait_for(spy_proc.wait(), seconds + 60)
            if raw.exists():
                out["broker1_samples"] = buckets(raw)
        return out
    finally:
        bench.cluster.stop(timeout_s=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--py-spy", action="store_true")
    parser.add_argument("--label", default="", help="e.g. 'before' or 'after'")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    # What the brokers import (they run ``python -m weir`` from this directory): compare
    # commits by running from a checkout of another one (cd there, PYTHONPATH=there).
    brokers_weir = subprocess.run(
        [sys.executable, "-c", "import weir; print(weir.__file__)"], capture_output=True,
        text=True, check=False).stdout.strip()
    work = HERE / "work"
    work.mkdir(exist_ok=True)
    info = machine()
    with tempfile.TemporaryDirectory(prefix="idle-cluster-") as tmp:
        bench = Bench(Path(tmp), args.partitions, 1000)
        out = asyncio.run(measure(bench, args.seconds, args.py_spy, work))
    lines = [f"# Idle cluster: {args.partitions} partitions RF 3 on 3 brokers {args.label}", "",
             f"brokers' code: {brokers_weir} (cwd {os.getcwd()})", "",
             (f"commit {info['commit']}, {info['cpu']}, {info['cores']} cores; load average "
              f"{out['load_before']} before, {out['load_after']} after"), "",
             f"CPU of each broker over {out['seconds']} s of idleness (1.0 = one core): "
             + ", ".join(f"broker {b} {v:.3f}" for b, v in out["cpu_share"].items())]
    if "broker1_samples" in out:
        lines += ["", "py-spy samples of broker 1 over the same window (shares of its busy samples): "
                  + ", ".join(f"{k} {v:.1%}" for k, v in out["broker1_samples"].items())]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_save:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        (out_dir() / f"idle_cluster-{stamp}.md").write_text(text)


if __name__ == "__main__":
    main()

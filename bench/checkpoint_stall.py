"""The event loop's share of a periodic offset checkpoint (replication-offset-checkpoint),
at 1, 1,000 and 10,000 partitions in one log dir.

    .venv/bin/python -m bench run checkpoint_stall [--partitions 1,1000,10000] [--repeat 9]

Kafka's ``ReplicaManager.checkpointHighWatermarks`` runs on its scheduler's threads. The
broker's scheduler (``weir/server/scheduler.py``) now reads the offsets on the loop
(``LogManager.checkpoint_writes``) and writes the file, fsynced, renamed, its dir fsynced,
on its I/O thread; before, the whole write ran on the loop. Per size, each repeat times:
the whole write done inline (what the loop paid before), the snapshot alone (what it pays
now) and the write alone (what the I/O thread pays now). The fsyncs' times depend on the
disk and on the dirty data ext4 must commit with them, so the maxima matter.

Results: bench/results/checkpoint_stall.md (python -m bench run).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import machine, out_dir
from weir.common import TopicPartition
from weir.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT
from weir.storage.config import LogConfig
from weir.storage.log_manager import LogManager

HERE = Path(__file__).resolve().parent
RESULTS = out_dir()


def measure(partitions: int, repeat: int, where: Path) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        manager = LogManager([Path(tmp)], LogConfig())
        manager.startup(0)
        for i in range(partitions):
            manager.get_or_create_log(TopicPartition(f"t{i // 100}", i % 100), now_ms=0)
        manager.deferred.drain()
        times: dict[str, list[float]] = {"inline": [], "snapshot": [], "write": []}
        for _ in range(repeat):
            start = time.perf_counter()
            manager.checkpoint_high_watermarks()
            times["inline"].append(time.perf_counter() - start)
            start = time.perf_counter()
            writes = manager.checkpoint_writes(REPLICATION_OFFSET_CHECKPOINT)
            times["snapshot"].append(time.perf_counter() - start)
            start = time.perf_counter()
            for _log_dir, write in writes:
                write()
            times["write"].append(time.perf_counter() - start)
        manager.shutdown()
        return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1,1000,10000")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--dir", type=Path, default=HERE.parent,
                        help="where the log dir goes (the disk the brokers use)")
    args = parser.parse_args(argv)
    info = machine()
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = [f"# Checkpoint stall — {when}", "",
             (f"Commit `{info['commit']}`; {info['cpu']}, {info['cores']} cores; Python "
             f"{info['python']}; log dir under `{args.dir}`; {args.repeat} repeats per size; "
             "milliseconds, median / max."), "",
             ("| partitions | loop before (whole write inline) | loop now (offsets read) "
             "| I/O thread now (write, fsyncs) |"), "|---:|---:|---:|---:|"]
    for n in (int(x) for x in args.partitions.split(",")):
        t = measure(n, args.repeat, args.dir)
        cells = [f"{1000 * statistics.median(v):.1f} / {1000 * max(v):.1f}"
                 for v in (t["inline"], t["snapshot"], t["write"])]
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    lines.append("")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"checkpoint_stall-{when}.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The leader's cost of idle follower fetches and of an append seen by a parked fetch.

In-process, over a real ReplicaManager and LogManager in a temp dir: N partitions led here
with broker 2 a follower in the ISR.  Measured:

* an idle long-poll cycle: one follower fetch of all N partitions at their log end, with a
  short ``max.wait.ms``, nothing appended (what an idle broker does all day: issue 11 §4's
  "~70 % of an idle broker's loop at 10k partitions");
* an append to one partition while such a fetch is parked (Kafka's DelayedFetch: only the
  appended partition should be looked at);

each with the number of partition reads (``ReplicaManager._read_for_follower`` calls), which does not
depend on the machine's load.  Compare commits by running it with ``PYTHONPATH`` set to
another checkout.

    .venv/bin/python -m bench run fetch_purgatory [--partitions 3333] [--cycles 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import out_dir
from weir.common import TopicPartition
from weir.records.builder import build_batch
from weir.replication.local_reads import FetchPartition
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager


def _manager(path: Path, n: int) -> tuple[ReplicaManager, list[TopicPartition]]:
    lm = LogManager([path], LogConfig.from_dict({}))
    lm.startup(0)
    rm = ReplicaManager(1, lm, lambda _t: LogConfig.from_dict({}), lambda _t: 1)
    tps = [TopicPartition("bench", i) for i in range(n)]
    state = LeaderState(leader=1, leader_epoch=0, isr=[1, 2], replicas=[1, 2],
                        partition_epoch=0, controller_epoch=1)
    rm.apply_leader_and_isr(1, {tp: PartitionStateUpdate(state, None, True) for tp in tps},
                            False)
    return rm, tps


async def _measure(rm: ReplicaManager, tps: list[TopicPartition], cycles: int) -> dict:
    reads = 0
    read_one = rm.reads._read_for_follower  # one partition of a follower's fetch

    def counting(*args, **kwargs):
        nonlocal reads
        reads += 1
        return read_one(*args, **kwargs)

    rm.reads._read_for_follower = counting  # type: ignore[method-assign]
    requests = [FetchPartition(tp, 0, 1 << 20) for tp in tps]
    idle_s, idle_reads = [], []
    for _ in range(cycles):
        reads = 0
        start = time.perf_counter()
        await rm.reads.fetch(2, 20, 1, 1 << 20, requests)  # nothing new: waits 20 ms
        idle_s.append(time.perf_counter() - start - 0.020)
        idle_reads.append(reads)
    batch = build_batch([b"x" * 100])
    append_s, append_reads = [], []
    for i in range(cycles):
        for r in requests:  # the follower is at the log end again
            r.fetch_offset = rm.partitions[r.tp].log.log_end_offset
        fetch = asyncio.create_task(rm.reads.fetch(2, 5000, 1 << 30, 1 << 20, requests))
        await asyncio.sleep(0)
        reads = 0
        start = time.perf_counter()
        await rm.append(1, 1000, {tps[i % len(tps)]: batch})
        append_s.append(time.perf_counter() - start)
        append_reads.append(reads)
        fetch.cancel()
        try:
            await fetch
        except asyncio.CancelledError:
            pass
    return {"idle_cycle_ms": statistics.median(idle_s) * 1000,
            "idle_cycle_reads": statistics.median(idle_reads),
            "append_ms": statistics.median(append_s) * 1000,
            "append_reads": statistics.median(append_reads)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=3333)
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="weir-fetch-purgatory-") as tmp:
        rm, tps = _manager(Path(tmp), args.partitions)
        out = asyncio.run(_measure(rm, tps, args.cycles))
        rm.log_manager.shutdown()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=Path(__file__).parent, check=False).stdout.strip()
    import weir

    print(f"weir from {Path(weir.__file__).parent}; tree commit {commit}; "
          f"{args.partitions} partitions, median of {args.cycles}; load average "
          f"{[round(x, 2) for x in os.getloadavg()]}")
    print(f"idle follower long-poll cycle: {out['idle_cycle_ms']:.1f} ms of work, "
          f"{out['idle_cycle_reads']:.0f} partition reads")
    print(f"append to one partition with that fetch parked: {out['append_ms']:.2f} ms, "
          f"{out['append_reads']:.0f} partition reads")
    (out_dir() / "fetch_purgatory.json").write_text(json.dumps(
        {"partitions": args.partitions, "cycles": args.cycles,
         "weir": str(Path(weir.__file__).parent), **out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

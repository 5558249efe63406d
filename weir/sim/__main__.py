"""``python -m weir.sim --seed N [--seeds K] [--faults] [--data] [--groups] [--txn] [--disk-faults]``:
run (and replay) simulations.

Cluster size: ``--brokers``, ``--topics``, ``--partitions`` (per topic),
``--replication-factor``.  ``--scale failure|shutdown`` instead measures the controller's
CPU for one broker failure or controlled shutdown in a quiet cluster of that size, with
``--zk-latency-ms`` of simulated ZooKeeper latency (:mod:`weir.sim.scale`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from weir.sim import SimConfig, run_seed
from weir.sim.cluster import data_config
from weir.sim.txn import txn_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m weir.sim", description=__doc__)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds from --seed")
    parser.add_argument("--brokers", type=int, default=None,
                        help=f"simulated brokers (default {SimConfig.brokers}; --scale: 3)")
    parser.add_argument("--topics", type=int, default=None, help="topics created at the start")
    parser.add_argument("--partitions", type=int, default=None, help="partitions per topic")
    parser.add_argument("--replication-factor", type=int, default=None)
    parser.add_argument("--scale", choices=("failure", "shutdown"), default=None,
                        help="measure the controller's CPU for one broker failure or "
                             "controlled shutdown (no faults, no invariants)")
    parser.add_argument("--zk-latency-ms", type=int, default=1,
                        help="with --scale: simulated ZooKeeper latency")
    parser.add_argument("--faults", action="store_true", help="print the injected faults")
    parser.add_argument("--stats", action="store_true",
                        help="print ZooKeeper operations per event type (and data-path counts)")
    parser.add_argument("--data", action="store_true",
                        help="simulate the data path too: real logs, fetchers, producers")
    parser.add_argument("--groups", action="store_true",
                        help="with the data path: group coordinators over __consumer_offsets "
                             "and consumer group members (implies --data)")
    parser.add_argument("--disk-faults", action="store_true",
                        help="with the data path: two log dirs per broker, one of which may "
                             "fail on a write, fsync or read (KIP-112; implies --data)")
    parser.add_argument("--idempotent", action="store_true",
                        help="with the data path: idempotent producers resending batches "
                             "across leader changes (weir.sim.idempotent; implies --data)")
    parser.add_argument("--txn", action="store_true",
                        help="with the data path: transaction coordinators over "
                             "__transaction_state and transactional producers "
                             "(weir.sim.txn; implies --data)")
    args = parser.parse_args(argv)
    sizes: dict[str, Any] = {key: value for key, value in (
        ("brokers", args.brokers), ("topics", args.topics), ("partitions", args.partitions),
        ("replication", args.replication_factor)) if value is not None}
    if min(sizes.values(), default=1) < 1:
        parser.error("sizes must be positive")
    if sizes.get("replication", 1) > sizes.get("brokers", SimConfig.brokers):
        parser.error("--replication-factor cannot exceed --brokers")
    if args.scale is not None:
        return _scale(args, sizes)
    failed = 0
    for seed in range(args.seed, args.seed + args.seeds):
        if args.groups:
            sizes["groups"] = True
        if args.disk_faults:  # weir.sim.disk
            sizes.update(log_dirs=2, disk_faults=True)
        if args.idempotent:
            sizes["idempotent_producers"] = True
        if args.txn:
            config = txn_config(**sizes)
        elif args.data or args.groups or args.disk_faults or args.idempotent:
            config = data_config(**sizes)
        else:
            config = dataclasses.replace(SimConfig(), **sizes)
        result = run_seed(seed, config)
        status = "ok" if result.ok else "FAILED"
        print(f"seed {seed}: {status} ({result.steps} steps, {len(result.faults)} faults)")
        if args.faults or not result.ok:
            for line in result.faults:
                print(f"  fault {line}")
        for line in result.violations:
            print(f"  violation {line}")
        if args.stats:
            for name, (events, ops, most) in result.zk_ops_per_event.items():
                mean = ops / events if events else 0.0
                print(f"  {name:28s} events {events:6d}  zk ops {ops:6d}  "
                      f"mean {mean:5.2f}  max {most}")
            for name, count in result.data_stats.items():
                print(f"  {name:40s} {count:7d}")
        failed += not result.ok
    return 1 if failed else 0


def _scale(args: argparse.Namespace, sizes: dict[str, Any]) -> int:
    from weir.sim.scale import measure, scale_config
    config = scale_config(sizes.get("topics", 10), sizes.get("partitions", 1000),
                          brokers=sizes.get("brokers", 3),
                          replication=sizes.get("replication", 3))
    result = measure(args.scale, config, args.zk_latency_ms, seed=args.seed)
    print(f"{result.scenario} of broker {result.victim} (leading {result.led} of "
          f"{result.partitions} partitions), {result.zk_latency_ms} ms ZooKeeper latency: "
          f"controller CPU {result.controller_cpu_s:.3f} s (core {result.core_cpu_s:.3f} s, "
          f"GC {result.gc_cpu_s:.3f} s), {result.simulated_ms} simulated ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

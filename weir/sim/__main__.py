"""``python -m weir.sim --seed N [--seeds K] [--faults] [--data]``: run (and replay) simulations."""

from __future__ import annotations

import argparse
import sys

from weir.sim import SimConfig, run_seed
from weir.sim.cluster import data_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m weir.sim", description=__doc__)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds from --seed")
    parser.add_argument("--brokers", type=int, default=SimConfig.brokers)
    parser.add_argument("--faults", action="store_true", help="print the injected faults")
    parser.add_argument("--stats", action="store_true",
                        help="print ZooKeeper operations per event type (and data-path counts)")
    parser.add_argument("--data", action="store_true",
                        help="simulate the data path too: real logs, fetchers, producers")
    args = parser.parse_args(argv)
    failed = 0
    for seed in range(args.seed, args.seed + args.seeds):
        config = (data_config(brokers=args.brokers) if args.data
                  else SimConfig(brokers=args.brokers))
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


if __name__ == "__main__":
    sys.exit(main())

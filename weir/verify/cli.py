"""The ``weir verify`` subcommand (see docs/verify.md)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from weir.verify.nemesis import FAULTS

EXIT_ANOMALIES = 1
EXIT_USAGE = 2


def duration(text: str) -> float:
    """argparse type: ``90``, ``90s``, ``5m``, ``1h``, ``1m30s`` -> seconds."""
    parts = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*"
                         r"(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not parts or not any(parts.groups()):
        raise argparse.ArgumentTypeError(f"expected a duration like 90s or 5m, got {text!r}")
    h, m, s = (float(g) if g else 0.0 for g in parts.groups())
    return h * 3600 + m * 60 + s


def fault_list(text: str) -> list[str]:
    """argparse type: comma-separated fault names, ``all`` or ``none``."""
    if text.strip() in ("", "none"):
        return []
    if text.strip() == "all":
        return list(FAULTS)
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in FAULTS]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown fault(s) {', '.join(bad)}; choose from {', '.join(FAULTS)}")
    return names


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check a cluster's guarantees under injected faults",
                       description="Run a workload against a cluster while a seeded nemesis "
                       "injects faults, then check the history for lost, duplicated or "
                       "reordered records and compare the replicas (docs/verify.md).")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--brokers", type=int, default=3,
                       help="start a local cluster of N brokers behind proxies (default 3)")
    where.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap",
                       metavar="HOST:PORT[,...]",
                       help="verify a running cluster (no faults unless --data-dir gives its "
                            "`weir up` directory); --bootstrap is an older spelling")
    p.add_argument("--data-dir", type=Path, help="a `weir up` data directory: process faults "
                   "and replica comparison on that cluster")
    p.add_argument("--duration", type=duration, default=300.0, help="e.g. 90s, 5m (default 5m)")
    p.add_argument("--nemesis", type=fault_list, default=None,
                   help=f"comma-separated faults from {','.join(FAULTS)}, 'all' or 'none' "
                   "(default: all for the built-in cluster, none with --bootstrap-server)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fault schedule")
    p.add_argument("--workload", choices=("produce-consume", "groups"),
                   default="produce-consume",
                   help="keyed sends and reads, or consumer groups rebalancing")
    p.add_argument("--report", type=Path, default=None,
                   help="report directory (default ./weir-verify-<time>)")
    p.add_argument("--rate", type=float, default=100.0, help="sends per second (default 100)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the topic")
    p.add_argument("--topic", default=None, help="topic (default weir-verify-<seed>)")
    p.add_argument("--keep-data", action="store_true",
                   help="keep the built-in cluster's data directory")


def cmd_verify(args: argparse.Namespace) -> int:
    from weir.verify.runner import Options, run

    attached = args.bootstrap is not None or args.data_dir is not None
    faults = args.nemesis if args.nemesis is not None else ([] if attached else list(FAULTS))
    opts = Options(brokers=args.brokers, duration_s=args.duration, nemesis=faults,
                   seed=args.seed, workload=args.workload, report_dir=args.report,
                   bootstrap=args.bootstrap, data_dir=args.data_dir,
                   keep_data=args.keep_data, partitions=args.partitions, rate=args.rate,
                   topic=args.topic or f"weir-verify-{args.seed}")
    try:
        outcome = run(opts)
    except ValueError as exc:
        print(f"weir verify: {exc}")
        return EXIT_USAGE
    result = outcome.result
    s = result.stats
    print(f"operations {s['operations']}, sends {s['sends']}, acks {s['acks']}, "
          f"indeterminate {s['send_info']}, records read {s['records_read']}")
    for w in result.windows:
        unavailable = "never acked" if w.unavailable_s is None else f"{w.unavailable_s:.2f}s"
        print(f"  window {w.window}: {w.fault} on {w.target}: unavailable {unavailable}")
    for kind, n in result.counts.items():
        if n:
            print(f"  ANOMALY {kind}: {n}")
    for err in outcome.errors:
        print(f"  note: {err}")
    print(f"history {outcome.history_path}\nreport {outcome.report_index}")
    print("valid" if result.valid else "ANOMALIES FOUND")
    return 0 if result.valid else EXIT_ANOMALIES

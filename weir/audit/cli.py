"""The ``weir audit`` subcommand: compare replicas with a Spark job (exit 1 on divergence)."""

from __future__ import annotations

import argparse
import sys


def _log_dir(text: str) -> tuple[int, str]:
    broker, sep, path = text.partition("=")
    if not sep or not broker.strip().isdigit() or not path.strip():
        raise argparse.ArgumentTypeError(f"expected BROKER_ID=PATH, got {text!r}")
    return int(broker), path.strip()


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="compare every replica's log below the high watermark",
                       description="A Spark job reading each selected partition's replicas "
                       "from the brokers' segment files and comparing them batch by batch "
                       "(offsets, CRCs, leader epochs) below the high watermark. Exits 1 "
                       "when replicas diverge (docs/spark.md).")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--data-dir", default=None,
                       help="a `weir up` data directory (default ./weir-data)")
    where.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap",
                       metavar="HOST:PORT[,...]",
                       help="a running cluster; give --log-dir for each broker (--bootstrap "
                            "is an older spelling)")
    p.add_argument("--log-dir", dest="log_dirs", type=_log_dir, action="append", default=[],
                   metavar="BROKER_ID=PATH", help="a broker's log dir (repeatable)")
    p.add_argument("--spark", default="local[2]", metavar="MASTER",
                   help="Spark master (default local[2])")
    p.add_argument("--topics", nargs="+", default=None,
                   help="topic names or regexes (default: every non-internal topic)")
    p.add_argument("--report", default="weir-audit.json",
                   help="report file: .json, or .parquet (default weir-audit.json)")


def cmd_audit(args: argparse.Namespace) -> int:
    from weir.audit.job import audit, local_cluster_dirs

    if args.bootstrap:
        bootstrap = args.bootstrap
        dirs: dict[int, list[str]] = {}
        for broker, path in args.log_dirs:
            dirs.setdefault(broker, []).append(path)
    else:
        try:
            bootstrap, dirs = local_cluster_dirs(args.data_dir or "./weir-data")
        except (ValueError, OSError) as exc:
            print(f"weir audit: {exc}", file=sys.stderr)
            return 2
    _reports, diverged = audit(bootstrap, dirs, master=args.spark, topics=args.topics,
                               report_path=args.report)
    print(f"report: {args.report}")
    return 1 if diverged else 0

"""The ``weir`` command: ``up``, ``down``, ``status``, ``broker start|stop``, ``verify`` and the
Kafka-protocol admin commands ``topic``, ``group`` and ``config`` (``weir/cli/admin.py``)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from weir.audit import cli as audit_cli
from weir.cli import acls, admin, consume, elect, log_dirs, procs, produce, reassign, table, users
from weir.cli.cluster import ClusterError, LocalCluster
from weir.cli.up import DEFAULT_DATA_DIR, cmd_down, cmd_status, cmd_up
from weir.console import cli as console_cli
from weir.verify import cli as verify_cli


def key_value(text: str) -> tuple[str, str]:
    """argparse type for ``--set key=value``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="weir", description="Weir: a Kafka-compatible replicated commit log.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", help="start a local cluster (ZooKeeper + brokers)")
    up.add_argument("--brokers", type=int, default=None,
                    help="number of brokers (default 3, or those the data dir has)")
    up.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="cluster directory")
    up.add_argument("--port-base", type=int, default=None,
                    help="the first broker listens on port-base, the next on port-base + 1, "
                         "... (default 9092; 0: free ports)")
    up.add_argument("--first-broker-id", type=int, default=None, metavar="K",
                    help="broker ids K..K+N-1 (default 1, or what the data dir has; Kafka's "
                         "quickstart uses 0)")
    up.add_argument("--log-dirs", type=int, default=1, metavar="N",
                    help="log dirs per new broker (JBOD, docs/jbod.md; default 1)")
    up.add_argument("--detach", action="store_true", help="return once the cluster is up")
    up.add_argument("--set", dest="overrides", type=key_value, action="append", default=[],
                    metavar="KEY=VALUE", help="broker config override (repeatable)")
    up.add_argument("--timeout", type=float, default=60, help="seconds to wait for startup")
    up.add_argument("--secure", action="store_true",
                    help="SASL_SSL listeners, a local CA, SCRAM user admin, ACLs on; writes "
                         "DIR/client.properties (docs/security.md)")
    up.add_argument("--console", action="store_true",
                    help="also serve the web console (docs/console.md); brokers get metrics ports")
    up.add_argument("--console-port", type=int, default=0, metavar="PORT",
                    help="port of the console (default: a free one)")

    down = sub.add_parser("down", help="stop the local cluster")
    down.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    down.add_argument("--timeout", type=float, default=30, help="seconds before SIGKILL")

    status = sub.add_parser("status", help="show brokers, controller and partitions")
    where = status.add_mutually_exclusive_group()
    where.add_argument("--data-dir", default=None,
                       help=f"local cluster (default {DEFAULT_DATA_DIR})")
    where.add_argument("--zookeeper", default=None, metavar="CONNECT",
                       help="ZooKeeper connect string with chroot, e.g. 127.0.0.1:2181/weir")

    broker = sub.add_parser("broker", help="run or stop one broker")
    bsub = broker.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    bstart = bsub.add_parser("start", help="run a broker in the foreground")
    bstart.add_argument("--config", required=True, help="server.properties")
    bstop = bsub.add_parser("stop", help="SIGTERM a running broker")
    which = bstop.add_mutually_exclusive_group(required=True)
    which.add_argument("--config", help="the server.properties it was started with")
    which.add_argument("--id", type=int, help="broker id in a local cluster")
    bstop.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    reassign.add_parser(sub)
    verify_cli.add_parser(sub)
    audit_cli.add_parser(sub)
    console_cli.add_parser(sub)
    admin.add_parsers(sub)
    elect.add_parser(sub)
    produce.add_parser(sub)
    consume.add_parser(sub)
    users.add_parser(sub)  # weir user add|list|remove (SCRAM credentials)
    acls.add_parser(sub)  # weir acl add|list|remove (kafka-acls.sh)
    log_dirs.add_parser(sub)  # weir log-dirs describe|move (kafka-log-dirs.sh, JBOD)
    table.add_parser(sub)  # weir table describe|list (topic tables, docs/tables.md)
    return parser


# -- commands -----------------------------------------------------------------------------------


def cmd_broker_start(args: argparse.Namespace) -> int:
    from weir.cli.broker_start import start_broker

    return start_broker(args.config)


def cmd_broker_stop(args: argparse.Namespace) -> int:
    if args.config is not None:
        pids = procs.find_broker_pids(args.config)
        what = f"with config {args.config}"
    else:
        cluster = LocalCluster(Path(args.data_dir))
        pid = cluster.broker_pid(args.id)
        pids = [pid] if pid is not None else []
        what = f"{args.id} in {cluster.data_dir}"
    if not pids:
        print(f"weir: no running broker {what}", file=sys.stderr)
        return 1
    for pid in pids:
        procs.send_signal(pid, signal.SIGTERM)
        procs.send_signal(pid, signal.SIGCONT)
        print(f"Sent SIGTERM to broker {what} (pid {pid})")
    return 0


COMMANDS = {"up": cmd_up, "down": cmd_down, "status": cmd_status,
            "reassign": lambda args: reassign.cmd_reassign(args),
            "verify": lambda args: verify_cli.cmd_verify(args),
            "audit": lambda args: audit_cli.cmd_audit(args),
            "console": lambda args: console_cli.cmd_console(args),
            **{name: admin.run for name in admin.COMMANDS},
            "elect": lambda args: admin.run(args, elect.cmd_elect),
            "produce": lambda args: admin.run(args, produce.cmd_produce),
            "consume": lambda args: admin.run(args, consume.cmd_consume),
            "user": lambda args: admin.run(args, users.cmd_user),
            "acl": lambda args: admin.run(args, acls.cmd_acl),
            "log-dirs": lambda args: admin.run(args, log_dirs.cmd_log_dirs),
            "table": lambda args: admin.run(args, table.cmd_table)}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "broker":
        handler = cmd_broker_start if args.broker_command == "start" else cmd_broker_stop
    else:
        handler = COMMANDS[args.command]
        logging.getLogger("kazoo").setLevel(logging.ERROR)  # no reconnect chatter in a CLI
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except (ClusterError, reassign.ReassignError) as exc:
        print(f"weir: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

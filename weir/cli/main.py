"""The ``weir`` command: ``up``, ``down``, ``status``, ``broker start|stop``, ``verify`` and the
Kafka-protocol admin commands ``topic``, ``group`` and ``config`` (``weir/cli/admin.py``)."""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weir.cli.errors import EXIT_USAGE, CliError, command_of, report, silence_broken_pipe
from weir.cli.zkview import close_zk, collect_snapshot, open_zk, render_snapshot

if TYPE_CHECKING:
    from weir.cli.cluster import LocalCluster

# Start-up cost matters (scripts and test suites run a command per step): this module
# imports only the argument parsing of the command being run, and each command imports its
# clients when it runs.  ``weir --help`` builds every subcommand as a stub from this table;
# tests/unit/cli/test_cli_fast_start.py checks it against the real parsers.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "up": ("start a local cluster (ZooKeeper + brokers)", "weir.cli.main:_add_local"),
    "down": ("stop the local cluster", "weir.cli.main:_add_local"),
    "status": ("show brokers, controller and partitions", "weir.cli.main:_add_local"),
    "broker": ("run or stop one broker", "weir.cli.main:_add_local"),
    "reassign": ("move partition replicas between brokers", "weir.cli.reassign:add_parser"),
    "verify": ("check a cluster's guarantees under injected faults",
               "weir.verify.cli:add_parser"),
    "audit": ("compare every replica's log below the high watermark",
              "weir.audit.cli:add_parser"),
    "console": ("serve a read-only web console for a cluster", "weir.console.cli:add_parser"),
    "topic": ("create, list, describe, delete and alter topics", "weir.cli.admin:add_parsers"),
    "group": ("list, describe, delete consumer groups, reset offsets",
              "weir.cli.admin:add_parsers"),
    "config": ("get, set and delete topic and broker configs", "weir.cli.admin:add_parsers"),
    "elect": ("preferred or unclean leader election (kafka-leader-election.sh)",
              "weir.cli.elect:add_parser"),
    "produce": ("produce records read from stdin, one per line (console producer)",
                "weir.cli.produce:add_parser"),
    "consume": ("print records of a topic (console consumer)", "weir.cli.consume:add_parser"),
    "user": ("add, list and remove SCRAM users", "weir.cli.users:add_parser"),
    "acl": ("add, list and remove ACLs (kafka-acls.sh)", "weir.cli.acls:add_parser"),
    "log-dirs": (("describe the brokers' log dirs, move a replica between them "
                  "(kafka-log-dirs.sh)"), "weir.cli.log_dirs:add_parser"),
}


def _load(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


class DefaultsFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default (unless it names one already), as
    argparse's ArgumentDefaultsHelpFormatter, without ``default: None``/``False``/``[]``."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (default in (None, False, [], argparse.SUPPRESS) or "default" in text.lower()
                or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (``weir topic create: error: ...``), exit code 2; with
    ``--json`` among the arguments, as a JSON object. Help shows every default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # type: ignore[override]
        import json

        if "--json" in sys.argv[1:]:
            line = json.dumps({"error": "INVALID_ARGUMENT", "message": message,
                               "command": self.prog})
        else:
            line = f"{self.prog}: error: {message} (see {self.prog} --help)"
        print(line, file=sys.stderr)
        sys.exit(EXIT_USAGE)


DEFAULT_DATA_DIR = "./weir-data"


def key_value(text: str) -> tuple[str, str]:
    """argparse type for ``--set key=value``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def build_parser(only: str | None = "") -> argparse.ArgumentParser:
    """The ``weir`` parser: every subcommand's full parser (``only`` empty), or that one's
    and stubs (help only) for the others (``only`` None: stubs only, for ``weir --help``)."""
    parser = OneLineParser(
        prog="weir", description="Weir: a Kafka-compatible replicated commit log.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    loaded: set[str] = set()
    for name, (_help, target) in SUBCOMMANDS.items():
        if (only == "" or name == only) and target not in loaded:
            loaded.add(target)
            _load(target)(sub)
    for name, (text, _target) in SUBCOMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=text, add_help=False)
    # the order of `weir --help`, whichever parsers were loaded first
    sub._choices_actions.sort(key=lambda a: list(SUBCOMMANDS).index(a.dest))
    return parser


def _add_local(sub: Any) -> None:
    """``up``, ``down``, ``status`` and ``broker start|stop``."""
    up = sub.add_parser("up", help=SUBCOMMANDS["up"][0])
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="cluster directory")
    up.add_argument("--port-base", type=int, default=9092,
                    help="the first broker listens on port-base, the next on port-base + 1, "
                         "... (0: free ports)")
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

    down = sub.add_parser("down", help=SUBCOMMANDS["down"][0])
    down.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="cluster directory")
    down.add_argument("--timeout", type=float, default=30, help="seconds before SIGKILL")

    status = sub.add_parser("status", help=SUBCOMMANDS["status"][0])
    where = status.add_mutually_exclusive_group()
    where.add_argument("--data-dir", default=None,
                       help=f"local cluster (default {DEFAULT_DATA_DIR})")
    where.add_argument("--zookeeper", default=None, metavar="CONNECT",
                       help="ZooKeeper connect string with chroot, e.g. 127.0.0.1:2181/weir")
    where.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT[,...]",
                       help="ask a broker (Kafka's Metadata) instead of ZooKeeper: no leader "
                            "or controller epochs")
    status.add_argument("--json", action="store_true", help="print JSON for scripts")
    status.add_argument("--include-internal", action="store_true",
                        help="also show internal topics (__consumer_offsets, ...)")
    status.add_argument("--under-replicated-partitions", action="store_true",
                        help="only partitions whose ISR is smaller than their replicas")
    status.add_argument("--unavailable-partitions", action="store_true",
                        help="only partitions without a live leader")
    status.add_argument("--command-config", default=None, metavar="FILE",
                        help="client settings (client.properties) for --bootstrap-server")
    status.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to wait for ZooKeeper or the cluster")

    broker = sub.add_parser("broker", help=SUBCOMMANDS["broker"][0])
    bsub = broker.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    bstart = bsub.add_parser("start", help="run a broker in the foreground")
    bstart.add_argument("--config", required=True, help="server.properties")
    bstop = bsub.add_parser("stop", help="SIGTERM a running broker")
    which = bstop.add_mutually_exclusive_group(required=True)
    which.add_argument("--config", help="the server.properties it was started with")
    which.add_argument("--id", type=int, help="broker id in a local cluster")
    bstop.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                       help="cluster directory (with --id)")


# -- commands -----------------------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> int:
    from weir.cli.broker_start import EXIT_CONFIG
    from weir.cli.cluster import ClusterError, LocalCluster
    from weir.config import BrokerConfig, ConfigError

    overrides = dict(args.overrides)
    try:  # fail before starting anything on a bad override
        BrokerConfig.from_dict({"broker.id": "0", "zookeeper.connect": "x", **overrides})
    except ConfigError as exc:
        print(f"weir: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.first_broker_id is not None and args.first_broker_id < 0:
        print("weir: --first-broker-id must be 0 or more", file=sys.stderr)
        return EXIT_CONFIG
    if args.log_dirs < 1:
        print("weir: --log-dirs must be 1 or more", file=sys.stderr)
        return EXIT_CONFIG
    cluster = LocalCluster(Path(args.data_dir), args.brokers, args.port_base, overrides,
                           first_broker_id=args.first_broker_id, log_dirs=args.log_dirs)
    cluster.serve_metrics = args.console
    from weir.cli.secure import SecureCluster

    secure = SecureCluster(cluster.data_dir)
    if args.secure or (secure.dir / "users.json").exists():  # a restart stays secured
        cluster.secure = secure
    print(f"Starting local cluster in {cluster.data_dir} ...", flush=True)
    try:
        cluster.start(timeout_s=args.timeout)
        if args.console:
            print(f"Console: {cluster.start_console(args.console_port)}", flush=True)
    except KeyboardInterrupt:
        cluster.stop()
        return 130
    except (ClusterError, TimeoutError, OSError, RuntimeError) as exc:
        print(f"weir: cluster did not start: {exc}", file=sys.stderr)
        cluster.stop()
        return 1
    print(f"ZooKeeper: {cluster.zookeeper_connect}")
    print(f"Bootstrap servers: {cluster.bootstrap}", flush=True)
    if cluster.secure is not None:
        print(f"Client settings ({cluster.secure.client_properties_path}):\n"
              + cluster.secure.write_client_properties(cluster.bootstrap), flush=True)
    if args.detach:
        return 0
    try:
        live_view(cluster)
    finally:
        print("\nStopping the cluster ...", flush=True)
        cluster.stop()
        print("Stopped.")
    return 0


def live_view(cluster: LocalCluster, interval_s: float = 1.0) -> None:
    """Redraw the status every ``interval_s`` until Ctrl-C (or SIGTERM)."""
    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    tty = sys.stdout.isatty()
    last = None
    try:
        while True:
            text = _status_text(cluster)
            if tty:
                sys.stdout.write("\x1b[H\x1b[2J" + text + "\n\n(Ctrl-C stops the cluster)\n")
                sys.stdout.flush()
            elif text != last:
                print(f"--- {time.strftime('%H:%M:%S')}\n{text}", flush=True)
            last = text
            time.sleep(interval_s)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def _status_text(cluster: LocalCluster) -> str:
    processes = {i: cluster.broker_pid(i) for i in cluster.broker_ids}
    header = f"weir cluster {cluster.data_dir}\nbootstrap: {cluster.bootstrap}\n"
    try:
        snap = collect_snapshot(cluster.zk())
    except Exception as exc:  # noqa: BLE001 - keep the view alive while ZooKeeper is away
        return header + f"(ZooKeeper unavailable: {exc})"
    return header + "\n" + render_snapshot(snap, processes, partitions=False)


def cmd_down(args: argparse.Namespace) -> int:
    from weir.cli.cluster import LocalCluster, read_cluster_file

    data_dir = Path(args.data_dir)
    if read_cluster_file(data_dir) is None:
        print(f"weir: no cluster recorded in {data_dir}", file=sys.stderr)
        return 1
    LocalCluster(data_dir).stop(timeout_s=args.timeout)
    print("Stopped.")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from weir.cli.zkview import filter_snapshot, snapshot_json

    snap, processes = _status_snapshot(args)
    filtering = args.under_replicated_partitions or args.unavailable_partitions
    shown = filter_snapshot(snap, args.include_internal, args.under_replicated_partitions,
                            args.unavailable_partitions)
    if args.json:
        import json

        print(json.dumps(snapshot_json(shown, processes), indent=2))
    elif filtering:  # kafka-topics.sh --describe --under-replicated-partitions: rows only
        print(render_snapshot(shown, processes).split("\n\n", 2)[-1]
              if shown.partitions else "No partitions match.")
    else:
        print(render_snapshot(shown, processes))
    return 0


def _status_snapshot(args: argparse.Namespace) -> tuple[Any, dict[int, int | None] | None]:
    """The cluster's snapshot and, for a local cluster, its broker pids."""
    if args.bootstrap_server:
        from confluent_kafka import KafkaException

        from weir.cli.admin import admin_client, kafka_error_text
        from weir.cli.zkview import snapshot_from_metadata

        args.data_dir = args.data_dir or DEFAULT_DATA_DIR
        try:
            md = admin_client(args).list_topics(timeout=args.timeout)
        except KafkaException as exc:
            raise CliError(f"reading the cluster metadata: {kafka_error_text(exc)}") from None
        return snapshot_from_metadata(md), None
    from weir.cli import procs
    from weir.cli.cluster import LocalCluster, read_cluster_file

    processes = None
    connect = args.zookeeper
    if connect is None:
        data_dir = Path(args.data_dir or DEFAULT_DATA_DIR)
        state = read_cluster_file(data_dir)
        if state is None:
            raise CliError(f"no cluster recorded in {data_dir}; use --zookeeper or "
                           "--bootstrap-server", name="INVALID_ARGUMENT")
        if not procs.pid_alive(int(state.get("zookeeper_pid") or 0)):
            raise CliError(f"the cluster in {data_dir} is not running (ZooKeeper is down)",
                           name="NETWORK_EXCEPTION")
        cluster = LocalCluster(data_dir)
        connect = state["zookeeper"]
        processes = {i: cluster.broker_pid(i) for i in cluster.broker_ids}
    try:
        zk = open_zk(connect, timeout_s=args.timeout)
    except Exception as exc:  # noqa: BLE001 - report any connection failure plainly
        raise CliError(f"cannot reach ZooKeeper at {connect}: NETWORK_EXCEPTION: {exc}"
                       ) from None
    try:
        return collect_snapshot(zk), processes
    finally:
        close_zk(zk)


def cmd_broker_start(args: argparse.Namespace) -> int:
    from weir.cli.broker_start import start_broker

    return start_broker(args.config)


def cmd_broker_stop(args: argparse.Namespace) -> int:
    from weir.cli import procs
    from weir.cli.cluster import LocalCluster

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


def _admin(module: str, function: str) -> Callable[[argparse.Namespace], int]:
    """A protocol command: ``module.function`` run through ``weir.cli.admin.run``."""
    def run(args: argparse.Namespace) -> int:
        from weir.cli import admin

        return admin.run(args, _load(f"{module}:{function}"))
    return run


def _admin_command(args: argparse.Namespace) -> int:
    from weir.cli import admin

    return admin.run(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "up": cmd_up, "down": cmd_down, "status": cmd_status,
    "reassign": lambda args: _load("weir.cli.reassign:cmd_reassign")(args),
    "verify": lambda args: _load("weir.verify.cli:cmd_verify")(args),
    "audit": lambda args: _load("weir.audit.cli:cmd_audit")(args),
    "console": lambda args: _load("weir.console.cli:cmd_console")(args),
    "topic": _admin_command, "group": _admin_command, "config": _admin_command,
    "elect": _admin("weir.cli.elect", "cmd_elect"),
    "produce": _admin("weir.cli.produce", "cmd_produce"),
    "consume": _admin("weir.cli.consume", "cmd_consume"),
    "user": _admin("weir.cli.users", "cmd_user"),
    "acl": _admin("weir.cli.acls", "cmd_acl"),
    "log-dirs": _admin("weir.cli.log_dirs", "cmd_log_dirs")}


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is one), or None."""
    for word in argv:
        if word in SUBCOMMANDS:
            return word
        if not word.startswith("-"):
            return None
    return None


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that carry a message for the user, from the modules loaded so far."""
    found: list[type[BaseException]] = [CliError]
    for module, name in (("weir.cli.cluster", "ClusterError"),
                         ("weir.cli.reassign", "ReassignError"),
                         ("weir.config", "ConfigError")):
        loaded = sys.modules.get(module)
        if loaded is not None and hasattr(loaded, name):
            found.append(getattr(loaded, name))
    return tuple(found)


def _named(exc: BaseException) -> BaseException:
    """A user-facing error as a CliError with a name (see weir/cli/errors.py)."""
    if isinstance(exc, CliError):
        return exc
    name = {"ConfigError": "INVALID_CONFIG", "ClusterError": "CLUSTER_ERROR"}.get(
        type(exc).__name__)
    error = CliError(str(exc))
    from weir.cli.errors import error_name

    if error_name(error) == "INVALID_ARGUMENT" and name:
        error.name = name
    return error


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
        # kio registers Hypothesis strategies whenever Hypothesis can be imported (a test
        # dependency): a tenth of a second of imports no command uses.  A fresh process
        # declines them, as a broker does (weir/cli/broker_start.py).
        if "hypothesis" not in sys.modules:
            sys.modules["hypothesis"] = None  # type: ignore[assignment]
    argv = list(argv)
    as_json = "--json" in argv
    command = " ".join(["weir", *(w for w in argv if w in SUBCOMMANDS)][:2])
    try:
        args = build_parser(_chosen(argv)).parse_args(argv)
        if args.command == "broker":
            handler = cmd_broker_start if args.broker_command == "start" else cmd_broker_stop
        else:
            handler = COMMANDS[args.command]
            logging.getLogger("kazoo").setLevel(logging.ERROR)  # no reconnect chatter
        command = command_of(args)
        code = handler(args)
        sys.stdout.flush()  # a closed pipe shows here rather than at exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `weir ... | head`: the reader has what it wanted
        return silence_broken_pipe()
    except SystemExit:  # --help, usage errors: argparse ignores a failed write, not a flush
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            return silence_broken_pipe()
        raise
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback (errors.py)
        if isinstance(exc, _user_errors()):
            exc = _named(exc)
        return report(exc, as_json=as_json, command=command)


if __name__ == "__main__":
    sys.exit(main())

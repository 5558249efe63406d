"""The ``weir`` command: ``up``, ``down``, ``status``, ``broker start|stop``, ``verify`` and the
Kafka-protocol admin commands ``topic``, ``group`` and ``config`` (``weir/cli/admin.py``)."""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from weir.cli import DEFAULT_DATA_DIR, bootstrap_servers
from weir.cli.errors import EXIT_USAGE, CliError, command_of, report, silence_broken_pipe

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
    "console": ("serve the web console (read-only unless --allow-actions)", "weir.console.cli:add_parser"),
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
    "table": ("describe and list the topics' Iceberg tables",
              "weir.cli.table:add_parser"),
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
                    help="also serve the web console (docs/console.md), supervised: a later "
                         "weir up restarts it on the same port")
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
                       type=bootstrap_servers,
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


def cmd_broker_start(args: argparse.Namespace) -> int:
    from weir.cli.broker_start import start_broker

    return start_broker(args.config)


def cmd_broker_stop(args: argparse.Namespace) -> int:
    from weir.ops import procs
    from weir.ops.cluster import LocalCluster

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
    "up": lambda args: _load("weir.cli.up:cmd_up")(args),
    "down": lambda args: _load("weir.cli.up:cmd_down")(args),
    "status": lambda args: _load("weir.cli.up:cmd_status")(args),
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
    "log-dirs": _admin("weir.cli.log_dirs", "cmd_log_dirs"),
    "table": _admin("weir.cli.table", "cmd_table")}


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
    for module, name in (("weir.ops.cluster", "ClusterError"),
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

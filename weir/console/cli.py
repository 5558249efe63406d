"""The ``weir console`` subcommand (see docs/console.md)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

DEFAULT_DATA_DIR = "./weir-data"
DEFAULT_PORT = 8080


def _endpoint(text: str) -> tuple[int, str]:
    from weir.console.collect import parse_endpoint

    try:
        return parse_endpoint(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("console", help="serve the web console (read-only unless --allow-actions)",
                       description="A web console: brokers, controller, topics and "
                       "partitions (under-replicated and offline ones highlighted), consumer "
                       "groups with lag, the controller's recent state changes and live "
                       "charts from the brokers' metrics endpoints (docs/console.md).")
    p.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT[,...]",
                   help="brokers to talk to (default: the cluster in --data-dir)")
    p.add_argument("--zookeeper", default=None, metavar="CONNECT",
                   help="ZooKeeper connect string with chroot, for the controller's epoch "
                        "(default: the cluster in --data-dir, if any)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                   help="a `weir up` directory: bootstrap, ZooKeeper and each broker's "
                        f"metrics.http.port (default {DEFAULT_DATA_DIR})")
    p.add_argument("--metrics", dest="metrics", type=_endpoint, action="append", default=[],
                   metavar="ID=URL", help="broker ID's metrics endpoint, e.g. "
                   "1=http://10.0.0.1:9404 (repeatable)")
    p.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="every broker serves metrics on PORT of its advertised host")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port to serve on (default {DEFAULT_PORT}; 0: any free port)")
    p.add_argument("--interval", type=float, default=2.0,
                   help="seconds between refreshes (default 2)")
    p.add_argument("--allow-actions", action="store_true",
                   help="enable the actions: preferred leader election, reassignment, topic "
                        "create/delete/config change, group offset reset")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="client properties for a secured cluster (TLS, SASL); default: the "
                        "client.properties of a `weir up --secure` cluster in --data-dir")
    p.add_argument("--password-file", default=None, metavar="FILE",
                   help="logins for the actions when listening beyond loopback: "
                        "user=password lines (a bare line is user admin's password); "
                        "default: the cluster's SCRAM users")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds a request to a broker may take (default 5)")


def endpoint_resolver(args: argparse.Namespace) -> Any:
    """``brokers → {id: metrics base URL}``: explicit ``--metrics`` first, then the local
    cluster's server.properties, then ``--metrics-port`` on each broker's host."""
    from weir.console.collect import endpoints_from_data_dir

    explicit = dict(args.metrics)
    data_dir = Path(args.data_dir)

    def resolve(brokers: list[dict[str, Any]]) -> dict[int, str]:
        found: dict[int, str] = {}
        if (data_dir / "cluster.json").exists():
            found.update(endpoints_from_data_dir(data_dir))
        if args.metrics_port:
            for b in brokers:
                found.setdefault(b["id"], f"http://{b['host']}:{args.metrics_port}")
        found.update(explicit)
        return found

    return resolve


def client_properties(args: argparse.Namespace) -> dict[str, str]:
    """``--command-config``, else the ``client.properties`` of a secure local cluster in
    ``--data-dir`` (only when its brokers are the ones talked to)."""
    from weir.config import read_properties

    path = args.command_config
    if path is None and not args.bootstrap_server:
        found = Path(args.data_dir) / "client.properties"
        path = found if found.exists() else None
    return dict(read_properties(path)) if path is not None else {}


def cmd_console(args: argparse.Namespace) -> int:
    from weir.console.actions import Auth, is_loopback, read_password_file
    from weir.console.admin import ConsoleAdmin, security_from_properties
    from weir.console.server import ConsoleState, serve
    from weir.ops.cluster import read_cluster_file

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.bootstrap_server is not None and not args.bootstrap_server.strip(" ,"):
        print("weir console: error: argument --bootstrap-server: expected HOST:PORT[,HOST:PORT"
              "...], got an empty value", file=sys.stderr)  # not the --data-dir cluster
        return 2
    state_file = read_cluster_file(Path(args.data_dir)) or {}
    bootstrap = args.bootstrap_server or state_file.get("bootstrap")
    if not bootstrap:
        print(f"weir: no cluster recorded in {Path(args.data_dir).resolve()}; use --bootstrap-server",
              file=sys.stderr)
        return 1
    try:
        security = security_from_properties(client_properties(args))
        passwords = read_password_file(args.password_file) if args.password_file else None
        admin = ConsoleAdmin(bootstrap, security, timeout_s=args.timeout)
    except (OSError, ValueError) as exc:
        print(f"weir: {exc}", file=sys.stderr)
        return 1
    auth = Auth(required=not is_loopback(args.host), passwords=passwords, admin=admin)
    if args.allow_actions and auth.required and auth.method is None:
        print(f"weir: the console listens on {args.host} (beyond loopback) with actions: "
              "give --password-file, or use a SCRAM cluster's users", file=sys.stderr)
        return 1
    connect = args.zookeeper or (state_file.get("zookeeper") if not args.bootstrap_server
                                 else None)
    zk = None
    if connect:
        from weir.ops.zkview import open_zk

        try:
            zk = open_zk(connect, timeout_s=10)
        except Exception as exc:  # noqa: BLE001 - the console works without ZooKeeper
            print(f"weir: ZooKeeper at {connect} unreachable ({exc}); going on without it",
                  file=sys.stderr)
    state = ConsoleState(admin, endpoint_resolver(args), zk,
                         allow_actions=args.allow_actions, auth=auth)

    def ready(port: int) -> None:
        mode = "actions enabled" if args.allow_actions else "read-only"
        if args.allow_actions and auth.required:
            mode += f", login: {auth.method}"
        print(f"Weir console on http://{args.host}:{port}/ ({mode}; Ctrl-C stops it)",
              flush=True)

    try:
        asyncio.run(serve(state, args.host, args.port, args.interval, ready))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"weir: cannot serve the console on {args.host}:{args.port}: {exc}",
              file=sys.stderr)
        return 1
    finally:
        if zk is not None:
            from weir.ops.zkview import close_zk

            close_zk(zk)
    return 0

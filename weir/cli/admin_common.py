"""What every protocol command of ``weir`` shares: ``--bootstrap-server`` / ``--data-dir`` /
``--json`` / ``--timeout`` / ``--command-config``, the cluster to talk to and its client settings,
confluent-kafka's AdminClient, waiting on its futures, tables and JSON output.

The command modules (``admin.py``, ``admin_configs.py``, ``admin_groups.py``, ``acls.py``, ...)
import this module and never one another's helpers, so no two of them import each other."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from weir.cli import DEFAULT_DATA_DIR, bootstrap_servers, no_cluster_in
from weir.cli.errors import CliError, kafka_error_text, kafka_name

__all__ = ["AdminCliError", "kafka_error_text", "kafka_name"]

DEFAULT_TIMEOUT_S = 10.0


class AdminCliError(CliError):
    """A failure reported to the user as ``weir: <message>`` (exit code 1; weir/cli/errors.py)."""


# -- parser -------------------------------------------------------------------------------------


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def positive_seconds(text: str) -> float:
    """argparse type of ``--timeout``: a number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 < value < float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected seconds above 0, got {text!r}")
    return value


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT[,...]",
                   type=bootstrap_servers,
                   help="brokers to talk to (default: the cluster in --data-dir)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                   help=f"local cluster whose cluster.json names the brokers "
                        f"(default {DEFAULT_DATA_DIR})")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S,
                   help="seconds to wait for the cluster, per request "
                        f"(default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="client settings in Kafka's client.properties format (security.protocol,"
                        " sasl.*, ssl.*); default: DIR/client.properties of weir up --secure")
    return p


# -- connection and output ----------------------------------------------------------------------


def bootstrap_of(args: argparse.Namespace) -> str:
    """``--bootstrap-server``, else the bootstrap of the cluster recorded in ``--data-dir``."""
    if args.bootstrap_server:
        return str(args.bootstrap_server)
    from weir.ops.cluster import read_cluster_file

    state = read_cluster_file(Path(args.data_dir))
    if not state or not state.get("bootstrap"):
        raise AdminCliError(no_cluster_in(args.data_dir))
    return str(state["bootstrap"])


def reachable_bootstrap(args: argparse.Namespace) -> str:
    """:func:`bootstrap_of`, checked by :func:`check_reachable`."""
    return check_reachable(bootstrap_of(args), args.timeout)


def check_reachable(bootstrap: str, timeout_s: float) -> str:
    """``bootstrap`` unchanged, after a TCP connect to its addresses: if none accepts one
    within ``timeout_s`` in all (a refused port, an unknown host, no answer), the command
    fails now with NETWORK_EXCEPTION instead of librdkafka retrying until ``--timeout`` and
    beyond. The first address that accepts ends the check (one round trip on loopback)."""
    import socket
    import time

    addresses = []
    for address in (a.strip() for a in bootstrap.split(",")):
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise AdminCliError(f"--bootstrap-server: expected HOST:PORT[,HOST:PORT...], "
                                f"got {bootstrap!r}", name="INVALID_ARGUMENT")
        addresses.append((address, host.strip("[]") or "localhost", int(port)))
    deadline = time.monotonic() + timeout_s
    failures = []
    for address, host, port in addresses:
        left = deadline - time.monotonic()
        if left <= 0:
            failures.append(f"{address}: not tried within {timeout_s:g}s")
            continue
        try:
            with socket.create_connection((host, port), timeout=left):
                return bootstrap
        except TimeoutError:
            failures.append(f"{address}: no answer within {timeout_s:g}s")
        except OSError as exc:
            failures.append(f"{address}: {exc.strerror or exc}")
    raise AdminCliError(f"cannot reach the cluster at {bootstrap}: NETWORK_EXCEPTION: "
                        f"{'; '.join(failures)}", name="NETWORK_EXCEPTION")


def admin_client(args: argparse.Namespace) -> Any:
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError as exc:  # pragma: no cover - a runtime dependency
        raise AdminCliError(f"confluent-kafka is needed for this command: {exc}") from exc
    errors: list[Any] = []
    settings = client_settings(args)
    admin = AdminClient({"bootstrap.servers": reachable_bootstrap(args), "log_level": 2,
                         "socket.timeout.ms": int(args.timeout * 1000),
                         "error_cb": errors.append, **settings})
    first_session(admin, errors, args.timeout, secured=bool(settings))
    return admin


AUTH_ERRORS = ("_AUTHENTICATION", "_SSL")


def first_session(client: Any, errors: list[Any], timeout_s: float, *, secured: bool) -> None:
    """One Metadata request before the command's own, in short tries: a TLS or SASL failure
    is known to librdkafka within milliseconds, but reaches no request (they wait until
    their timeout, then say "Broker transport failure" or "Timed out", and a ListGroups
    answers an empty list). The failure is only handed to ``error_cb``, served by
    ``poll``: polled after each try, it fails the command at once with its Kafka name
    (SASL_AUTHENTICATION_FAILED, SSL_AUTHENTICATION_FAILED) and librdkafka's reason."""
    import time

    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            client.list_topics(timeout=max(0.05, min(0.5, left)))
            return
        except KafkaException as exc:
            client.poll(0)
            auth = [e for e in errors if e.name() in AUTH_ERRORS]
            if auth:
                raise AdminCliError(f"{kafka_name(auth[-1])}: {auth[-1].str()}",
                                    name=kafka_name(auth[-1])) from None
            if left <= 0.5:
                hint = "" if secured else (
                    " (the brokers accept connections but no Kafka session came up: a TLS "
                    "or SASL listener needs --command-config with its security.protocol)")
                raise AdminCliError(f"cannot reach the cluster: {kafka_error_text(exc)}{hint}",
                                    name="NETWORK_EXCEPTION") from None


def client_settings(args: argparse.Namespace) -> dict[str, str]:
    """Security settings for the clients: ``--command-config``, else the
    ``client.properties`` a ``weir up --secure`` cluster in ``--data-dir`` wrote (only when
    its brokers are the ones talked to)."""
    path = getattr(args, "command_config", None)
    if path is None and not args.bootstrap_server:
        found = Path(args.data_dir) / "client.properties"
        path = found if found.exists() else None
    if path is None:
        return {}
    from weir.ops.secure import librdkafka_settings  # certificates: a quarter second of imports

    try:
        settings = librdkafka_settings(path)
    except OSError as exc:
        raise AdminCliError(f"cannot read --command-config {path}: {exc}") from exc
    settings.pop("bootstrap.servers", None)
    return settings


def wait(future: Any, args: argparse.Namespace, what: str) -> Any:
    """A future's result; a Kafka error becomes AdminCliError naming ``what``."""
    from confluent_kafka import KafkaException

    try:
        return future.result(timeout=args.timeout + 5)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        name = kafka_name(err) if hasattr(err, "name") else type(err).__name__
        text = err.str() if hasattr(err, "str") else str(err)
        raise AdminCliError(f"{what}: {name}: {text}", name=name) from None
    except TimeoutError:
        raise AdminCliError(f"{what}: no answer within {args.timeout:g}s",
                            name="REQUEST_TIMED_OUT") from None


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in cells)


def emit(args: argparse.Namespace, doc: Any, text: Callable[[], str]) -> int:
    print(json.dumps(doc, indent=2, sort_keys=False) if args.json else text())
    return 0


def _metadata(args: argparse.Namespace, admin: Any, topic: str | None = None) -> Any:
    from confluent_kafka import KafkaException

    try:
        return admin.list_topics(topic=topic, timeout=args.timeout)
    except KafkaException as exc:
        raise AdminCliError(f"listing topics: {kafka_error_text(exc)}") from None

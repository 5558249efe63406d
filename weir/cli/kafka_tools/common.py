"""What the kafka-*.sh tools share: joptsimple-like option parsing with one action verb,
the admin client from ``--bootstrap-server`` and ``--command-config``, and Kafka's way of
ending: exit 0, or exit 1 with one line naming the error (never a traceback)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from weir.cli import bootstrap_servers
from weir.cli.errors import CliError, error_message, silence_broken_pipe

DEFAULT_TIMEOUT_S = 10.0


class ToolError(CliError):
    """A failure of a kafka-*.sh tool: ``<prefix><NAME>: <message>``, exit code 1."""


class ToolParser(argparse.ArgumentParser):
    """Kafka's tools print the problem and exit 1 on bad options (CommandLineUtils)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: INVALID_ARGUMENT: {message} (see {self.prog} --help)",
              file=sys.stderr)
        sys.exit(1)


def parser(prog: str, description: str) -> ToolParser:
    from weir.cli.main import DefaultsFormatter  # every option shows its default

    p = ToolParser(prog=prog, description=description, allow_abbrev=False,
                   formatter_class=DefaultsFormatter)
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]",
                   type=bootstrap_servers,
                   help="REQUIRED: the brokers to connect to")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="a client.properties file: security.protocol, sasl.*, ssl.*")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="Weir: seconds to wait for the cluster, per request")
    return p


def one_action(p: argparse.ArgumentParser, args: argparse.Namespace,
               actions: Sequence[str]) -> str:
    """The one action flag given (Kafka: "Command must include exactly one action")."""
    given = [a for a in actions if getattr(args, a.replace("-", "_"), False)]
    if len(given) != 1:
        p.error("Command must include exactly one action: "
                + ", ".join(f"--{a}" for a in actions))
    return given[0]


def admin_args(args: argparse.Namespace) -> argparse.Namespace:
    """The namespace :mod:`weir.cli.admin` expects."""
    return argparse.Namespace(bootstrap_server=args.bootstrap_server, data_dir=".",
                              command_config=args.command_config, timeout=args.timeout,
                              json=False)


def admin(args: argparse.Namespace) -> Any:
    from weir.cli.admin_common import admin_client

    return admin_client(admin_args(args))


def wait(future: Any, args: argparse.Namespace, what: str) -> Any:
    from weir.cli.admin_common import wait as admin_wait

    return admin_wait(future, admin_args(args), what)


def run(prog: str, prefix: str, body: Callable[[Sequence[str]], int],
        argv: Sequence[str] | None = None) -> int:
    """Run a tool: its exit code, every failure as one line on stderr (``prefix`` is
    Kafka's, e.g. "Error while executing topic command : ")."""
    if argv is None:
        argv = sys.argv[1:]
        if "hypothesis" not in sys.modules:  # see weir/cli/main.py: faster start-up
            sys.modules["hypothesis"] = None  # type: ignore[assignment]
    try:
        code = body(list(argv))
        sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return silence_broken_pipe()
    except SystemExit:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            return silence_broken_pipe()
        raise
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        try:
            print(f"{prefix}{error_message(exc)}", file=sys.stderr, flush=True)
        except OSError:
            pass
        return 1


def key_values(texts: Sequence[str], option: str, split: bool = True
               ) -> list[tuple[str, str]]:
    """``k=v`` pairs of repeated options, each also a comma-separated list with ``split``
    (ConfigCommand's --add-config, where ``[a,b]`` keeps commas inside a value)."""
    pairs = []
    for text in texts:
        for item in (_split_top_level(text) if split else [text]):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ToolError(f"{option}: expected key=value, got {item!r}",
                                name="INVALID_ARGUMENT")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            pairs.append((key.strip(), value))
    return pairs


def _split_top_level(text: str) -> list[str]:
    out, depth, current = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            out.append("".join(current))
            current = []
        else:
            current.append(ch)
    out.append("".join(current))
    return [item for item in (s.strip() for s in out) if item]

"""How the ``weir`` command and the kafka-*.sh scripts report failures.

Every failure is one line on stderr and a non-zero exit code, never a traceback:

    weir: <what was being done>: <ERROR_NAME>: <message>

``ERROR_NAME`` is Kafka's name for the error (``org.apache.kafka.common.protocol.Errors``:
``UNKNOWN_TOPIC_OR_PARTITION``, ``INVALID_TOPIC_EXCEPTION`` ...), also where librdkafka
(confluent-kafka) spells it its own way (``UNKNOWN_TOPIC_OR_PART``, ``TOPIC_EXCEPTION``) or
reports a local error (``_UNKNOWN_PARTITION``, ``_TRANSPORT``).  Failures found before any
request are ``INVALID_ARGUMENT`` (bad options or values), ``INVALID_CONFIG`` (bad client
settings) or ``IO_ERROR`` (a file); a refused connection is ``NETWORK_EXCEPTION``, a
local cluster that does not start ``CLUSTER_ERROR``; a bug is ``INTERNAL_ERROR`` (``WEIR_DEBUG=1`` shows the
traceback).  With ``--json`` the line is a JSON object:
``{"error": NAME, "message": ..., "command": ...}``.

This module imports nothing heavy: it runs in every command, also on ``weir --help``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from typing import Any

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `cmd | head`

# librdkafka's own spellings of broker error codes, and its local (negative) errors, as the
# Java client names them (Errors.java, or the exception a Java client throws).
_LIBRDKAFKA_NAMES = {
    "UNKNOWN": "UNKNOWN_SERVER_ERROR",
    "INVALID_MSG": "CORRUPT_MESSAGE",
    "UNKNOWN_TOPIC_OR_PART": "UNKNOWN_TOPIC_OR_PARTITION",
    "INVALID_MSG_SIZE": "INVALID_FETCH_SIZE",
    "NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER",
    "MSG_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "STALE_CTRL_EPOCH": "STALE_CONTROLLER_EPOCH",
    "TOPIC_EXCEPTION": "INVALID_TOPIC_EXCEPTION",
    "_UNKNOWN_PARTITION": "UNKNOWN_TOPIC_OR_PARTITION",
    "_UNKNOWN_TOPIC": "UNKNOWN_TOPIC_OR_PARTITION",
    "_TIMED_OUT": "REQUEST_TIMED_OUT",
    "_MSG_TIMED_OUT": "REQUEST_TIMED_OUT",
    "_TIMED_OUT_QUEUE": "REQUEST_TIMED_OUT",
    "_TRANSPORT": "NETWORK_EXCEPTION",
    "_ALL_BROKERS_DOWN": "NETWORK_EXCEPTION",
    "_RESOLVE": "NETWORK_EXCEPTION",
    "_AUTHENTICATION": "SASL_AUTHENTICATION_FAILED",
    "_SSL": "SSL_AUTHENTICATION_FAILED",
    "_INVALID_ARG": "INVALID_CONFIG",
    "_UNKNOWN_GROUP": "GROUP_ID_NOT_FOUND",
    "_UNSUPPORTED_FEATURE": "UNSUPPORTED_VERSION",
    "_NOT_IMPLEMENTED": "UNSUPPORTED_VERSION",
    "_ISR_INSUFF": "NOT_ENOUGH_REPLICAS",
    "_BAD_MSG": "CORRUPT_MESSAGE",
    "_BAD_COMPRESSION": "UNSUPPORTED_COMPRESSION_TYPE",
    "_FENCED": "PRODUCER_FENCED",
    "_QUEUE_FULL": "BUFFER_EXHAUSTED",
    "_AUTO_OFFSET_RESET": "OFFSET_OUT_OF_RANGE",
    "_NO_OFFSET": "NO_OFFSET_FOR_PARTITION",
    "_LOG_TRUNCATION": "LOG_TRUNCATION",
}
# Names given by the CLI itself, beside Kafka's.
LOCAL_NAMES = ("INVALID_ARGUMENT", "INVALID_CONFIG", "IO_ERROR", "INTERNAL_ERROR",
               "NETWORK_EXCEPTION", "REQUEST_TIMED_OUT", "SSL_AUTHENTICATION_FAILED",
               "BUFFER_EXHAUSTED", "NO_OFFSET_FOR_PARTITION", "LOG_TRUNCATION")


class CliError(Exception):
    """A failure reported as one line: ``what: NAME: message`` (exit code 1).

    ``name`` is the Kafka error name; without one the message is searched for a Kafka error
    name (messages built from a broker's answer carry it), else it is ``INVALID_ARGUMENT``.
    """

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


def kafka_name(err: Any) -> str:
    """Kafka's name of a confluent-kafka ``KafkaError`` (or of a librdkafka error name).

    librdkafka names broker error codes as Kafka does except for the few in the table above;
    its local errors start with ``_`` and are mapped to what a Java client reports."""
    raw = err if isinstance(err, str) else err.name()
    return _LIBRDKAFKA_NAMES.get(raw) or raw.lstrip("_") or "UNKNOWN_SERVER_ERROR"


def kafka_error_text(exc: BaseException) -> str:
    """``NAME: message`` of a confluent-kafka KafkaException (Kafka's name for the error)."""
    err = exc.args[0] if exc.args else exc
    if hasattr(err, "name") and hasattr(err, "str"):
        return f"{kafka_name(err)}: {err.str()}"
    return str(err)


# "what: NAME: message": the Kafka error name a message built from an answer carries
_NAME_IN_TEXT = re.compile(r"(?:^|: )([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?=:|$)")


def error_name(exc: BaseException) -> str:
    """The name a failure is reported under (see the module docstring)."""
    name = getattr(exc, "name", None)
    if isinstance(name, str) and name:
        return name
    if isinstance(exc, CliError):
        found = _NAME_IN_TEXT.search(str(exc))
        return found.group(1) if found else "INVALID_ARGUMENT"
    if isinstance(exc, TimeoutError):
        return "REQUEST_TIMED_OUT"
    if isinstance(exc, ConnectionError):
        return "NETWORK_EXCEPTION"
    if isinstance(exc, OSError):
        return "IO_ERROR"
    return "INTERNAL_ERROR"


def error_message(exc: BaseException) -> str:
    """The one-line message of a failure, with its name in it."""
    name = error_name(exc)
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, CliError):
        return text if _NAME_IN_TEXT.search(text) else f"{name}: {text}"
    if name == "INTERNAL_ERROR":
        return f"{name}: {type(exc).__name__}: {text} (WEIR_DEBUG=1 shows the traceback)"
    return f"{name}: {text}"


def command_of(args: Any, prog: str = "weir") -> str:
    """``weir topic list``: the program, the command and its action from parsed arguments."""
    words = [prog, str(getattr(args, "command", "") or "")]
    words += [str(v) for k, v in sorted(vars(args).items())
              if k.endswith("_command") and isinstance(v, str)][:1]
    return " ".join(w for w in words if w)


def report(exc: BaseException, prog: str = "weir", as_json: bool = False,
           command: str | None = None) -> int:
    """Print ``exc`` as one line on stderr (a JSON object with ``as_json``); the exit code."""
    if os.environ.get("WEIR_DEBUG"):
        import traceback

        traceback.print_exception(exc)
    name = error_name(exc)
    if as_json:
        doc = {"error": name, "message": error_message(exc)}
        if command:
            doc["command"] = command
        line = json.dumps(doc)
    else:
        line = f"{prog}: {error_message(exc)}"
    try:
        print(line, file=sys.stderr, flush=True)
    except (BrokenPipeError, OSError):  # stderr gone too: the exit code still tells
        pass
    return EXIT_ERROR


def silence_broken_pipe() -> int:
    """After stdout's reader went away (``cmd | head``): no flush error at exit, and the exit
    code a shell gives a process ended by SIGPIPE."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (tests)
        pass
    return EXIT_BROKEN_PIPE


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a supervisor stopping the command) ends the block as Ctrl-C does,
    so the console producer and consumer close their client (flush, commit, leave the group)
    and print their count, as Kafka's console tools do in their shutdown hook."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (tests): left as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

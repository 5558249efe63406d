"""Signal handling of the broker process: SIGTERM and SIGINT stop it cleanly (Kafka's
KafkaServerStartable shutdown hook), SIGUSR1 logs the stack of every asyncio task (to
diagnose a stuck broker)."""

from __future__ import annotations

import asyncio
import io
import logging
import signal
from collections.abc import Callable

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def install(loop: asyncio.AbstractEventLoop, request_stop: Callable[[], None]) -> None:
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, request_stop)
    loop.add_signal_handler(signal.SIGUSR1, dump_tasks)


def dump_tasks() -> None:
    """SIGUSR1: log the stack of every asyncio task."""
    for task in asyncio.all_tasks():
        out = io.StringIO()
        task.print_stack(file=out)
        log.warning("task %s:\n%s", task.get_name(), out.getvalue())

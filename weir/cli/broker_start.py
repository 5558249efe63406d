"""``weir broker start --config FILE``: run one broker in the foreground.

The broker process starts through here without importing the rest of the command line
(the admin, reassign, verify, audit and console commands and their dependencies): every
module imported before the broker registers in ZooKeeper is start-up time, which on a
loaded machine is seconds (Kafka's ``kafka-server-start.sh`` likewise loads only the
server's classes).  ``python -m weir broker start --config FILE`` (the command line that
:mod:`weir.ops.procs` and the local clusters use) comes here directly from
``weir/__main__.py``; the ``weir`` console script reaches the same function through
:mod:`weir.cli.main`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

EXIT_CONFIG = 2
"""Exit status of a broker whose configuration is invalid."""


def fast_path_config(argv: Sequence[str]) -> str | None:
    """The ``--config`` value when ``argv`` (without the program name) is exactly
    ``broker start --config FILE`` (or ``--config=FILE``), else None (the full parser
    handles it, with its help and errors)."""
    if len(argv) < 3 or argv[0] != "broker" or argv[1] != "start":
        return None
    rest = list(argv[2:])
    if len(rest) == 1 and rest[0].startswith("--config=") and len(rest[0]) > len("--config="):
        return rest[0][len("--config="):]
    if len(rest) == 2 and rest[0] == "--config" and not rest[1].startswith("-"):
        return rest[1]
    return None


def start_broker(config_path: str) -> int:
    """Load and check ``config_path``, then run the broker until it stops (exit status)."""
    logging.basicConfig(
        level=os.environ.get("WEIR_LOG_LEVEL", "INFO").upper(),
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    # kio registers Hypothesis strategies for its primitive types whenever Hypothesis can be
    # imported (a test dependency, present in development environments): a quarter of a
    # second of imports that a broker never uses.  A fresh broker process declines it.
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]
    from weir.config import BrokerConfig, ConfigError
    from weir.server.listeners import check_security

    try:
        cfg = BrokerConfig.from_file(config_path)
        check_security(cfg)  # key and trust stores readable, SASL settings complete
    except ConfigError as exc:
        print(f"weir: invalid configuration in {config_path}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    from weir.server.broker import run_broker

    return int(run_broker(cfg) or 0)

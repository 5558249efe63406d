"""Shared helpers for storage tests: open logs in a temp dir."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from weir.storage.log import Log, LogConfig


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


@pytest.fixture
def open_log(log_dir: Path) -> Callable[..., Log]:
    """open_log(clean=True, now_ms=0, recovery_point=0, **topic_config)."""
    opened: list[Log] = []

    def _open(*, clean: bool = True, now_ms: int = 0, recovery_point: int = 0, **cfg) -> Log:
        config = LogConfig.from_dict({k.replace("_", "."): v for k, v in cfg.items()})
        log = Log.open(
            log_dir, config, clean_shutdown=clean, now_ms=now_ms, recovery_point=recovery_point
        )
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log.close()

"""Shared test helpers: deadline polling (no sleeps as synchronisation)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(fn: Callable[[], T], timeout_s: float = 30.0, interval_s: float = 0.1,
             what: str = "condition") -> T:
    """Call ``fn`` until it returns a truthy value; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_exc: BaseException | None = None
    while True:
        try:
            value = fn()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - reported below if the deadline passes
            last_exc = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}"
                                 + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval_s)

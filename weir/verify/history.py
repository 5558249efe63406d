"""The history: every operation's invocation and completion, as in Jepsen.

One JSON object per line::

    {"index": 7, "time": 1.234, "process": "producer", "type": "invoke", "f": "send",
     "id": 3, "value": {"partition": 1, "value": "v-3"}}

``type`` is ``invoke`` (the operation starts), ``ok`` (it completed and took effect),
``fail`` (it definitely did not take effect) or ``info`` (indeterminate: it may or may not
have taken effect, e.g. a produce request whose delivery timed out).  A completion carries
the ``id`` of its invocation.  ``time`` is seconds since the run started (monotonic clock).

Operations (``f``):

- ``send``: produce one unique value to a partition; ``ok`` carries the ``offset``.
- ``poll``: a consumer's fetch; ``ok`` carries ``records`` ``[[partition, offset, value]]``.
- ``assign``: a consumer starts reading ``partitions`` (``{p: start offset or null}``); a new
  consumer session for the monotonic-read checks (assign, or a group rebalance).
- ``commit``: a group member commits ``offsets`` (``{p: next offset}``).
- ``committed``: the group's committed offsets read at the end.
- ``final``: the final read after healing reached each partition's high watermark ``hw``.
- ``replicas``: digests of each replica's batches below the high watermark.
- nemesis ``start``/``stop`` (``info``): a fault window, ``{"fault", "target", "window"}``.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

Op = dict[str, Any]


class History:
    """Thread-safe, append-only history in memory, written out as JSON lines."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._t0 = time.monotonic()

    def now(self) -> float:
        return round(time.monotonic() - self._t0, 6)

    def next_id(self) -> int:
        return next(self._ids)

    def add(self, process: str, type_: str, f: str, value: Any = None,
            op_id: int | None = None) -> Op:
        op: Op = {"index": 0, "time": self.now(), "process": process, "type": type_, "f": f}
        if op_id is not None:
            op["id"] = op_id
        op["value"] = value
        with self._lock:
            op["index"] = len(self.ops)
            self.ops.append(op)
        return op

    def invoke(self, process: str, f: str, value: Any = None) -> int:
        """Record an invocation; returns the id its completion must carry."""
        op_id = self.next_id()
        self.add(process, "invoke", f, value, op_id)
        return op_id

    def complete(self, process: str, type_: str, f: str, op_id: int, value: Any = None) -> Op:
        return self.add(process, type_, f, value, op_id)

    def snapshot(self) -> list[Op]:
        with self._lock:
            return list(self.ops)

    def write(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(op, separators=(",", ":")) + "\n" for op in self.snapshot())
        return path


def read_history(path: str | os.PathLike[str]) -> list[Op]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def pair_ops(ops: Iterable[Op]) -> Iterator[tuple[Op, Op | None]]:
    """(invocation, completion or None) for every invocation, in invocation order."""
    invocations: dict[int, Op] = {}
    completions: dict[int, Op] = {}
    order: list[int] = []
    for op in ops:
        if "id" not in op:
            continue
        if op["type"] == "invoke":
            invocations[op["id"]] = op
            order.append(op["id"])
        else:
            completions[op["id"]] = op
    for op_id in order:
        yield invocations[op_id], completions.get(op_id)

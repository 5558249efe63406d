"""Draining many deferred leader-epoch checkpoints: per-file fsyncs vs. one batch.

    .venv/bin/python -m bench run deferred_writes                 # 3,333 and 10,000 jobs, 3 rounds
    .venv/bin/python -m bench run deferred_writes --sizes 1000 --rounds 1

Each size gets its own temp dir with one partition dir per job.  Every round marks each
epoch cache dirty (a deferred ``assign``) and times writing them all, in turn (the order
alternates between rounds), with:

* ``per-file``: each job's ``flush()`` (the old drain: temp file, fsync, rename, dir fsync);
* ``batch-sync``: :func:`weir.storage.deferred_writes.write_batch` through
  ``DeferredWriter.drain()`` (temp files, ``sync()``, renames, ``sync()``);
* ``batch-fsync``: the same phases with an fsync of every temp file and of every
  directory instead of the two ``sync()`` calls (the alternative for phase 2/4);
* ``batch-phases``: ``batch-sync``'s phases, each timed (reported in a second table).

Writes a markdown report to bench/results/deferred_writes.md (python -m bench run).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.harness import out_dir
from weir.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, fsync_dir, sync_filesystems
from weir.storage.deferred_writes import DeferredWriter
from weir.storage.epoch_cache import LeaderEpochCache

RESULTS = out_dir()


def per_file(caches: list[LeaderEpochCache]) -> None:
    for cache in caches:
        cache.flush(if_dir_exists=True)


def batch_sync(caches: list[LeaderEpochCache]) -> None:
    writer = DeferredWriter()
    writer._closed = True  # no worker thread: drain() writes the batch on this thread
    writer.submit(caches)
    assert writer.drain(timeout_s=600) and writer.failures == 0


def batch_fsync(caches: list[LeaderEpochCache]) -> None:
    prepared = [p for c in caches if (p := c.prepare(if_dir_exists=True)) is not None]
    for p in prepared:
        fd = os.open(p.tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for p in prepared:
        assert p.rename()
    for d in {p.target.parent for p in prepared}:
        fsync_dir(d)
    for p in prepared:
        p.durable()


PHASES: list[tuple[int, float, float, float, float]] = []


def batch_phases(caches: list[LeaderEpochCache]) -> None:
    """``batch-sync``'s four phases done here, each timed (where the time goes)."""
    t0 = time.perf_counter()
    prepared = [p for c in caches if (p := c.prepare(if_dir_exists=True)) is not None]
    dirs = {p.target.parent for p in prepared}
    t1 = time.perf_counter()
    sync_filesystems(dirs)
    t2 = time.perf_counter()
    for p in prepared:
        assert p.rename()
    t3 = time.perf_counter()
    sync_filesystems(dirs)
    t4 = time.perf_counter()
    for p in prepared:
        p.durable()
    PHASES.append((len(caches), t1 - t0, t2 - t1, t3 - t2, t4 - t3))


METHODS = {"per-file": per_file, "batch-sync": batch_sync, "batch-fsync": batch_fsync,
           "batch-phases": batch_phases}


def make(root: Path, n: int) -> list[LeaderEpochCache]:
    caches = []
    for i in range(n):
        d = root / f"topic-{i // 100}-{i % 100}"
        d.mkdir(parents=True)
        cache = LeaderEpochCache(d / LEADER_EPOCH_CHECKPOINT)
        cache.assign(0, 0, defer=True)
        caches.append(cache)
    batch_sync(caches)  # the files exist before the first timed round
    return caches


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=RESULTS.parent).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "weir/storage"],
                               capture_output=True, text=True, check=True,
                               cwd=RESULTS.parent).stdout.strip()
        return f"{head} (weir/storage modified, not committed)" if dirty else head
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="3333,10000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--methods", default=",".join(METHODS))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    methods = args.methods.split(",")
    rows: list[tuple[int, int, str, float, tuple[float, float, float]]] = []
    epoch = 0
    with tempfile.TemporaryDirectory(prefix="weir-deferred-bench-") as tmp:
        dirs = {n: make(Path(tmp) / str(n), n) for n in sizes}
        os.sync()
        for rnd in range(args.rounds):
            order = methods if rnd % 2 == 0 else list(reversed(methods))
            for n in sizes:
                caches = dirs[n]
                for method in order:
                    epoch += 1
                    for i, cache in enumerate(caches):
                        cache.assign(epoch, epoch * 10 + i, defer=True)
                    load = os.getloadavg()
                    t0 = time.perf_counter()
                    METHODS[method](caches)
                    took = time.perf_counter() - t0
                    assert not any(c.dirty for c in caches)
                    rows.append((rnd, n, method, took, load))
                    print(f"round {rnd} n={n} {method}: {took:.3f} s "
                          f"(load {load[0]:.2f})", flush=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"deferred_writes-{stamp}.md"
    lines = [
        "# Deferred checkpoint writes: per-file fsync vs. batched",
        "",
        f"- date: {stamp}; commit: {git_commit()}",
        (f"- machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, "
         f"Python {platform.python_version()}, temp dir: {tempfile.gettempdir()}"),
        f"- rounds: {args.rounds}, method order alternating each round, one process",
        "",
        "| round | jobs | method | seconds | load avg (1/5/15) at start |",
        "|---|---|---|---|---|",
    ]
    for rnd, n, method, took, load in rows:
        lines.append(f"| {rnd} | {n} | {method} | {took:.3f} | "
                     f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} |")
    lines += ["", "| jobs | method | best s | median s |", "|---|---|---|---|"]
    for n in sizes:
        for method in methods:
            ts = sorted(t for _, m_n, m, t, _ in rows if m_n == n and m == method)
            lines.append(f"| {n} | {method} | {ts[0]:.3f} | {ts[len(ts) // 2]:.3f} |")
    if PHASES:
        lines += ["", "batch-phases: seconds per phase", "",
                  "| jobs | 1 temp files | 2 sync | 3 renames | 4 sync |", "|---|---|---|---|---|"]
        lines += [f"| {n} | {a:.3f} | {b:.3f} | {c:.3f} | {d:.3f} |" for n, a, b, c, d in PHASES]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

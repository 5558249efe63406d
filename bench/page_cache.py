"""The same memory state before every measured throughput run.

On the virtual machines these benchmarks run on (2 cores, 24 GiB), a page the guest has not
touched lately costs the kernel far more to hand out than one it reuses. Writing 200 MB
files one after another and keeping them (`os.write` of 256 KiB blocks) cost 0.04 s of
system time per file until ~1.3 GB of page cache had piled up, then 0.50-0.53 s per file:
13x. After `sync` and `echo 1 > /proc/sys/vm/drop_caches`, or with each file deleted
before the next, it stayed at 0.03-0.05 s. A throughput run that writes 200 MB on each of
three replicas crosses that line within a few runs, and from then on every process pays
it: the brokers (their appends), but the producer too (socket buffers), so the later runs
of a benchmark ran slower than the first ones (replication runs in session 9: the brokers'
CPU for the same 60 MB rose 3-5x within one run, all of it system time).

``settle()`` before each run writes the dirty pages back and, where it may (root), drops
the clean page cache, so that no run inherits the previous runs' pages. Each benchmark
records whether it could.

    .venv/bin/python -m bench.page_cache [--files 12] [--mb 200]

measures it on the machine at hand: the system time of writing each file, kept, without
and then with ``settle()`` before each (its history: docs/perf-history.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def settle() -> bool:
    """``sync``, then drop the clean page cache if permitted; True if it was dropped."""
    os.sync()
    try:
        DROP_CACHES.write_text("1\n")
    except OSError:
        return False
    return True


def described(dropped: bool) -> str:
    """The sentence a result file gives ``settle()``: whether every run had it."""
    return ("Before each run dirty pages written back and the page cache "
            + ("dropped" if dropped else "NOT dropped (not permitted)")
            + " (bench/page_cache.py).")


def _write_kept(directory: Path, name: str, mb: int) -> float:
    """System seconds to write ``mb`` MB to a new file (kept) in 256 KiB writes."""
    block = b"x" * (256 * 1024)
    before = os.times().system
    fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(mb * 4):
            os.write(fd, block)
    finally:
        os.close(fd)
    return os.times().system - before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="page cache cost per file, kept")
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--mb", type=int, default=200)
    args = parser.parse_args(argv)
    for label, between in (("no settle", False), ("settle() before each", True)):
        dropped = settle()
        with tempfile.TemporaryDirectory(prefix="weir-page-cache-") as tmp:
            costs = []
            for i in range(args.files):
                if between:
                    dropped = settle() and dropped
                costs.append(_write_kept(Path(tmp), f"f{i}", args.mb))
        print(f"{label}: system s per {args.mb} MB file: "
              + " ".join(f"{c:.2f}" for c in costs) + f" (cache dropped: {dropped})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

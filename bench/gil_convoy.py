"""The GIL convoy: a broker's helper thread doing short system calls while the event loop
runs Python, at several ``sys.setswitchinterval`` values (weir.server.gil_tuning).

A broker's storage thread (``partition.metadata`` and checkpoint files), the worker that
creates a new topic's logs, and the ZooKeeper client's connection thread each make many
short system calls.  Each call releases the GIL; taking it back while another thread runs
Python waits until that thread drops it: at its next blocking call, or when the switch
interval has run out (CPython's forced switch).  So while the event loop is busy (a
LeaderAndIsr of thousands of partitions, a Metadata answer for every topic, a garbage
collection) the helper makes one system call per switch interval.

Measured in one process, each value in turn, interleaved rounds: a thread writing small
files (temp file, write, close, rename: a deferred checkpoint's steps) while the main
thread runs Python for the same wall time; reported: the files written per second, and the
main thread's Python work done per second (its slowdown is the price of the shorter
interval), each against the helper alone / the main thread alone; and the files per second
beside busy Python when each is written with ``open(path, "w")`` (seven system calls, as
``write_temp`` did before session 15).

    .venv/bin/python -m bench run gil_convoy [--seconds 2] [--rounds 3]

Results: bench/results/gil_convoy.md (python -m bench run)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.harness import machine, out_dir

HERE = Path(__file__).resolve().parent
INTERVALS_MS = (5.0, 1.0, 0.5)  # 5 ms is CPython's default


TEXT = "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"


def _write_files(root: Path, stop: threading.Event, counter: list[int],
                 builtin_open: bool = False) -> None:
    """Temp file and rename, as a deferred checkpoint: with ``os.open``/``write``/``close``
    (weir.storage.checkpoints.write_temp), or with ``open(path, "w")`` (seven calls)."""
    n = 0
    while not stop.is_set():
        d = root / f"p{n % 1000}"
        tmp = d / "partition.metadata.tmp"
        if builtin_open:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(TEXT)
        else:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, TEXT.encode())
            os.close(fd)
        os.rename(tmp, d / "partition.metadata")
        n += 1
    counter[0] = n


def _python_work(stop: threading.Event, counter: list[int]) -> None:
    n = 0
    while not stop.is_set():
        # a dict of partition states built and dropped, as a request handler does
        states = {i: (i, i * 2, [1, 2, 3]) for i in range(200)}
        n += len(states) // 200
    counter[0] = n


def _run(root: Path, seconds: float, helper: bool, main: bool,
         builtin_open: bool = False) -> tuple[float, float]:
    stop = threading.Event()
    files, work = [0], [0]
    thread = threading.Thread(target=_write_files, args=(root, stop, files, builtin_open)) \
        if helper else None
    worker = threading.Thread(target=_python_work, args=(stop, work)) if main else None
    started = time.perf_counter()
    for t in (thread, worker):
        if t is not None:
            t.start()
    time.sleep(seconds)
    stop.set()
    for t in (thread, worker):
        if t is not None:
            t.join()
    wall = time.perf_counter() - started
    return files[0] / wall, work[0] / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    default = sys.getswitchinterval()
    rows: dict[float, list[tuple[float, ...]]] = {ms: [] for ms in INTERVALS_MS}
    with tempfile.TemporaryDirectory(prefix="gil-convoy-") as tmp:
        root = Path(tmp)
        for i in range(1000):
            (root / f"p{i}").mkdir()
        for _ in range(args.rounds):
            for ms in INTERVALS_MS:
                sys.setswitchinterval(ms / 1000)
                alone_files, _ = _run(root, args.seconds, helper=True, main=False)
                _, alone_work = _run(root, args.seconds, helper=False, main=True)
                files, work = _run(root, args.seconds, helper=True, main=True)
                files_open, _ = _run(root, args.seconds, helper=True, main=True,
                                     builtin_open=True)
                rows[ms].append((alone_files, files, alone_work, work, files_open))
    sys.setswitchinterval(default)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    m = machine()
    described = (f"{m['cpu']}, {m['cores']} cores; Python {m['python']}; commit "
                 f"`{m['commit']}`. {args.rounds} interleaved rounds of {args.seconds:g} s per "
                 "measure; median of the rounds (each round's ratio in brackets).")
    header = ("| switch interval | helper files/s alone | helper files/s beside busy Python "
              "| ratio | Python work/s alone | Python work/s beside the helper | ratio "
              "| helper files/s beside busy Python, with open(path, \"w\") |")
    lines = [f"# GIL convoy — {stamp}", "", described, "", header,
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for ms, runs in rows.items():
        af = statistics.median(r[0] for r in runs)
        bf = statistics.median(r[1] for r in runs)
        aw = statistics.median(r[2] for r in runs)
        bw = statistics.median(r[3] for r in runs)
        ratios_f = ", ".join(f"{r[1] / r[0]:.3f}" for r in runs)
        ratios_w = ", ".join(f"{r[3] / r[2]:.2f}" for r in runs)
        bo = statistics.median(r[4] for r in runs)
        lines.append(f"| {ms:g} ms | {af:,.0f} | {bf:,.0f} | {bf / af:.3f} ({ratios_f}) "
                     f"| {aw:,.0f} | {bw:,.0f} | {bw / aw:.2f} ({ratios_w}) | {bo:,.0f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_save:
        (out_dir() / f"gil_convoy-{stamp}.md").write_text(text)


if __name__ == "__main__":
    main()

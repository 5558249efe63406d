"""The first close of a segment file after appends: this tree's LogSegment against a revision's.

A Fetch response's records are sent with sendfile from a descriptor the socket server
opens by path and closes after (``weir.server.network``).  On ext4 the first close of a
file that was truncated to size 0 writes back its dirty pages (``auto_da_alloc``); a
segment that its creation truncated thus stalled the event loop at the first consumer
fetch after a roll.  This script creates a segment with ``LogSegment.create`` (the code of
the working tree, and of ``--base``, extracted with ``git archive``), appends N MiB of
1 KiB-record batches through it, then times the open and close by path a Fetch response
does, twice; interleaved rounds.

    .venv/bin/python -m bench run segment_close --base c29e705~1
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.harness import out_dir
from bench.produce_cpu import extract

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import json, os, sys, time
from pathlib import Path
from weir.records.batch import validate_produce
from weir.records.builder import build_batch
from weir.storage.segment import LogSegment
directory, mib = Path(sys.argv[1]), int(sys.argv[2])
seg = LogSegment.create(directory, 0, index_interval_bytes=4096, max_index_bytes=10 << 20,
                        now_ms=0)
offset = 0
while seg.size < mib << 20:
    buf = bytearray(build_batch([b"x" * 1024] * 16, base_offset=offset, timestamp_ms=1))
    seg.append(buf, validate_produce(bytes(buf), 1 << 20))
    offset += 16
closes = []
for _ in range(2):
    start = time.perf_counter()
    os.close(os.open(seg.log_path, os.O_RDONLY))
    closes.append((time.perf_counter() - start) * 1000)
seg.close()
print(json.dumps(closes))
"""


def one(tree: Path, directory: Path, mib: int) -> list[float]:
    out = subprocess.run([sys.executable, "-P", "-c", CHILD, str(directory), str(mib)],
                         env={**os.environ, "PYTHONPATH": str(tree)}, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD~1")
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    load_start = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="weir-segment-close-",
                                     dir=ROOT / "bench" / "work") as tmp:
        work = Path(tmp)
        trees = {"base": extract(args.base, work / "base"), "new": ROOT}
        for rnd in range(args.rounds):
            for name in (("base", "new") if rnd % 2 == 0 else ("new", "base")):
                directory = work / f"{name}-{rnd}"
                directory.mkdir()
                first, second = one(trees[name], directory, args.mib)
                rows.append((rnd, name, first, second))
                print(f"#{rnd} {name:4} first close {first:7.2f} ms, second {second:.2f} ms",
                      flush=True)
                for f in directory.iterdir():
                    f.unlink()
    load_end = os.getloadavg()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=False,
                            capture_output=True, text=True).stdout.strip()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(ROOT / "bench" / "work")], check=False,
                        capture_output=True, text=True).stdout.strip()
    lines = [
        f"# segment_close {stamp}",
        "",
        (f"Working tree on commit `{commit}` (\"new\") against `{args.base}` (\"base\"); "
         f"file system {fs}; {args.mib} MiB appended per segment; load average "
         f"{load_start[0]:.1f} at start, {load_end[0]:.1f} at end."),
        "",
        "| round | tree | first close after the appends, ms | second close, ms |",
        "|---|---|---:|---:|",
        *(f"| {r} | {n} | {a:.2f} | {b:.2f} |" for r, n, a, b in rows),
        "",
        "| median | first close, ms |",
        "|---|---:|",
        *(f"| {n} | {statistics.median(a for _r, m, a, _b in rows if m == n):.2f} |"
          for n in ("base", "new")),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = out_dir() / f"segment_close-{stamp}.md"
    out.write_text(text)
    print(f"written: {out}")


if __name__ == "__main__":
    main()

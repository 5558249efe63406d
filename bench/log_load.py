"""Broker start-up: CPU of loading 10,000 idle logs, with and without the cyclic GC paused.

How to run::

    .venv/bin/python -m bench run log_load                 # 10,000 logs, 3 interleaved pairs
    .venv/bin/python -m bench run log_load --logs 3000 --pairs 5

Creates ``--logs`` empty partition logs in a temporary log dir (10 topics), shuts the
LogManager down cleanly, then loads them in fresh processes that first import the broker
(its real import heap), alternating two ways:

* ``collector on``: ``LogManager.startup`` with the GC as Python leaves it, then the full
  collection and freeze the broker ran after starting (the code before 11a507e);
* ``as the broker``: what ``Broker.start`` does now — the imports' heap collected and
  frozen, the load inside ``gc_tuning.paused()``, what it built frozen without a
  collection (``gc_tuning.freeze_built_while_paused``), then the after-start freeze.

Reported: CPU seconds (``time.process_time``) of each, per pair, and the median ratio.  CPU
rather than wall time: the machine is shared.  Results: ``bench/results/log_load.md`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

_LOAD = """
import gc, sys, time
sys.modules["hypothesis"] = None  # as a broker process (weir.cli.broker_start)
from weir.server.broker import run_broker  # noqa: F401  the broker's import heap
from pathlib import Path
from weir.server import gc_tuning
from weir.storage.config import LogConfig
from weir.storage.log_manager import LogManager
log_dir, mode = Path(sys.argv[1]), sys.argv[2]
(log_dir / ".kafka_cleanshutdown").touch()
manager = LogManager([log_dir], LogConfig())
c0 = time.process_time()
if mode == "on":
    manager.startup(0)
else:
    gc_tuning.freeze_startup_heap()
    with gc_tuning.paused():
        manager.startup(0)
        gc_tuning.freeze_built_while_paused()
gc_tuning.tune_thresholds()
gc_tuning.freeze_startup_heap()
print(time.process_time() - c0, len(manager.all_logs()))
"""


def create(log_dir: Path, count: int) -> None:
    from weir.common import TopicPartition
    from weir.storage.config import LogConfig
    from weir.storage.log_manager import LogManager
    manager = LogManager([log_dir], LogConfig())
    manager.startup(0)
    per_topic = max(1, count // 10)
    for i in range(count):
        manager.get_or_create_log(TopicPartition(f"t{i // per_topic}", i % per_topic),
                                  topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    manager.shutdown()


def load_cpu(log_dir: Path, mode: str, count: int) -> float:
    out = subprocess.run([sys.executable, "-c", _LOAD, str(log_dir), mode], check=True,
                         capture_output=True, text=True).stdout.split()
    if int(out[1]) != count:
        raise RuntimeError(f"loaded {out[1]} logs of {count}")
    return float(out[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    from bench.harness import machine, out_dir
    with tempfile.TemporaryDirectory(prefix="weir-log-load-") as tmp:
        log_dir = Path(tmp) / "logs"
        create(log_dir, args.logs)
        pairs = [(load_cpu(log_dir, "on", args.logs), load_cpu(log_dir, "paused", args.logs))
                 for _ in range(args.pairs)]
    m = machine()
    where = (f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, commit "
             f"{m['commit']}. Load average (1/5/15 min): {load_at_start} at "
             f"start, {[round(x, 2) for x in os.getloadavg()]} at end.")
    lines = [f"# Log loading at start-up: {args.logs} idle logs, CPU seconds", "", where, "",
             "| pair | collector on | as the broker (paused, frozen) | ratio |",
             "|---|---|---|---|"]
    lines += [f"| {i + 1} | {on:.3f} | {paused:.3f} | {paused / on:.2f} |"
              for i, (on, paused) in enumerate(pairs)]
    lines += ["", f"Median ratio: {statistics.median(p / o for o, p in pairs):.2f}"]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_save:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        (out_dir() / f"log_load-{stamp}.md").write_text(text)


if __name__ == "__main__":
    main()

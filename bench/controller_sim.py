"""Controller CPU at scale under the deterministic simulation (``weir.sim.scale``).

For each partition count, a cluster of simulated brokers (default 3, replication factor 3,
1,000 partitions per topic) runs the production ControllerService with 1 ms of simulated
ZooKeeper latency; then a broker other than the controller, leading a third of the
partitions:

- ``failure``: dies, its session expiring at once (BrokerChange: new leaders, ISR shrinks,
  LeaderAndIsr / UpdateMetadata);
- ``shutdown``: asks for a controlled shutdown (leaderships moved, ISRs shrunk).

Measured: the controller's CPU (``time.process_time``) from the event until every live
broker has applied the new state and the controller's queue is empty, the simulated
brokers' request handling subtracted; the core's part (``ControllerCore.handle`` and
``complete``); the cyclic GC's part.  Each measurement runs in a fresh process; with
``--compare DIR`` the same measurements also run, interleaved, on the code in ``DIR``
(a copy of another commit's ``weir`` package), for a before/after table from one run.

Usage: ``.venv/bin/python -m bench run controller_sim [--partitions 10000,100000] [--runs 3]
[--compare /tmp/before --compare-label before] [--code /tmp/after --label after]``.
Results: ``bench/results/controller_sim.{md,json}`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

from bench.harness import machine, out_dir

SCENARIOS = ("failure", "shutdown")
GOAL_S = 5.0  # issue goal: broker failure at 100,000 partitions in < 5 s of controller CPU


def one(scenario: str, partitions: int, per_topic: int, brokers: int, zk_latency_ms: int,
        freeze_heap: bool) -> dict[str, Any]:
    """One measurement in this process."""
    from weir.sim.scale import measure, scale_config
    topics = max(1, partitions // per_topic)
    config = scale_config(topics, min(per_topic, partitions), brokers=brokers)
    return measure(scenario, config, zk_latency_ms, freeze_heap=freeze_heap).to_json()


def run_child(code: str | None, scenario: str, partitions: int, args: argparse.Namespace
              ) -> dict[str, Any]:
    """One measurement in a fresh interpreter (``code``: PYTHONPATH of another tree)."""
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = code
    out = subprocess.run(
        [sys.executable, __file__, "--one", scenario, "--partitions", str(partitions),
         "--per-topic", str(args.per_topic), "--brokers", str(args.brokers),
         "--zk-latency-ms", str(args.zk_latency_ms),
         *(["--freeze-heap"] if args.freeze_heap else [])],
        env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def report(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        "# Controller CPU at scale (simulation)",
        "",
        (f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, commit "
        f"{m['commit']}. Load average (1/5/15 min) at start {doc['load_start']}, at end "
        f"{doc['load_end']}."),
        (f"Cluster: {doc['brokers']} simulated brokers, replication factor 3, "
        f"{doc['per_topic']} partitions per topic, {doc['zk_latency_ms']} ms simulated "
        f"ZooKeeper latency; {doc['runs']} runs each, each in a fresh process, the fastest "
        "reported (others only slow a run down on a shared machine; all runs in the JSON)."),
        "",
        "Controller CPU: `time.process_time` of the loop from the event until every live",
        "broker applied the new state and the controller's queue stayed empty, minus the",
        "simulated brokers' request handling. Core: `ControllerCore.handle`/`complete`.",
        "GC: cyclic collections in that window (the broker's thresholds, `gc_tuning`); the",
        "heap they walk holds the whole simulation, every broker's state included"
        + (" (frozen after the setup, as a broker freezes its startup heap)."
           if doc["freeze_heap"] else "."),
        "",
        ("| code | scenario | partitions | led by the broker | controller CPU | core CPU | "
        "GC | simulated time |"),
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in doc["best"]:
        lines.append(
            f"| {row['code']} | {row['scenario']} | {row['partitions']} | {row['led']} | "
            f"{row['controller_cpu_s']:.2f} s | {row['core_cpu_s']:.2f} s | "
            f"{row['gc_cpu_s']:.2f} s | {row['simulated_ms']} ms |")
    lines += ["", (f"Goal: broker failure at 100,000 partitions in < {GOAL_S:.0f} s of "
              "controller CPU.")]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="10000,100000",
                        help="comma-separated partition counts")
    parser.add_argument("--per-topic", type=int, default=1000)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--zk-latency-ms", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--compare", default=None,
                        help="a directory holding another tree's weir package")
    parser.add_argument("--compare-label", default="before")
    parser.add_argument("--code", default=None,
                        help="measure the weir package in this directory instead of this "
                             "tree's (e.g. a `git archive` of a commit)")
    parser.add_argument("--label", default="this commit")
    parser.add_argument("--freeze-heap", action="store_true",
                        help="freeze the built cluster's heap out of the GC before the "
                             "measure, as a broker freezes its startup heap (gc_tuning)")
    parser.add_argument("--one", choices=SCENARIOS, help=argparse.SUPPRESS)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, int(args.partitions), args.per_topic, args.brokers,
                             args.zk_latency_ms, args.freeze_heap)))
        return
    codes: list[tuple[str, str | None]] = [(args.label, args.code)]
    if args.compare:
        codes.insert(0, (args.compare_label, args.compare))
    doc: dict[str, Any] = {"machine": machine(), "load_start": _load(),
                           "brokers": args.brokers, "per_topic": args.per_topic,
                           "zk_latency_ms": args.zk_latency_ms, "runs": args.runs,
                           "freeze_heap": args.freeze_heap,
                           "compare": args.compare, "code": args.code, "all": [],
                           "best": []}
    for partitions in (int(p) for p in args.partitions.split(",")):
        for scenario in args.scenarios.split(","):
            runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in codes}
            for _ in range(args.runs):
                for label, code in codes:  # interleaved: both see the same load
                    result = run_child(code, scenario, partitions, args)
                    result["code"] = label
                    runs[label].append(result)
                    doc["all"].append(result)
                    print(json.dumps(result), flush=True)
            for label, _ in codes:
                doc["best"].append(min(runs[label], key=lambda r: r["controller_cpu_s"]))
    doc["load_end"] = _load()
    text = report(doc)
    print(text)
    if not args.no_save:
        out = out_dir()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        (out / f"controller_sim-{stamp}.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out / f"controller_sim-{stamp}.md").write_text(text)
        (out / "controller_sim-latest.md").write_text(text)


if __name__ == "__main__":
    main()

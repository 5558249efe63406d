"""Controlled shutdown at 10,000 partitions: wall clock and broker CPU per partition moved.

How to run::

    .venv/bin/python -m bench run shutdown_10k                   # 10,000 partitions, 3 runs
    .venv/bin/python -m bench run shutdown_10k --runs 2 --label after
    .venv/bin/python -m bench run shutdown_10k --profile         # py-spy on the controller

The cluster and its setup are ``control_plane.py``'s (``LocalCluster``: managed ZooKeeper,
3 broker processes, 10 topics of 1,000 partitions, RF 3, preferred leaders spread so each
broker leads a third, automatic rebalancing off).  Each run, on the one cluster: the
cluster settles (logs quiet, no small-file writes pending), then SIGTERM to the broker
that is not the controller with the highest id; measured from the signal:

* ``exit_s``: the victim's process has exited;
* ``first_s``: the first Metadata answer of either survivor naming a new leader for some of
  the partitions it led;
* ``moved_s``: both survivors' Metadata name another leader for every partition it led
  (each survivor asked on its own, again every 100 ms as a client does; ``moved_each_s``);
* CPU seconds (user + system, ``/proc/<pid>/stat``) of each broker process over the run:
  the controller's and the other survivor's until the controller logged the end of its
  ControlledShutdown event, the victim's until its exit (last sample before it was gone);
  ``cpu_per_1000_s`` is their sum per 1,000 partitions moved;
* the load average before the run, the controller's own breakdown of the event (the
  "ControlledShutdown took N ms" line: ZooKeeper and core time) and the victim's of its
  stop (``victim_stop``: waiting for the controller's answer, then the logs' shutdown);
* with ``--profile``, a py-spy profile (raw, ``--nonblocking``, every thread) of the
  controller broker over the last run (marked ``profiled``; leave it out of medians).

Between runs the victim is restarted, full ISRs awaited and the preferred leaders restored
(a preferred-replica election), then the cluster settles again.  Results:
``bench/results/shutdown_10k-<label>-<UTC stamp>.{md,json}``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.control_plane import BROKERS, EVENT_DONE, Bench, cpu_seconds, load_average, until
from bench.harness import machine, out_dir


class ShutdownBench(Bench):
    async def one_run(self, victim: int, profile_to: Path | None) -> dict[str, Any]:
        controller = self.cluster.controller_id()
        survivors = [b for b in BROKERS if b != victim]
        led = self.led_by(victim)
        pids = {b: self.cluster.broker_pid(b) for b in BROKERS}
        cpu0 = {b: cpu_seconds(pids[b]) for b in BROKERS}
        load = load_average()
        marks = self.log_marks()
        done: dict[str, Any] = {}
        victim_cpu: list[float | None] = [cpu0[victim]]

        def wait_exit() -> None:
            while True:
                sample = cpu_seconds(pids[victim])
                if sample is None or self.cluster.broker_pid(victim) is None:
                    break
                victim_cpu[0] = sample
                time.sleep(0.005)
            done["exit_s"] = round(time.perf_counter() - t0, 3)

        spy = None
        py_spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        if profile_to is not None and py_spy:
            spy = await asyncio.create_subprocess_exec(
                py_spy, "record", "-p", str(pids[controller]), "-d", "8", "-r", "100",
                "--nonblocking", "-f", "raw", "-o", str(profile_to),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            await asyncio.sleep(1.0)  # py-spy attaches before the signal, not a sync point
        probes: list = []
        t0 = time.perf_counter()
        os.kill(pids[victim], signal.SIGTERM)

        async def wait_moved() -> None:
            each = await self.moved_in_each(survivors, led, victim, t0, probes)
            done["moved_s"] = max(each.values())
            done["moved_each_s"] = {str(b): t for b, t in each.items()}
        await asyncio.gather(asyncio.to_thread(wait_exit), wait_moved())

        def event_line() -> str | None:
            text = self.cluster.log_path(controller).read_bytes()[marks[controller]:].decode(
                errors="replace")
            for line in text.splitlines():
                if EVENT_DONE.search(line):
                    return line[line.find("controller "):]
            return None
        with contextlib.suppress(TimeoutError):
            await until(event_line, 15, "the controller's event line", 0.05)

        def victim_stop() -> str | None:
            text = self.cluster.log_path(victim).read_bytes()[marks[victim]:].decode(
                errors="replace")
            found = [ln for ln in text.splitlines() if "stopped cleanly in" in ln]
            return found[-1][found[-1].find("stopped cleanly"):] if found else None
        first = [answered for _, answered, _, unmoved in probes if unmoved < len(led)]
        cpu1 = {b: cpu_seconds(pids[b]) for b in survivors}
        cpu1[victim] = victim_cpu[0]
        if spy is not None:
            await asyncio.wait_for(spy.wait(), 30)
        cpu = {str(b): round((cpu1[b] or 0) - (cpu0[b] or 0), 2) for b in BROKERS}
        total = sum(cpu.values())
        return {"profiled": spy is not None, "victim": victim, "controller": controller, "partitions_led": len(led),
                **done, "first_s": min(first) if first else None,
                "victim_stop": victim_stop(), "cpu_s": cpu, "cpu_total_s": round(total, 2),
                "cpu_per_1000_s": round(total / (len(led) / 1000), 3),
                "load_before": load, "controller_event": event_line(),
                "logs": self.read_logs(marks, time.time() - (time.perf_counter() - t0)),
                "probes": probes}

    async def runs(self, count: int, profile_dir: Path | None) -> list[dict[str, Any]]:
        self.cluster.start(timeout_s=120)
        out: list[dict[str, Any]] = []
        try:
            await self.phase("setup", self.setup)
            victim = max(b for b in BROKERS if b != self.cluster.controller_id())
            for i in range(count):
                if i:
                    await self.restart(victim, after_kill=False)
                    await self.wait_balanced()
                    await self.settle()
                last = i == count - 1  # only the last run is profiled: py-spy costs CPU
                prof = profile_dir / f"controller-run{i + 1}.txt" if profile_dir and last else None
                result = await self.one_run(victim, prof)
                print(json.dumps({k: v for k, v in result.items()
                                  if k not in ("logs", "probes")}), flush=True)
                out.append(result)
        finally:
            self.cluster.stop(timeout_s=120)
        return out


def report(doc: dict[str, Any]) -> str:
    runs = doc["runs"]
    lines = [(f"# Controlled shutdown at {doc['partitions']:,} partitions, RF 3, 3 brokers"
             f"{' (' + doc['label'] + ')' if doc['label'] else ''}"), "",
             (f"Machine: {doc['machine']}; load average at start {doc['load_start']}, "
             f"end {doc['load_end']}."), "",
             ("| run | load before | leads | exit s | first new leaders s | moved s (each) | "
              "CPU s: controller / other survivor / victim | CPU s per 1,000 moved | "
              "controller's event | victim's stop |"),
             "|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs, 1):
        c, v = str(r["controller"]), str(r["victim"])
        other = next(str(b) for b in BROKERS if str(b) not in (c, v))
        each = ", ".join(f"{b}: {t}" for b, t in r["moved_each_s"].items())
        first = "-" if r.get("first_s") is None else f"{r['first_s']:.2f}"
        lines.append(f"| {i} | {r['load_before'][0]} | {r['partitions_led']} | "
                     f"{r['exit_s']:.2f} | {first} | {r['moved_s']:.2f} ({each}) | "
                     f"{r['cpu_s'][c]} / {r['cpu_s'][other]} / {r['cpu_s'][v]} | "
                     f"{r['cpu_per_1000_s']} | {r['controller_event'] or '-'} | "
                     f"{r.get('victim_stop') or '-'} |")
    if runs:
        firsts = [r["first_s"] for r in runs if r.get("first_s") is not None]
        lines += ["", (f"Medians: exit {statistics.median(r['exit_s'] for r in runs):.2f} s, "
                  f"first new leaders "
                  f"{statistics.median(firsts) if firsts else float('nan'):.2f} s, "
                  f"moved {statistics.median(r['moved_s'] for r in runs):.2f} s, "
                  f"CPU per 1,000 partitions moved "
                  f"{statistics.median(r['cpu_per_1000_s'] for r in runs):.3f} s.")]
    lines += ["", "LeaderAndIsr applied per broker (partitions/ms) and worst loop stall:", ""]
    for i, r in enumerate(runs, 1):
        for b, v in r["logs"].items():
            if b == "timeline":
                continue
            lai = ", ".join(f"{n}/{ms}" for _, n, ms in v["leader_and_isr"][:6])
            lines.append(f"* run {i}, broker {b}: {lai or '-'}; worst stall "
                         f"{v['worst_stall_ms'] or '< 100'} ms")
    if doc.get("notes"):
        lines += ["", "## Notes", "", *doc["notes"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--label", default="")
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    doc: dict[str, Any] = {"machine": machine(), "load_start": load_average(),
                           "partitions": args.partitions, "label": args.label,
                           "notes": args.note}
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = out_dir()
    profile_dir = out / f"shutdown_10k-profile-{stamp}" if args.profile else None
    if profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sd10k-") as tmp:
        bench = ShutdownBench(Path(tmp), args.partitions, 1000)
        try:
            doc["runs"] = asyncio.run(bench.runs(args.runs, profile_dir))
        finally:
            doc["load_end"] = load_average()
            doc["setup"] = bench.phases.get("setup", {}).get("online_s")
    for r in doc["runs"]:
        r["logs"].pop("timeline", None)
    text = report(doc)
    print(text)
    if not args.no_save:
        name = f"shutdown_10k-{args.label + '-' if args.label else ''}{stamp}"
        (out / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out / f"{name}.md").write_text(text)


if __name__ == "__main__":
    main()

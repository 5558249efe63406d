"""RF 3 ÷ RF 1 of Weir against the same ratio of the floor, measured in one run.

``bench/replication.py`` measures Weir's RF 3 acks=all ÷ RF 1 acks=all throughput. This
benchmark asks how much of the gap any asyncio server of the same design would leave on the
machine at hand: it drives, with the very same producer (``replication.throughput``:
confluent-kafka, acks=all, 256 KiB batches, 1 KiB records), in interleaved rounds,

* the floor with one replica (``bench/floor_server.py``): append with ``writev``, answer;
* the replicated floor (``floor_server.py --followers 2`` and two ``--follow`` processes):
  Kafka's pull replication and nothing else (each follower fetches at its log end, the
  leader answers with ``sendfile``, the follower appends with one ``write`` and fetches
  again; a produce is answered when both followers have its bytes);
* a 3-broker Weir cluster, topics of RF 1 and RF 3 (min.insync.replicas 2).

Both producers of replication.py run: ``idempotent`` (librdkafka sends a partition's next
request only when the previous one is answered) and ``pipelined`` (5 requests in flight).
Each run records the CPU seconds of the server processes and of this process (librdkafka's
threads included).

    .venv/bin/python -m bench run replication_floor [--records N] [--repeat R] [--os-socket-buffers]

Both sides run with Kafka's default socket buffers (``socket.send.buffer.bytes`` and
``socket.receive.buffer.bytes`` 102400, ``replica.socket.receive.buffer.bytes`` 65536);
``--os-socket-buffers`` sets all three to -1 on both (the kernel's autotuned sizes, which is
what Weir used before it honoured these keys), to show what the defaults cost on loopback.

Results: bench/results/replication_floor.{md,json} (python -m bench run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import machine, out_dir
from bench.page_cache import described, settle
from bench.replication import PRODUCERS, SESSION_TIMEOUT_MS, cpu_seconds, create, own_cpu_seconds
from bench.replication import throughput as produce_throughput
from weir.ops.cluster import LocalCluster

HERE = Path(__file__).resolve().parent
RESULTS = out_dir()
TARGETS = ("floor rf1", "floor rf3", "weir rf1", "weir rf3")


class FloorCluster:
    """A floor leader and ``followers`` follower processes, stopped by PID."""

    def __init__(self, data_dir: Path, followers: int, options: tuple[str, ...] = ()) -> None:
        self.procs: list[subprocess.Popen] = []
        self.options = options
        try:
            leader = self._spawn(data_dir / "leader", "--followers", str(followers))
            self.bootstrap = f"127.0.0.1:{self._expect(leader, 'PORT')}"
            if followers:
                address = f"127.0.0.1:{self._expect(leader, 'REPLICATION_PORT')}"
                for i in range(followers):
                    follower = self._spawn(data_dir / f"follower{i}", "--follow", address)
                    if (follower.stdout.readline() if follower.stdout else "") != "FOLLOWING\n":
                        raise RuntimeError("a floor follower did not start")
        except BaseException:
            self.stop()
            raise

    def _spawn(self, data_dir: Path, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "floor_server.py"), "--data-dir", str(data_dir), *args,
             *self.options],
            stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.procs.append(proc)
        return proc

    @staticmethod
    def _expect(proc: subprocess.Popen, word: str) -> int:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith(word + " "):
            raise RuntimeError(f"the floor server said {line!r}, not {word}")
        return int(line.split()[1])

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def measured(bootstrap: str, topic: str, pids: list[int], records: int, kind: str) -> dict:
    """One throughput run after ``settle()``, with the CPU seconds each process spent."""
    dropped = settle()
    before = [cpu_seconds(pid) for pid in pids]
    own = own_cpu_seconds()
    start = time.perf_counter()
    mb_s = produce_throughput(bootstrap, topic, records, kind)
    wall = time.perf_counter() - start
    servers = [round(cpu_seconds(pid) - b, 3) for pid, b in zip(pids, before, strict=True)]
    client = round(own_cpu_seconds() - own, 3)
    return {"mb_s": mb_s, "wall_s": round(wall, 3), "cpu_s_servers": servers,
            "cpu_s_client": client,
            "cpu_busy": round((sum(servers) + client) / (wall * (os.cpu_count() or 1)), 3),
            "load_1min": round(os.getloadavg()[0], 2), "cache_dropped": dropped}


OS_BUFFERS = {"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "-1",
              "replica.socket.receive.buffer.bytes": "-1"}
OS_BUFFER_OPTIONS = ("--send-buffer-bytes", "-1", "--receive-buffer-bytes", "-1",
                     "--replica-receive-buffer-bytes", "-1")


def run(records: int, repeats: int, kinds: list[str], os_buffers: bool = False
        ) -> dict[str, dict[str, list[dict]]]:
    runs: dict[str, dict[str, list[dict]]] = {k: {t: [] for t in TARGETS} for k in kinds}
    options = OS_BUFFER_OPTIONS if os_buffers else ()
    with tempfile.TemporaryDirectory(prefix="weir-bench-replfloor-") as tmp:
        work = Path(tmp)
        cluster = LocalCluster(work / "weir", brokers=3, port_base=0,
                               session_timeout_ms=SESSION_TIMEOUT_MS,
                               overrides={"replica.lag.time.max.ms": "10000",
                                          **(OS_BUFFERS if os_buffers else {})})
        floors: list[FloorCluster] = []
        cluster.start(timeout_s=120)
        try:
            create(cluster.bootstrap, "rf1", 1)
            create(cluster.bootstrap, "rf3", 3)
            floors = [FloorCluster(work / "floor1", 0, options),
                      FloorCluster(work / "floor3", 2, options)]
            weir_pids = [cluster.broker_pid(b) for b in cluster.broker_ids]
            where = {"floor rf1": (floors[0].bootstrap, "rf1", floors[0].pids),
                     "floor rf3": (floors[1].bootstrap, "rf3", floors[1].pids),
                     "weir rf1": (cluster.bootstrap, "rf1", weir_pids),
                     "weir rf3": (cluster.bootstrap, "rf3", weir_pids)}
            for kind in kinds:
                for bootstrap, topic, _pids in where.values():  # connections, page cache
                    produce_throughput(bootstrap, topic, 2000, kind)
            for _ in range(repeats):
                for kind in kinds:
                    for target, (bootstrap, topic, pids) in where.items():
                        runs[kind][target].append(
                            measured(bootstrap, topic, pids, records, kind))
        finally:
            for floor in floors:
                floor.stop()
            cluster.stop()
    return runs


def _median_ratio(by_target: dict[str, list[dict]], num: str, den: str) -> float:
    """The median over the rounds of one round's ``num`` ÷ ``den`` (runs seconds apart)."""
    return statistics.median(a["mb_s"] / b["mb_s"]
                             for a, b in zip(by_target[num], by_target[den], strict=True))


def figures(runs: dict[str, dict[str, list[dict]]]) -> dict[str, dict[str, float]]:
    out = {}
    for kind, by_target in runs.items():
        best = {t: max(r["mb_s"] for r in rs) for t, rs in by_target.items()}
        out[kind] = {
            **{f"{t} MB/s": best[t] for t in TARGETS},
            "floor rf3/rf1": best["floor rf3"] / best["floor rf1"],
            "weir rf3/rf1": best["weir rf3"] / best["weir rf1"],
            "floor rf3/rf1, median of rounds": _median_ratio(by_target, "floor rf3",
                                                             "floor rf1"),
            "weir rf3/rf1, median of rounds": _median_ratio(by_target, "weir rf3", "weir rf1"),
            "weir/floor rf1": best["weir rf1"] / best["floor rf1"],
            "weir/floor rf3": best["weir rf3"] / best["floor rf3"],
        }
    return out


def write(info: dict, records: int, repeats: int, runs: dict, figs: dict) -> Path:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    info["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {"when": when, "commit": info["commit"], "machine": info, "records": records,
           "repeats": repeats, "producers": {k: PRODUCERS[k] for k in runs},
           "runs": runs, "figures": figs}
    (RESULTS / f"replication_floor-{when}.json").write_text(json.dumps(doc, indent=1))
    dropped = all(r["cache_dropped"] for by in runs.values() for rs in by.values() for r in rs)
    lines = [
        f"# Replication against the floor — {when}", "",
        (f"Commit `{info['commit']}`; {info.get('cpu', '?')}, {info.get('cores', '?')} "
         f"cores; Python {sys.version.split()[0]}; librdkafka {info.get('librdkafka', '?')}. "
         f"{records} records of 1 KiB per run, best of {repeats} interleaved rounds; "
         "confluent-kafka, acks=all, batch.size 256 KiB, linger.ms 5 (bench/replication.py's "
         "producer). Floor: bench/floor_server.py, replicated floor with --followers 2. "
         f"Weir: 3 brokers, min.insync.replicas 2. Socket buffers: {info['socket_buffers']}. "
         f"{described(dropped)} Load average "
         f"{info['load_average_at_start'][0]} at the start, "
         f"{info['load_average_at_end'][0]} at the end."), "",
        "| producer | " + " | ".join(figs[next(iter(figs))]) + " |",
        "|---|" + "---:|" * len(figs[next(iter(figs))]),
    ]
    for kind, fig in figs.items():
        lines.append(f"| {kind} | " + " | ".join(f"{v:.2f}" if v < 10 else f"{v:.1f}"
                                                 for v in fig.values()) + " |")
    lines += ["", "Every run (CPU seconds per server process, then this process's):", "",
              "| producer | target | MB/s | wall s | CPU s servers | CPU s client | busy |",
              "|---|---|---:|---:|---|---:|---:|"]
    for kind, by_target in runs.items():
        for i in range(repeats):
            for target in TARGETS:
                r = by_target[target][i]
                lines.append(f"| {kind} | {target} | {r['mb_s']:.1f} | {r['wall_s']:.2f} | "
                             + ", ".join(f"{c:.2f}" for c in r["cpu_s_servers"])
                             + f" | {r['cpu_s_client']:.2f} | {r['cpu_busy']:.2f} |")
    text = "\n".join(lines) + "\n"
    path = RESULTS / f"replication_floor-{when}.md"
    path.write_text(text)
    (RESULTS / "replication_floor-latest.md").write_text(text)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--producers", default="idempotent,pipelined")
    parser.add_argument("--os-socket-buffers", action="store_true",
                        help="socket buffer keys -1 on Weir and the floor (the OS's sizes)")
    args = parser.parse_args(argv)
    kinds = [k for k in args.producers.split(",") if k]
    info = machine()
    info["socket_buffers"] = ("the OS's (all three keys -1)" if args.os_socket_buffers
                              else "Kafka's defaults")
    runs = run(args.records, args.repeat, kinds, args.os_socket_buffers)
    figs = figures(runs)
    path = write(info, args.records, args.repeat, runs, figs)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

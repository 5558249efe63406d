"""Controlled-shutdown benchmark: seconds from SIGTERM to a broker's exit.

How to run::

    .venv/bin/python -m bench run controlled_shutdown                      # both parts, ~5-10 min
    .venv/bin/python -m bench run controlled_shutdown --partitions 3000 --runs 3
    .venv/bin/python -m bench run controlled_shutdown --skip-real          # controller part only
    .venv/bin/python -m bench run controlled_shutdown --skip-controller    # real brokers only

What it measures:

1. **Real brokers** (``LocalCluster``: a managed ZooKeeper and 3 broker processes on
   loopback).  One topic of ``--partitions`` partitions, replication factor 3, created
   straight in ZooKeeper with the preferred leaders spread evenly, so each broker leads a
   third.  Automatic leader rebalancing is off (the bench restores the preferred leaders
   itself, with a preferred-replica election, before every run).  The victim is a broker
   that is not the controller.  Per run, from the moment the bench sends SIGTERM:

   * ``exit``: until the victim's process has exited (polled every 5 ms);
   * ``moved``: until every partition it led has another leader in the Metadata
     responses of *both* surviving brokers (polled with Metadata v12 on loopback; one
     poll of both brokers takes tens of ms at this scale, which bounds the resolution);
   * ``zk``: until ZooKeeper's partition states name another leader for all of them;
   * the phases inside the victim, from its own log (timestamps to the millisecond):
     signal → "shutting down" → "controlled shutdown ... succeeded" → "stopped cleanly".

   Between runs the victim is restarted, the bench waits for full ISRs and moves the
   leaders back with a preferred election.  Median of ``--runs`` runs on one cluster.

   Scale: each replica keeps about 3 files open and the open-file limit here is 20,000 per
   process (hard limit too), so 10,000 partitions × RF 3 on 3 real brokers (10,000
   replicas each) does not fit; the default of 3,000 partitions (1,000 led by the
   victim, 3,000 replicas per broker) does.  The soft RLIMIT_NOFILE is raised to the hard
   limit before the brokers start (children inherit it).

2. **Controller side at 10,000 partitions** (``--controller-partitions``): the real
   ``ControllerService`` (shell + core) against a real local ZooKeeper; the three brokers
   are ZooKeeper registrations and the channel is an in-process stand-in that applies the
   controller's UpdateMetadata at once (no network, no broker-side work), as in
   ``bench/controller.py``.  Measures the ControlledShutdown event: the call
   ``on_controlled_shutdown(victim, epoch)`` until its reply (the partitions still led —
   must be none), and until every moved partition has its new leader in the stand-in
   metadata of the two other brokers.  Broker 1 is the controller, broker 3 the victim.

Results: ``bench/results/controlled_shutdown.{md,json}`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from kio.schema.metadata.v12.request import MetadataRequest

from weir.common import TopicPartition
from weir.controller.service import ControllerService
from weir.coordination.codecs import BrokerInfo
from weir.coordination.zk import ZkClient
from weir.coordination.zkserver import ZooKeeperServer
from weir.ops.cluster import LocalCluster
from weir.protocol.client import BrokerConnection
from weir.protocol.codec import build

HERE = Path(__file__).resolve().parent
from bench.controller import StubBrokers
from bench.harness import machine, out_dir

TOPIC = "cs-bench"
BROKERS = (1, 2, 3)
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


# -- helpers ---------------------------------------------------------------------------------

def raise_nofile() -> tuple[int, int]:
    """Soft open-file limit up to the hard one (inherited by the brokers we start)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def until(predicate: Callable[[], Any], timeout_s: float, what: str,
                interval_s: float = 0.1) -> None:
    """Await an (async or plain) predicate until true; TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(interval_s)


def assignment(partitions: int) -> dict[int, list[int]]:
    """Replica lists with the preferred leader rotating over brokers 1..3."""
    return {p: [BROKERS[(p + i) % 3] for i in range(3)] for p in range(partitions)}


def log_phases(text: str, broker_id: int, signalled_wall: float) -> dict[str, float]:
    """Seconds after SIGTERM at which the victim logged each shutdown phase."""
    marks = {"shutting_down": f"broker {broker_id} shutting down",
             "controlled_shutdown_done": f"controlled shutdown of broker {broker_id}",
             "stopped_cleanly": f"broker {broker_id} stopped cleanly"}
    found: dict[str, float] = {}
    for line in text.splitlines():
        m = LOG_TIME.match(line)
        if not m:
            continue
        for key, needle in marks.items():
            if key not in found and needle in line:
                if key == "controlled_shutdown_done" and "succeeded" not in line \
                        and "did not complete" not in line:
                    continue
                stamp = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                found[key] = round(stamp - signalled_wall, 3)
    return found


# -- part 1: real broker processes ---------------------------------------------------------

class RealCluster:
    """A 3-broker LocalCluster with one RF-3 topic, and the probes the runs need."""

    def __init__(self, data_dir: Path, partitions: int) -> None:
        self.partitions = partitions
        self.assign = assignment(partitions)
        self.tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        self.cluster = LocalCluster(data_dir, brokers=3, port_base=0, overrides={
            "auto.leader.rebalance.enable": "false"})

    def start(self) -> None:
        self.cluster.start(timeout_s=120)
        self.zk = self.cluster.zk()
        t0 = time.perf_counter()
        self.zk.create_topic(TOPIC, self.assign, {})
        self.create_call_s = time.perf_counter() - t0

    def stop(self) -> None:
        self.cluster.stop(timeout_s=120)

    def endpoint(self, broker_id: int) -> tuple[str, int]:
        slot = next(s for s in self.cluster.brokers if s.id == broker_id)
        return slot.host, slot.port

    def states(self) -> dict:
        return self.zk.get_partition_states(self.tps)

    async def leaders(self, conn: BrokerConnection) -> dict[int, int]:
        """partition → leader in ``conn``'s broker's Metadata (only partitions it knows)."""
        resp = await conn.request(build(MetadataRequest, topics=[{"name": TOPIC}],
                                        allow_auto_topic_creation=False), timeout_s=30)
        for topic in resp.topics:
            if topic.name == TOPIC:
                return {p.partition_index: p.leader_id for p in topic.partitions}
        return {}

    async def connect(self, broker_id: int) -> BrokerConnection:
        conn = BrokerConnection(*self.endpoint(broker_id), client_id="cs-bench")
        await conn.connect()
        return conn

    async def wait_balanced(self, timeout_s: float = 300) -> None:
        """Full ISRs, then preferred leaders everywhere (ZooKeeper and every Metadata)."""
        def full_isr() -> bool:
            states = self.states()
            return len(states) == self.partitions and all(
                len(s.isr) == 3 for s in states.values())
        await until(lambda: asyncio.to_thread(full_isr), timeout_s, "full ISRs", 0.5)
        unbalanced = [tp for tp, s in self.states().items()
                      if s.leader != self.assign[tp.partition][0]]
        if unbalanced:
            await asyncio.to_thread(self.zk.create_preferred_election, unbalanced)

        def balanced() -> bool:
            return all(s.leader == self.assign[tp.partition][0]
                       for tp, s in self.states().items())
        await until(lambda: asyncio.to_thread(balanced), timeout_s, "preferred leaders", 0.5)
        async def everywhere() -> bool:
            for b in BROKERS:
                conn = await self.connect(b)
                try:
                    got = await self.leaders(conn)
                except (TimeoutError, ConnectionError):
                    return False  # a broker busy with a long LeaderAndIsr: ask again
                finally:
                    await conn.close()
                if len(got) != self.partitions or any(
                        got[p] != r[0] for p, r in self.assign.items()):
                    return False
            return True
        await until(everywhere, timeout_s, "preferred leaders in every broker's metadata")

    async def settle(self, timeout_s: float = 180, quiet_s: float = 3.0) -> float:
        """Wait until no broker has logged anything for ``quiet_s`` (leftover ISR
        expansion, elections and LeaderAndIsr all log); returns the seconds waited.

        CPU use is no sign of rest: an idle cluster at this scale keeps about one core
        busy with its replica fetchers' empty fetches."""
        start = time.monotonic()
        paths = [self.cluster.log_path(b) for b in BROKERS]
        sizes = [p.stat().st_size for p in paths]
        last_change = time.monotonic()
        while time.monotonic() - start < timeout_s:
            await asyncio.sleep(0.25)
            now = [p.stat().st_size for p in paths]
            if now != sizes:
                sizes, last_change = now, time.monotonic()
            elif time.monotonic() - last_change >= quiet_s:
                break
        return round(time.monotonic() - start, 1)

    async def run_once(self, victim: int) -> dict[str, Any]:
        """SIGTERM ``victim`` and time its exit and the move of its leaders."""
        led = {p for p, r in self.assign.items() if r[0] == victim}
        survivors = [b for b in BROKERS if b != victim]
        conns = [await self.connect(b) for b in survivors]
        log_path = self.cluster.log_path(victim)
        log_offset = log_path.stat().st_size
        pid = self.cluster.broker_pid(victim)
        assert pid is not None
        load = load_average()
        done: dict[str, float] = {}

        def wait_exit() -> None:
            while self.cluster.broker_pid(victim) is not None:
                time.sleep(0.005)
            done["exit"] = time.perf_counter() - t0

        trace: list[list[float]] = []

        async def wait_metadata() -> None:
            while True:
                maps = [await self.leaders(c) for c in conns]
                stale = [sum(1 for p in led if m.get(p, victim) in (victim, -1)) for m in maps]
                trace.append([round(time.perf_counter() - t0, 3), *stale])
                if not any(stale):
                    done["moved"] = time.perf_counter() - t0
                    return
                await asyncio.sleep(0.01)

        def wait_zk() -> None:
            tps = [TopicPartition(TOPIC, p) for p in sorted(led)]
            while True:
                states = self.zk.get_partition_states(tps)
                if all(s.leader not in (victim, -1) for s in states.values()):
                    done["zk"] = time.perf_counter() - t0
                    return
                time.sleep(0.01)

        wall0 = time.time()
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.gather(
                asyncio.to_thread(wait_exit), wait_metadata(), asyncio.to_thread(wait_zk)),
                timeout=180)
        finally:
            for conn in conns:
                await conn.close()
        text = log_path.read_bytes()[log_offset:].decode(errors="replace")
        result = {"victim": victim, "partitions_led": len(led),
                  "exit_s": round(done["exit"], 3), "moved_s": round(done["moved"], 3),
                  "zk_s": round(done["zk"], 3), "load_before": load,
                  "phases_s": log_phases(text, victim, wall0),
                  "metadata_trace": trace}
        retries = text.count(f"controlled shutdown of broker {victim}: attempt")
        result["controlled_shutdown_retries"] = retries
        return result

    async def restart(self, victim: int) -> None:
        self.cluster.start_broker(victim)
        await asyncio.to_thread(self.cluster.wait_for_brokers, [victim], 120)


async def real_bench(partitions: int, runs: int, data_dir: Path | None = None
                     ) -> dict[str, Any]:
    nofile = raise_nofile()
    with tempfile.TemporaryDirectory(prefix="cs-bench-") as tmp:
        rc = RealCluster(data_dir or Path(tmp), partitions)
        t0 = time.perf_counter()
        rc.start()
        try:
            await rc.wait_balanced(timeout_s=600)
            setup_s = time.perf_counter() - t0
            controller = rc.cluster.controller_id()
            victim = max(b for b in BROKERS if b != controller)
            results = []
            for i in range(runs):
                if i:
                    await rc.restart(victim)
                    await rc.wait_balanced()
                settled = await rc.settle()
                result = await rc.run_once(victim)
                result["settled_after_s"] = settled
                print("real run", i + 1, json.dumps(result), flush=True)
                results.append(result)
            return {"partitions": partitions, "replication_factor": 3, "brokers": 3,
                    "controller": controller, "victim": victim, "rlimit_nofile": nofile,
                    "setup_s": round(setup_s, 1), "runs": results}
        finally:
            rc.stop()


# -- part 2: the controller's cost at 10,000 partitions ----------------------------------

async def controller_once(connect: str, partitions: int, victim: int = 3) -> dict[str, Any]:
    StubBrokers.metadata = {}
    clients = {b: ZkClient(connect, session_timeout_ms=6000, connection_timeout_ms=20000)
               for b in (0, *BROKERS)}
    for client in clients.values():
        client.start()
    service: ControllerService | None = None
    try:
        admin = clients[0]
        admin.ensure_paths()
        epochs = {b: clients[b].register_broker(BrokerInfo(id=b, host="127.0.0.1",
                                                            port=19090 + b)) for b in BROKERS}
        service = ControllerService(1, clients[1], channel_factory=StubBrokers)
        await service.start()
        await until(lambda: service.is_active, 60, "controller election", 0.01)
        admin.create_topic(TOPIC, assignment(partitions), {})
        await until(lambda: all(len(StubBrokers.metadata.get(b, {})) >= partitions
                                for b in BROKERS), 300, "topic online", 0.01)
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        led = [tp for tp, s in admin.get_partition_states(tps).items() if s.leader == victim]
        load = load_average()
        t0 = time.perf_counter()
        remaining = await service.on_controlled_shutdown(victim, epochs[victim])
        t_reply = time.perf_counter() - t0
        others = [b for b in BROKERS if b != victim]
        await until(lambda: all(StubBrokers.metadata[b].get(tp, victim) != victim
                                for b in others for tp in led), 60, "metadata", 0.001)
        t_meta = time.perf_counter() - t0
        states = admin.get_partition_states(tps)
        shrunk = sum(1 for s in states.values() if victim not in s.isr)
        return {"partitions": partitions, "partitions_led": len(led),
                "remaining": len(remaining), "reply_s": round(t_reply, 3),
                "metadata_s": round(t_meta, 3), "isr_without_victim": shrunk,
                "load_before": load}
    finally:
        if service is not None:
            await service.stop()
        for client in clients.values():
            client.stop()


def controller_bench(partitions: int, runs: int) -> dict[str, Any]:
    results = []
    with tempfile.TemporaryDirectory(prefix="cs-ctl-") as tmp:
        server = ZooKeeperServer(Path(tmp) / "zk")
        server.start(timeout_s=60)
        try:
            for i in range(runs):
                result = asyncio.run(controller_once(f"{server.connect_string}/cs{i}",
                                                     partitions))
                print("controller run", i + 1, json.dumps(result), flush=True)
                results.append(result)
        finally:
            server.stop()
    return {"partitions": partitions, "runs": results}


# -- report ------------------------------------------------------------------------------

def med(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def med_phase(runs: list[dict], key: str) -> str:
    values = [r["phases_s"][key] for r in runs if key in r.get("phases_s", {})]
    return f"{statistics.median(values):.2f} s" if values else "n/a"


def report(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        "# Controlled shutdown benchmark",
        "",
        (f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB, Python {m['python']}, "
        f"commit {m['commit']}. Load average (1/5/15 min): {doc['load_start']} at start, "
        f"{doc['load_end']} at end."),
        "",
        ("Goal: under 1 s from SIGTERM to exit for a broker leading a third of 10,000 "
        "partitions (RF 3). The seed estimates 40 s done naively; Kafka 1.1 reported ~3 s."),
        "",
    ]
    real = doc.get("real")
    if real:
        runs = real["runs"]
        lines += [
            f"## 1. Real broker processes: {real['partitions']} partitions, RF 3, 3 brokers",
            "",
            (f"Victim: broker {real['victim']} (not the controller, broker "
            f"{real['controller']}), leading {runs[0]['partitions_led']} partitions "
            f"(a third) and following {2 * real['partitions'] // 3}. Median of {len(runs)} "
            f"runs on one cluster; open-file limit {real['rlimit_nofile'][0]}."),
            "",
            "| measure (from SIGTERM) | median | runs |",
            "|---|---|---|",
        ]
        for key, what in (("exit_s", "process exited"),
                          ("moved_s", ("all its partitions led elsewhere in both survivors' "
                                      "Metadata")),
                          ("zk_s", "all its partitions led elsewhere in ZooKeeper")):
            lines.append(f"| {what} | **{med(runs, key):.2f} s** | "
                         + ", ".join(f"{r[key]:.2f}" for r in runs) + " |")
        lines += [
            "",
            "Inside the victim (its log, median seconds after SIGTERM): "
            f"'shutting down' {med_phase(runs, 'shutting_down')}, controlled shutdown "
            f"answered {med_phase(runs, 'controlled_shutdown_done')}, 'stopped cleanly' "
            f"{med_phase(runs, 'stopped_cleanly')}; controlled-shutdown retries: "
            + ", ".join(str(r["controlled_shutdown_retries"]) for r in runs) + ".",
            "",
        ]
    ctl = doc.get("controller")
    if ctl:
        runs = ctl["runs"]
        lines += [
            f"## 2. Controller side: {ctl['partitions']} partitions, RF 3 (in-process)",
            "",
            ("Real ControllerService and ZooKeeper; brokers are registrations with a stand-in "
            "channel that applies UpdateMetadata at once (no network, no broker work)."),
            "",
            "| measure (from the ControlledShutdown call) | partitions led | median | runs |",
            "|---|---|---|---|",
            f"| controller replies (0 left: "
            f"{', '.join(str(r['remaining']) for r in runs)}) | {runs[0]['partitions_led']} | "
            f"**{med(runs, 'reply_s'):.2f} s** | "
            + ", ".join(f"{r['reply_s']:.2f}" for r in runs) + " |",
            f"| new leaders in the other brokers' metadata | {runs[0]['partitions_led']} | "
            f"{med(runs, 'metadata_s'):.2f} s | "
            + ", ".join(f"{r['metadata_s']:.2f}" for r in runs) + " |",
            "",
            (f"ISRs without the victim afterwards: {runs[0]['isr_without_victim']} of "
            f"{ctl['partitions']}."),
            "",
        ]
    if doc.get("notes"):
        lines += ["## Notes", "", *doc["notes"], ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--controller-partitions", type=int, default=10_000)
    parser.add_argument("--controller-runs", type=int, default=3)
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--skip-controller", action="store_true")
    parser.add_argument("--note", action="append", default=[],
                        help="a line added to the report's notes")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep the real cluster (logs) here instead of a temporary dir")
    args = parser.parse_args()
    doc: dict[str, Any] = {"machine": machine(), "load_start": load_average(),
                           "notes": args.note}
    if not args.skip_real:
        doc["real"] = asyncio.run(real_bench(args.partitions, args.runs, args.data_dir))
    if not args.skip_controller:
        doc["controller"] = controller_bench(args.controller_partitions, args.controller_runs)
    doc["load_end"] = load_average()
    text = report(doc)
    print(text)
    if not args.no_save:
        out = out_dir()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        (out / f"controlled_shutdown-{stamp}.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out / f"controlled_shutdown-{stamp}.md").write_text(text)
        (out / "controlled_shutdown-latest.md").write_text(text)


if __name__ == "__main__":
    main()

"""Control-plane benchmark: 10,000 partitions, RF 3, on 3 real broker processes.

How to run::

    .venv/bin/python -m bench run control_plane                      # 10,000 partitions, ~10-20 min
    .venv/bin/python -m bench run control_plane --partitions 3000    # smaller, quicker
    .venv/bin/python -m bench run control_plane --phases setup,shutdown   # only some phases

The cluster is a ``LocalCluster`` (managed ZooKeeper, 3 broker processes on loopback,
``zookeeper.session.timeout.ms`` 6000 as in ``weir up``, automatic leader rebalancing off,
``metrics.http.port`` 0 so every broker runs its event-loop lag monitor).  Topics of
``--topic-size`` partitions (10 × 1,000 by default) are created straight in ZooKeeper, as
CreateTopics does, with the preferred leaders spread so each broker leads a third.  The
open-file limit is left as the machine has it (``ulimit -n``); it is recorded.

Phases, in order (each one's clock starts at its action):

* ``setup``: topic creation until every broker's Metadata shows the preferred leaders and
  every ISR is full; then the open descriptors of each broker (``/proc/<pid>/fd``, by kind).
  Before each later phase the cluster settles: no broker log grows for 3 s and no broker's
  storage thread has files left to write (``weir_storage_pending_small_file_writes``; since
  session 15, before which a shutdown could begin with 10,000 of them pending).
* ``shutdown``: SIGTERM to a broker that is not the controller; its process exit, and every
  partition it led shown with another leader in *both* survivors' Metadata (each survivor
  asked on its own, again and again; the later of the two first answers that show it).
* ``restart``: the same broker started again after its clean shutdown; until it is
  registered in ZooKeeper, and until it is serving (it logged the full LeaderAndIsr applied
  and answers Metadata with every partition).
* ``kill``: after the leaders are moved back (preferred election), SIGKILL of that broker;
  until every partition it led has another leader in both survivors' Metadata.  Goal:
  session timeout + 1 s.
* ``recover``: the killed broker started again (after its old registration expired); until it
  is serving, and the log-loading time it logged.
* ``controller``: SIGKILL of the controller; until another broker is controller and every
  partition the dead one led has another leader in the survivors' Metadata.  Goal: session
  timeout + 2 s.

Each survivor is asked again ``--probe-interval-ms`` after an answer that still shows an old
leader: 100 ms by default, as a client does after it loses a leader (the Java client's
``retry.backoff.ms``, librdkafka's ``topic.metadata.refresh.fast.interval.ms``).  Each
Metadata answer names all 10,000 partitions and takes the benchmark ~30 ms of CPU to decode;
asked every 10 ms (the interval before session 9), two probes kept one of this machine's two
cores busy in the benchmark process while the cluster handled the failure.  The benchmark
process's own CPU time per phase is recorded (``bench_cpu_s``).

For each phase the benchmark also reads the brokers' logs: the LeaderAndIsr requests each
applied ("LeaderAndIsr ... applied in N ms") and the event-loop stalls of 100 ms or more the
lag monitor logged (``weir_event_loop_lag_ms``; the worst one per broker is reported).

Results: ``bench/results/control_plane.{md,json}`` (``python -m bench run``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import signal
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from kio.schema.metadata.v12.request import MetadataRequest

from weir.common import TopicPartition
from weir.ops.cluster import LocalCluster
from weir.ops.zkview import registered_brokers
from weir.protocol.client import BrokerConnection
from weir.protocol.codec import build

HERE = Path(__file__).resolve().parent
from bench.controller_timeline import timeline, timeline_lines
from bench.harness import machine, out_dir

BROKERS = (1, 2, 3)
SESSION_TIMEOUT_MS = 6000
LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
STALL = re.compile(r"event loop stalled: .* woke (\d+) ms late")
LAI = re.compile(r"LeaderAndIsr from controller epoch \d+: (\d+) partitions applied in (\d+) ms")
METRICS_AT = re.compile(r"metrics endpoint listening on http://([\w.:-]+)/metrics")
PENDING_WRITES = re.compile(r"^weir_storage_pending_small_file_writes ([\d.e+]+)$",
                            re.MULTILINE)
EVENT_DONE = re.compile(r"controller \d+: ControlledShutdown took \d+ ms")
LOADED = re.compile(r"loaded (\d+) logs? .*in ([\d.]+) ?(ms|s)")
PHASES = ("setup", "shutdown", "restart", "kill", "recover", "controller")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def until(predicate: Callable[[], Any], timeout_s: float, what: str,
                interval_s: float = 0.05) -> None:
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


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU a process has used (``/proc/<pid>/stat``), or None if it is gone:
    what a restart cost the broker, whatever else the shared machine ran meanwhile."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (OSError, TypeError):
        return None
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


def fd_kinds(pid: int) -> dict[str, int]:
    """Open descriptors of ``pid`` by kind (segment, index, checkpoint, socket, other)."""
    kinds: dict[str, int] = {}
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:"):
            kind = "socket"
        elif target.endswith(".log"):
            kind = "segment (.log)"
        elif target.endswith((".index", ".timeindex", ".txnindex")):
            kind = "index"
        elif target.startswith(("pipe:", "anon_inode:")):
            kind = "pipe/eventfd/epoll"
        else:
            kind = "other file"
        kinds[kind] = kinds.get(kind, 0) + 1
    kinds["total"] = sum(kinds.values())
    return kinds


class FdPeaks:
    """Peak open descriptors of each broker during one phase: a thread counts the entries
    of ``/proc/<pid>/fd`` of every running broker every ``interval_s`` (a transient burst,
    e.g. logs opened twice, shows here and not in the one count taken after setup)."""

    def __init__(self, pid_of: Callable[[int], int | None], brokers: list[int],
                 interval_s: float = 0.1) -> None:
        self._pid_of, self._brokers, self._interval_s = pid_of, brokers, interval_s
        self.peaks: dict[str, list[float]] = {}  # broker → [peak, seconds into the phase]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fd-peaks", daemon=True)

    def __enter__(self) -> FdPeaks:  # noqa: PYI034 - a final class
        self._t0 = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            for b in self._brokers:
                pid = self._pid_of(b)
                try:
                    n = len(os.listdir(f"/proc/{pid}/fd")) if pid else 0
                except OSError:  # the process went away between the two calls
                    continue
                peak = self.peaks.setdefault(str(b), [0, 0.0])
                if n > peak[0]:
                    peak[:] = [n, round(time.perf_counter() - self._t0, 2)]
            if self._stop.wait(self._interval_s):
                return


def fd_peak_lines(phases: dict[str, Any]) -> list[str]:
    """The report's table of :class:`FdPeaks` results."""
    rows = [(name, b, v) for name, ph in phases.items()
            for b, v in sorted(ph.get("fd_peaks", {}).items())]
    if not rows:
        return []
    return ["", ("Peak open descriptors per broker and phase (/proc/<pid>/fd, sampled "
                 "every 0.1 s) and when it was reached:"), "",
            "| phase | broker | peak | at |", "|---|---|---|---|",
            *(f"| {name} | {b} | {n} | {t} s |" for name, b, (n, t) in rows)]


class Bench:
    def __init__(self, data_dir: Path, partitions: int, topic_size: int,
                 probe_interval_s: float = 0.1) -> None:
        self.probe_interval_s = probe_interval_s
        self.topics = {f"cp-{i}": min(topic_size, partitions - i * topic_size)
                       for i in range((partitions + topic_size - 1) // topic_size)}
        self.partitions = partitions
        # preferred leader rotates over the brokers across the whole partition space
        self.assign: dict[TopicPartition, list[int]] = {}
        n = 0
        for topic, count in self.topics.items():
            for p in range(count):
                self.assign[TopicPartition(topic, p)] = [BROKERS[(n + i) % 3] for i in range(3)]
                n += 1
        self.cluster = LocalCluster(data_dir, brokers=3, port_base=0,
                                    session_timeout_ms=SESSION_TIMEOUT_MS, overrides={
                                        "auto.leader.rebalance.enable": "false",
                                        "metrics.http.port": "0"})
        self.phases: dict[str, dict[str, Any]] = {}

    # -- probes ------------------------------------------------------------------------------
    def endpoint(self, broker_id: int) -> tuple[str, int]:
        slot = next(s for s in self.cluster.brokers if s.id == broker_id)
        return slot.host, slot.port

    async def metadata(self, broker_id: int, timeout_s: float = 30
                       ) -> tuple[dict[TopicPartition, int], int]:
        """(partition → leader, controller id) in ``broker_id``'s Metadata."""
        conn = BrokerConnection(*self.endpoint(broker_id), client_id="cp-bench")
        await conn.connect()
        try:
            resp = await conn.request(build(
                MetadataRequest, topics=[{"name": t} for t in self.topics],
                allow_auto_topic_creation=False), timeout_s=timeout_s)
        finally:
            await conn.close()
        leaders = {TopicPartition(t.name, p.partition_index): p.leader_id
                   for t in resp.topics for p in t.partitions}
        return leaders, int(resp.controller_id)

    async def moved_everywhere(self, brokers: list[int], led: set[TopicPartition],
                               dead: int) -> bool:
        for b in brokers:
            try:
                leaders, _ = await self.metadata(b, timeout_s=10)
            except (TimeoutError, ConnectionError, OSError):
                return False
            if any(leaders.get(tp, dead) in (dead, -1) for tp in led):
                return False
        return True

    async def moved_in_each(self, brokers: list[int], led: set[TopicPartition], dead: int,
                            t0: float, probes: list, timeout_s: float = 120) -> dict[int, float]:
        """Ask each broker's Metadata on its own, again and again, until it shows another
        leader for every partition of ``led``; the seconds since ``t0`` at which each one's
        first such answer arrived.  (Asking the brokers one after the other instead, as
        :meth:`moved_everywhere` does, makes a broker's probe wait for the other's answer,
        which takes up to ~0.8 s from a busy controller at 10,000 partitions.)  ``probes``
        gets a row ``(asked at, answered at, broker, partitions not moved)`` whenever a
        broker's count changes."""
        async def one(b: int) -> float:
            last = None
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                asked = time.perf_counter()
                try:
                    leaders, _ = await self.metadata(b, timeout_s=10)
                except (TimeoutError, ConnectionError, OSError):
                    await asyncio.sleep(self.probe_interval_s)
                    continue
                answered = time.perf_counter()
                unmoved = sum(leaders.get(tp, dead) in (dead, -1) for tp in led)
                if unmoved != last:
                    probes.append((round(asked - t0, 3), round(answered - t0, 3), b, unmoved))
                    last = unmoved
                if not unmoved:
                    return round(answered - t0, 3)
                await asyncio.sleep(self.probe_interval_s)
            raise TimeoutError(f"timed out waiting for moved leaders in broker {b}")
        times = await asyncio.gather(*(one(b) for b in brokers))
        return dict(zip(brokers, times, strict=True))

    def led_by(self, broker_id: int) -> set[TopicPartition]:
        return {tp for tp, r in self.assign.items() if r[0] == broker_id}

    async def wait_balanced(self, timeout_s: float = 900) -> None:
        """Full ISRs, preferred leaders in ZooKeeper and in every broker's Metadata."""
        zk = self.cluster.zk()
        tps = list(self.assign)

        def full_isr() -> bool:
            states = zk.get_partition_states(tps)
            return len(states) == len(tps) and all(len(s.isr) == 3 for s in states.values())
        await until(lambda: asyncio.to_thread(full_isr), timeout_s, "full ISRs", 0.5)
        states = await asyncio.to_thread(zk.get_partition_states, tps)
        unbalanced = [tp for tp, s in states.items() if s.leader != self.assign[tp][0]]
        if unbalanced:
            await asyncio.to_thread(zk.create_preferred_election, unbalanced)

        async def everywhere() -> bool:
            for b in BROKERS:
                try:
                    leaders, _ = await self.metadata(b)
                except (TimeoutError, ConnectionError, OSError):
                    return False
                if len(leaders) != len(tps) or any(
                        leaders[tp] != r[0] for tp, r in self.assign.items()):
                    return False
            return True
        await until(everywhere, timeout_s, "preferred leaders in every broker's metadata", 0.5)

    async def settle(self, quiet_s: float = 3.0, timeout_s: float = 180) -> None:
        """Until no broker log grew for ``quiet_s`` (ISR expansion, elections all log) and
        no broker's storage thread has small files left to write
        (``weir_storage_pending_small_file_writes``: after a topic's creation, thousands of
        ``partition.metadata`` and leader-epoch files, written for seconds after the logs
        went quiet; a shutdown that began meanwhile wrote them first)."""
        paths = [self.cluster.log_path(b) for b in BROKERS]
        sizes, last, start = None, time.monotonic(), time.monotonic()
        while time.monotonic() - start < timeout_s:
            await asyncio.sleep(0.25)
            now = [p.stat().st_size for p in paths]
            if now != sizes:
                sizes, last = now, time.monotonic()
            elif time.monotonic() - last >= quiet_s:
                if not any(await asyncio.gather(*(asyncio.to_thread(self.pending_writes, b)
                                                  for b in BROKERS))):
                    return
                last = time.monotonic() - quiet_s  # look again at the next turn

    def pending_writes(self, broker_id: int) -> int:
        """The broker's ``weir_storage_pending_small_file_writes`` (0 if it has no metrics
        endpoint or does not answer: only a running broker has a backlog to wait for)."""
        text = self.cluster.log_path(broker_id).read_text(errors="replace")
        ports = METRICS_AT.findall(text)
        if not ports:
            return 0
        try:
            with urllib.request.urlopen(f"http://{ports[-1]}/metrics", timeout=5) as answer:
                body = answer.read().decode()
        except OSError:
            return 0
        found = PENDING_WRITES.search(body)
        return int(float(found.group(1))) if found else 0

    async def serving(self, broker_id: int, log_from: int) -> bool:
        """The broker applied a LeaderAndIsr naming every partition it hosts and answers
        Metadata with every partition."""
        text = self.cluster.log_path(broker_id).read_bytes()[log_from:].decode(errors="replace")
        applied = sum(int(m.group(1)) for m in LAI.finditer(text))
        if applied < len(self.assign):
            return False
        try:
            leaders, _ = await self.metadata(broker_id, timeout_s=10)
        except (TimeoutError, ConnectionError, OSError):
            return False
        return len(leaders) == len(self.assign)

    # -- per-phase log reading ----------------------------------------------------------------
    def log_marks(self) -> dict[int, int]:
        return {b: self.cluster.log_path(b).stat().st_size for b in BROKERS}

    def read_logs(self, marks: dict[int, int], wall0: float) -> dict[str, Any]:
        out: dict[str, Any] = {}
        texts = {b: self.cluster.log_path(b).read_bytes()[marks[b]:].decode(errors="replace")
                 for b in BROKERS}
        out["timeline"] = timeline(texts, wall0)
        for b in BROKERS:
            text = texts[b]
            stalls, lais, loaded = [], [], []
            for line in text.splitlines():
                m = LOG_LINE.match(line)
                t = (datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - wall0
                     if m else None)
                if (s := STALL.search(line)) is not None:
                    stalls.append([round(t, 2) if t is not None else None, int(s.group(1))])
                elif (a := LAI.search(line)) is not None:
                    lais.append([round(t, 2) if t is not None else None, int(a.group(1)),
                                 int(a.group(2))])
                elif LOADED.search(line) is not None:
                    loaded.append(line[line.find("loaded"):])
            out[str(b)] = {"worst_stall_ms": max((s[1] for s in stalls), default=0),
                           "stalls_over_100ms": len(stalls), "stalls": stalls[:50],
                           "leader_and_isr": lais, "loaded": loaded}
        return out

    async def phase(self, name: str, action: Callable[[], Any]) -> dict[str, Any]:
        marks, load = self.log_marks(), load_average()
        wall0 = time.time()
        cpu0 = time.process_time()
        with FdPeaks(self.cluster.broker_pid, BROKERS) as fd_peaks:
            result = await action()
        result["bench_cpu_s"] = round(time.process_time() - cpu0, 2)
        result["fd_peaks"] = fd_peaks.peaks
        result["load_before"] = load
        result["brokers"] = self.read_logs(marks, wall0)
        rows = result["brokers"].pop("timeline")
        marks_s = {"exit_s": "victim's process exited", "znode_gone_s":
                   "victim's /brokers/ids znode gone (session expired)",
                   "elected_s": "new controller in /controller",
                   "moved_s": "new leaders in both survivors' Metadata",
                   "operational_s": "new leaders in both survivors' Metadata"}
        rows += [(result[k], 0, what) for k, what in marks_s.items() if k in result]
        rows += [(answered, 0, (f"Metadata of broker {b} (asked at {asked:.3f} s): {n} of "
                                f"the dead broker's partitions without a new leader"))
                 for asked, answered, b, n in result.get("probes", ())]
        result["timeline"] = sorted(rows, key=lambda r: (r[0], r[1]))
        self.phases[name] = result
        print(name, json.dumps({k: v for k, v in result.items() if k not in ("brokers", "timeline", "probes")}),
              {b: (v["worst_stall_ms"], [x[1:] for x in v["leader_and_isr"]][:6])
               for b, v in result["brokers"].items()}, flush=True)
        return result

    # -- phases --------------------------------------------------------------------------------
    async def setup(self) -> dict[str, Any]:
        zk = self.cluster.zk()
        t0 = time.perf_counter()
        for topic, count in self.topics.items():
            await asyncio.to_thread(zk.create_topic, topic, {
                p: self.assign[TopicPartition(topic, p)] for p in range(count)}, {})
        created = time.perf_counter() - t0
        await self.wait_balanced()
        online = time.perf_counter() - t0
        await self.settle()
        fds = {str(b): fd_kinds(self.cluster.broker_pid(b)) for b in BROKERS}
        return {"create_calls_s": round(created, 2), "online_s": round(online, 1), "fds": fds}

    async def sigterm(self, victim: int) -> dict[str, Any]:
        survivors = [b for b in BROKERS if b != victim]
        led = self.led_by(victim)
        pid = self.cluster.broker_pid(victim)
        done: dict[str, float] = {}

        def wait_exit() -> None:
            while self.cluster.broker_pid(victim) is not None:
                time.sleep(0.005)
            done["exit_s"] = round(time.perf_counter() - t0, 3)

        probes: list = []
        controller = self.cluster.controller_id()
        marks = self.log_marks()

        async def wait_moved() -> None:
            each = await self.moved_in_each(survivors, led, victim, t0, probes)
            done["moved_s"] = max(each.values())
            done["moved_each_s"] = each
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGTERM)
        await asyncio.gather(asyncio.to_thread(wait_exit), wait_moved())
        # the controller logs its event's breakdown when the event ends, which can be after
        # the leaders are seen moved: wait for it, so the timeline has it (no figure moves)
        with contextlib.suppress(TimeoutError):
            await until(lambda: EVENT_DONE.search(self.cluster.log_path(controller).read_bytes()[
            marks[controller]:].decode(errors="replace")) is not None,
                10, "the controller's event line", 0.1)
        return {"victim": victim, "partitions_led": len(led), **done, "probes": probes}

    async def restart(self, broker_id: int, after_kill: bool) -> dict[str, Any]:
        zk = self.cluster.zk()
        if after_kill:  # the dead process's registration must expire first
            await until(lambda: broker_id not in registered_brokers(zk), 60,
                        "old registration expired", 0.05)
        log_from = self.cluster.log_path(broker_id).stat().st_size
        t0 = time.perf_counter()
        self.cluster.start_broker(broker_id, stale_wait_s=0)
        await until(lambda: broker_id in registered_brokers(zk), 120, "registration", 0.02)
        registered = time.perf_counter() - t0
        cpu_registered = cpu_seconds(self.cluster.broker_pid(broker_id))
        await until(lambda: self.serving(broker_id, log_from), 300, "serving", 0.05)
        return {"broker": broker_id, "registered_s": round(registered, 3),
                "serving_s": round(time.perf_counter() - t0, 3),
                "cpu_registered_s": cpu_registered,
                "cpu_serving_s": cpu_seconds(self.cluster.broker_pid(broker_id))}

    def znode_gone(self, broker_id: int, t0: float, out: dict[str, float]) -> None:
        """Until ``/brokers/ids/<broker_id>`` is gone (its session expired: ZooKeeper's
        expiry comes 4-6.5 s after a kill, from the last ping and the tick); records the
        seconds since ``t0`` (a worker thread)."""
        zk = self.cluster.zk()
        deadline = time.monotonic() + 60
        while broker_id in registered_brokers(zk) and time.monotonic() < deadline:
            time.sleep(0.01)
        out["znode_gone_s"] = round(time.perf_counter() - t0, 3)

    async def sigkill(self, victim: int) -> dict[str, Any]:
        survivors = [b for b in BROKERS if b != victim]
        led = self.led_by(victim)
        gone: dict[str, float] = {}
        probes: list = []
        t0 = time.perf_counter()
        self.cluster.kill_broker(victim)
        watch = asyncio.create_task(asyncio.to_thread(self.znode_gone, victim, t0, gone))
        # each survivor asked on its own, as in the shutdown phase (since session 8; before,
        # one after the other, so a survivor's answer also waited for the other's)
        each = await self.moved_in_each(survivors, led, victim, t0, probes)
        await watch
        return {"victim": victim, "partitions_led": len(led), **gone,
                "moved_s": max(each.values()), "moved_each_s": each,
                "goal_s": SESSION_TIMEOUT_MS / 1000 + 1, "probes": probes}

    async def kill_controller(self) -> dict[str, Any]:
        zk = self.cluster.zk()
        old = self.cluster.controller_id()
        survivors = [b for b in BROKERS if b != old]
        led = self.led_by(old)
        gone: dict[str, float] = {}
        t0 = time.perf_counter()
        self.cluster.kill_broker(old)
        watch = asyncio.create_task(asyncio.to_thread(self.znode_gone, old, t0, gone))

        def elected() -> bool:
            cid = zk.get_controller_id()
            return cid is not None and cid >= 0 and cid != old
        await until(lambda: asyncio.to_thread(elected), 120, "new controller", 0.02)
        elected_s = time.perf_counter() - t0
        await until(lambda: self.moved_everywhere(survivors, led, old), 120,
                    "moved leaders", self.probe_interval_s)
        operational = time.perf_counter() - t0
        await watch
        return {"old_controller": old, "new_controller": zk.get_controller_id(),
                "partitions_led": len(led), "elected_s": round(elected_s, 3), **gone,
                "operational_s": round(operational, 3),
                "goal_s": SESSION_TIMEOUT_MS / 1000 + 2}

    async def run(self, phases: set[str]) -> None:
        self.cluster.start(timeout_s=120)
        try:
            await self.phase("setup", self.setup)
            victim = max(b for b in BROKERS if b != self.cluster.controller_id())
            if "shutdown" in phases:
                await self.phase("shutdown", lambda: self.sigterm(victim))
                await self.phase("restart", lambda: self.restart(victim, after_kill=False))
                await self.wait_balanced()
                await self.settle()
            if "kill" in phases:
                await self.phase("kill", lambda: self.sigkill(victim))
                await self.phase("recover", lambda: self.restart(victim, after_kill=True))
                await self.wait_balanced()
                await self.settle()
            if "controller" in phases:
                await self.phase("controller", self.kill_controller)
        finally:
            self.cluster.stop(timeout_s=120)


# -- report --------------------------------------------------------------------------------

def report(doc: dict[str, Any]) -> str:
    m, ph = doc["machine"], doc["phases"]
    lines = [
        f"# Control-plane benchmark: {doc['partitions']} partitions, RF 3, 3 broker processes",
        "",
        (f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB, Python {m['python']}, "
         f"commit {m['commit']}{' ' + doc['label'] if doc.get('label') else ''}. "
         f"Open-file limit {doc['rlimit_nofile']}. "
         f"Load average (1/5/15 min): {doc['load_start']} at start, {doc['load_end']} at end. "
         f"ZooKeeper session timeout {SESSION_TIMEOUT_MS} ms. Metadata probes "
         f"{doc.get('probe_interval_ms', 10):g} ms apart; the benchmark process's CPU per "
         f"phase: " + ", ".join(f"{name} {p['bench_cpu_s']} s" for name, p in ph.items()
                                if "bench_cpu_s" in p) + "."),
        "",
        "| phase | measure | value | goal |",
        "|---|---|---|---|",
    ]

    def row(phase: str, what: str, value: str, goal: str = "") -> None:
        lines.append(f"| {phase} | {what} | {value} | {goal} |")
    if "setup" in ph:
        s = ph["setup"]
        row("setup", "topics created → preferred leaders everywhere", f"{s['online_s']} s")
        for b, kinds in s["fds"].items():
            detail = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()) if k != "total")
            row("setup", f"open descriptors, broker {b}", f"{kinds['total']} ({detail})",
                f"< {doc['rlimit_nofile']}")
    if "shutdown" in ph:
        s = ph["shutdown"]
        row("shutdown", f"SIGTERM → process exit (leads {s['partitions_led']})",
            f"{s['exit_s']:.2f} s", "< 1 s")
        row("shutdown", "SIGTERM → new leaders in both survivors' Metadata",
            f"{s['moved_s']:.2f} s", "< 1 s")
    if "restart" in ph:
        s = ph["restart"]
        row("restart", "clean restart → registered", f"{s['registered_s']:.2f} s")
        row("restart", "clean restart → serving", f"{s['serving_s']:.2f} s", "< 5 s")
        if s.get("cpu_serving_s") is not None:
            row("restart", "clean restart: the broker's CPU at registered / serving",
                f"{s['cpu_registered_s']} s / {s['cpu_serving_s']} s")
    if "kill" in ph:
        s = ph["kill"]
        row("kill", "SIGKILL → new leaders in both survivors' Metadata",
            f"{s['moved_s']:.2f} s", f"< {s['goal_s']:g} s")
    if "recover" in ph:
        s = ph["recover"]
        row("recover", "restart after SIGKILL → registered", f"{s['registered_s']:.2f} s")
        row("recover", "restart after SIGKILL → serving", f"{s['serving_s']:.2f} s")
        if s.get("cpu_serving_s") is not None:
            row("recover", "restart after SIGKILL: the broker's CPU at registered / serving",
                f"{s['cpu_registered_s']} s / {s['cpu_serving_s']} s")
    if "controller" in ph:
        s = ph["controller"]
        row("controller", "controller SIGKILL → new controller elected",
            f"{s['elected_s']:.2f} s")
        row("controller", "controller SIGKILL → its leaders moved in survivors' Metadata",
            f"{s['operational_s']:.2f} s", f"< {s['goal_s']:g} s")
    lines += ["", ("Per phase and broker, from the brokers' logs: the LeaderAndIsr requests "
                   "applied (partitions/ms, at most 4 shown) and the worst event-loop stall "
                   "(weir_event_loop_lag_ms; stalls under 100 ms are not logged)."), "",
              "| phase | broker | LeaderAndIsr (partitions/ms) | worst stall | stalls ≥ 100 ms |",
              "|---|---|---|---|---|"]
    for name in PHASES:
        if name not in ph:
            continue
        for b, v in ph[name]["brokers"].items():
            lai = ", ".join(f"{n}/{ms}" for _, n, ms in v["leader_and_isr"][:4])
            more = len(v["leader_and_isr"]) - 4
            lai += f" (+{more})" if more > 0 else ""
            worst = f"{v['worst_stall_ms']} ms" if v["worst_stall_ms"] else "< 100 ms"
            lines.append(f"| {name} | {b} | {lai or '-'} | {worst} | "
                         f"{v['stalls_over_100ms']} |")
    lines += fd_peak_lines(ph)
    for name in ("shutdown", "kill", "controller"):
        rows = ph.get(name, {}).get("timeline")
        if rows:
            title = f"### Timeline: {name} (from the brokers' logs; t = 0 at the signal)"
            lines += ["", title, "", *timeline_lines(tuple(r) for r in rows)]
    if doc.get("notes"):
        lines += ["", "## Notes", "", *doc["notes"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topic-size", type=int, default=1000)
    parser.add_argument("--phases", default="shutdown,kill,controller")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--label", default="", help="e.g. 'before' or 'after'")
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--probe-interval-ms", type=float, default=100,
                        help="pause between a survivor's Metadata answer showing an old "
                             "leader and the next question (default 100, a client's)")
    args = parser.parse_args()
    doc: dict[str, Any] = {"machine": machine(), "load_start": load_average(),
                           "partitions": args.partitions, "label": args.label,
                           "probe_interval_ms": args.probe_interval_ms,
                           "rlimit_nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                           "notes": args.note}
    with tempfile.TemporaryDirectory(prefix="cp-bench-") as tmp:
        bench = Bench(args.data_dir or Path(tmp), args.partitions, args.topic_size,
                      args.probe_interval_ms / 1000)
        try:
            asyncio.run(bench.run(set(args.phases.split(","))))
        finally:
            doc["phases"] = bench.phases
            doc["load_end"] = load_average()
    text = report(doc)
    print(text)
    if not args.no_save:
        out = out_dir()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        (out / f"control_plane-{stamp}.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out / f"control_plane-{stamp}.md").write_text(text)
        (out / "control_plane-latest.md").write_text(text)


if __name__ == "__main__":
    main()

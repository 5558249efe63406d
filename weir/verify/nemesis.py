"""The nemesis: seeded faults against a local cluster, one fault window at a time.

Faults (all on one machine, no privileges):

- ``kill``: SIGKILL a broker, restart it when the window ends (a crash; its unflushed page
  cache survives, as with a process crash rather than a power loss).
- ``pause``: SIGSTOP a broker, SIGCONT when the window ends (a GC pause or a hung VM: its
  ZooKeeper session expires, it comes back believing it still leads).
- ``partition``: isolate a broker through the TCP proxies: no client, broker or ZooKeeper
  traffic to or from it (see ``weir.verify.proxy``).
- ``disk-full``: lower the broker's RLIMIT_FSIZE to 0 with prlimit(2) while it runs, so every
  write that would extend a file (segment appends, index and checkpoint files) fails with
  EFBIG, as with a full disk.  CPython ignores SIGXFSZ, so the broker sees the error instead
  of being killed.  Healing frees the "disk" (the limit goes back to unlimited) and then
  restarts the broker, as an operator must: in Kafka a log directory that failed stays
  offline until the broker restarts (and a broker whose every log dir failed halts).
- ``controller``: kill or pause the broker that is currently the controller.
- ``zookeeper``: kill (and restart on the same port, same data) or pause ZooKeeper.

The schedule is drawn from ``random.Random(seed)`` up front: per window the fault, its target
(a broker index), whether to kill or pause, the quiet time before it and how long it lasts.
Every kind enabled appears once before any repeats, so short runs still cover all of them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import resource
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weir.verify.history import History

log = logging.getLogger(__name__)

FAULTS = ("kill", "pause", "partition", "disk-full", "controller", "zookeeper")
NEEDS_PROXY = {"partition"}


@dataclass(frozen=True)
class Step:
    fault: str
    target: int        # index into the broker ids (ignored by controller/zookeeper)
    mode: str          # "kill" or "pause" for controller/zookeeper, else the fault itself
    quiet_s: float     # healthy time before the fault
    hold_s: float      # how long the fault lasts


def schedule(seed: int, faults: list[str], windows: int, brokers: int,
             quiet_s: tuple[float, float] = (3.0, 6.0),
             hold_s: tuple[float, float] = (3.0, 8.0)) -> list[Step]:
    """``windows`` seeded steps; each enabled fault once (shuffled), then at random."""
    rng = random.Random(seed)
    kinds: list[str] = []
    while len(kinds) < windows and faults:
        batch = list(faults)
        rng.shuffle(batch)
        kinds.extend(batch)
    steps = []
    for fault in kinds[:windows]:
        mode = rng.choice(("kill", "pause")) if fault in ("controller", "zookeeper") else fault
        steps.append(Step(fault, rng.randrange(brokers), mode,
                          round(rng.uniform(*quiet_s), 2), round(rng.uniform(*hold_s), 2)))
    return steps


class Nemesis:
    """Runs a schedule against a LocalCluster (and its proxies), recording every window."""

    def __init__(self, cluster: Any, history: History, steps: list[Step],
                 proxies: Any = None, zookeeper: Any = None,
                 restart_zookeeper: Callable[[], Any] | None = None) -> None:
        self.cluster = cluster
        self.history = history
        self.steps = steps
        self.proxies = proxies
        self.zookeeper = zookeeper
        self._restart_zookeeper = restart_zookeeper
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="weir-verify-nemesis",
                                        daemon=True)
        self._heal: Callable[[], None] | None = None
        self._window = 0
        self.errors: list[str] = []

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 120) -> None:
        """End the schedule (the current window heals at once) and wait for the thread."""
        self._stop.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        for step in self.steps:
            if self._stop.wait(step.quiet_s):
                return
            try:
                self._inject(step)
            except Exception as exc:  # noqa: BLE001 - a failed injection is recorded, not fatal
                self.errors.append(f"{step}: {exc!r}")
                log.warning("nemesis: %s failed: %r", step, exc)
                continue
            self._stop.wait(step.hold_s)
            self._end_window()

    # -- one window ------------------------------------------------------------------------
    def _controller(self, fallback: int, timeout_s: float = 15) -> int:
        """The controller's broker id (``fallback`` when there is none).  The cluster's
        ZooKeeper client may be between sessions after a ``zookeeper`` window (its session
        expired while ZooKeeper was down): it opens a new one by itself, so the question
        is asked again until then."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.cluster.controller_id() or fallback
            except Exception:  # kazoo's SessionExpiredError / ConnectionLoss, until reconnected
                if time.monotonic() >= deadline or self._stop.is_set():
                    raise
                time.sleep(0.2)

    def _inject(self, step: Step) -> None:
        ids = self.cluster.broker_ids
        broker = ids[step.target % len(ids)]
        if step.fault == "controller":
            broker = self._controller(broker)
        target: Any = "zookeeper" if step.fault == "zookeeper" else broker
        what = step.mode if step.fault in ("controller", "zookeeper") else step.fault
        heal = self._apply(what, target)
        self._window += 1
        self._heal = heal
        self.history.add("nemesis", "info", "start", {
            "window": self._window, "fault": step.fault, "target": target, "mode": what})

    def _end_window(self) -> None:
        heal, self._heal = self._heal, None
        if heal is None:
            return
        try:
            heal()
        except Exception as exc:  # noqa: BLE001 - heal_all at the end retries
            self.errors.append(f"heal of window {self._window}: {exc!r}")
            log.warning("nemesis: heal failed: %r", exc)
        self.history.add("nemesis", "info", "stop", {"window": self._window})

    def _apply(self, what: str, target: Any) -> Callable[[], None]:
        if target == "zookeeper":
            pid = self.zookeeper.pid
            if what == "kill":
                os.kill(pid, signal.SIGKILL)
                return self._restart_zookeeper or (lambda: None)
            os.kill(pid, signal.SIGSTOP)
            return lambda: _cont(pid)
        cluster = self.cluster
        if what == "kill":
            cluster.kill_broker(target)
            return lambda: self._restart_broker(target)
        if what == "pause":
            pid = cluster.pause_broker(target)
            return lambda: _cont(pid)
        if what == "partition":
            self.proxies.isolate(target)
            return lambda: self.proxies.heal(target)
        if what == "disk-full":
            pid = cluster.broker_pid(target)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
            return lambda: self._restore_disk(target, pid)
        raise ValueError(f"unknown fault {what!r}")

    def _restart_broker(self, broker: int) -> None:
        if self.cluster.broker_pid(broker) is None:
            self.cluster.start_broker(broker)
            self.cluster.wait_for_brokers([broker], timeout_s=60)

    def _restore_disk(self, broker: int, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            resource.prlimit(pid, resource.RLIMIT_FSIZE,
                             (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        self.cluster.stop_broker(broker, timeout_s=20)  # the operator's restart
        self._restart_broker(broker)

    # -- the end ---------------------------------------------------------------------------
    def heal_all(self, timeout_s: float = 90) -> None:
        """Undo every fault: links, stopped processes, file-size limits, dead processes."""
        self._end_window()
        if self.proxies is not None:
            self.proxies.heal()
        if self.zookeeper is not None and self.zookeeper.pid:
            _cont(self.zookeeper.pid)
            if not self.zookeeper.is_running() and self._restart_zookeeper is not None:
                self._restart_zookeeper()
        deadline = time.monotonic() + timeout_s
        for broker in self.cluster.broker_ids:
            pid = self.cluster.broker_pid(broker)
            if pid is not None:
                _cont(pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    resource.prlimit(pid, resource.RLIMIT_FSIZE,
                                     (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        for broker in self.cluster.broker_ids:
            if self.cluster.broker_pid(broker) is None:
                self.cluster.start_broker(broker)
        self.cluster.wait_for_brokers(self.cluster.broker_ids,
                                      max(deadline - time.monotonic(), 1))


def _cont(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def broker_log_dirs(cluster: Any) -> dict[int, Path]:
    return {b: cluster.broker_dir(b) / "logs" for b in cluster.broker_ids}

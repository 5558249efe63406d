"""One verify run: set up (or attach to) a cluster, run the workload under the nemesis, heal,
read everything back, compare the replicas, check the history and write the report."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.verify import workload as wl
from weir.verify.checker import CheckResult, check
from weir.verify.history import History
from weir.verify.nemesis import NEEDS_PROXY, Nemesis, schedule
from weir.verify.replicas import replica_report
from weir.verify.report import write_report

log = logging.getLogger(__name__)
TOPIC = "weir-verify"
GROUP = "weir-verify-group"


@dataclass
class Options:
    brokers: int = 3
    duration_s: float = 300.0
    nemesis: list[str] = field(default_factory=list)
    seed: int = 0
    workload: str = "produce-consume"
    report_dir: Path | None = None
    bootstrap: str | None = None      # a cluster of the user's own
    data_dir: Path | None = None      # a `weir up` directory: enables process faults
    keep_data: bool = False
    partitions: int = 4
    rate: float = 100.0               # sends per second
    group_members: int = 3
    topic: str = TOPIC
    quiet_s: tuple[float, float] = (3.0, 6.0)
    hold_s: tuple[float, float] = (3.0, 8.0)
    heal_timeout_s: float = 120.0
    windows: int | None = None        # exactly this many fault windows, then stop early


@dataclass
class Outcome:
    result: CheckResult
    history_path: Path
    report_index: Path
    errors: list[str]


def _say(msg: str) -> None:
    print(f"[verify {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Target:
    """The cluster under test: built here (LocalCluster behind proxies) or the user's own."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.cluster: Any = None
        self.zk: Any = None
        self.net: Any = None
        self.bootstrap = opts.bootstrap or ""
        self.tmp: Path | None = None
        self.owned = False
        self.nemesis: Nemesis | None = None

    def start(self) -> None:
        from weir.ops.cluster import LocalCluster

        opts = self.opts
        if opts.data_dir is not None:  # attach to a running `weir up` cluster
            from weir.coordination.zkserver import ZooKeeperServer

            self.cluster = LocalCluster(opts.data_dir)
            self.zk = ZooKeeperServer.attach(Path(opts.data_dir) / "zookeeper")
            self.bootstrap = opts.bootstrap or self.cluster.bootstrap
            return
        if opts.bootstrap:
            return
        self._start_builtin()

    def _start_builtin(self) -> None:
        from weir.coordination.zkserver import ZooKeeperServer
        from weir.ops.cluster import CHROOT, LocalCluster, free_port
        from weir.verify.proxy import ZOOKEEPER, ProxyNet

        self.owned = True
        self.tmp = Path(tempfile.mkdtemp(prefix="weir-verify-"))
        self.zk = ZooKeeperServer(self.tmp / "zookeeper")
        self.zk.start(timeout_s=60)
        self.net = ProxyNet(pids=self._broker_pids)
        per_broker, proxied = {}, []
        for b in range(1, self.opts.brokers + 1):
            listen = free_port()
            bp = self.net.add(f"broker-{b}", b, listen)
            zp = self.net.add(f"zookeeper-{b}", ZOOKEEPER, self.zk.port, fixed_source=b)
            per_broker[b] = {"listeners": f"PLAINTEXT://127.0.0.1:{listen}",
                             "advertised.listeners": f"PLAINTEXT://127.0.0.1:{bp.listen_port}",
                             "zookeeper.connect": f"127.0.0.1:{zp.listen_port}{CHROOT}"}
            proxied.append(f"127.0.0.1:{bp.listen_port}")
        replicas = min(3, self.opts.brokers)
        overrides = {"default.replication.factor": str(replicas),
                     "min.insync.replicas": str(min(2, replicas)),
                     "unclean.leader.election.enable": "false",
                     "replica.lag.time.max.ms": "10000"}
        self.cluster = LocalCluster(self.tmp, self.opts.brokers, port_base=0,
                                    overrides=overrides, broker_overrides=per_broker)
        self.cluster.start(timeout_s=90)
        self.bootstrap = ",".join(proxied)

    def _broker_pids(self) -> dict[int, int]:
        out = {}
        if self.cluster is not None:
            for b in self.cluster.broker_ids:
                pid = self.cluster.broker_pid(b)
                if pid:
                    out[pid] = b
        return out

    def restart_zookeeper(self) -> None:
        """Start ZooKeeper again on the same port and data (after a SIGKILL)."""
        from weir.coordination.zkserver import ZooKeeperServer

        if self.zk is not None and self.zk.is_running():
            return
        server = ZooKeeperServer(self.zk.data_dir, port=self.zk.port, host=self.zk.host)
        server.start(timeout_s=60)
        self.zk = server
        if self.nemesis is not None:
            self.nemesis.zookeeper = server

    def log_dirs(self) -> dict[int, Path]:
        if self.cluster is None:
            return {}
        from weir.config import effective_value, read_properties

        dirs = {}
        for b in self.cluster.broker_ids:
            props = read_properties(self.cluster.config_path(b))
            dirs[b] = Path(effective_value(props, "log.dirs")[0])
        return dirs

    def unfreeze(self) -> None:
        """After an interrupted run: no process left stopped, no link left cut."""
        import os
        import signal

        if self.net is not None:
            self.net.heal()
        pids = [self.zk.pid if self.zk is not None else None]
        if self.cluster is not None:
            pids += [self.cluster.broker_pid(b) for b in self.cluster.broker_ids]
        for pid in pids:
            if pid:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)

    def stop_brokers(self) -> None:
        if self.owned and self.cluster is not None:
            self.cluster.stop(timeout_s=30)

    def close(self) -> None:
        if not self.owned:
            return
        with contextlib.suppress(Exception):
            if self.cluster is not None:
                self.cluster.stop(timeout_s=20)
        with contextlib.suppress(Exception):
            if self.zk is not None:
                self.zk.stop()
        if self.net is not None:
            self.net.close()
        if self.tmp is not None and not self.opts.keep_data:
            shutil.rmtree(self.tmp, ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int, replicas: int,
                 timeout_s: float = 60) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": str(min(2, replicas)),
              "unclean.leader.election.enable": "false"}
    fut = admin.create_topics([NewTopic(topic, partitions, replicas, config=config)],
                              operation_timeout=timeout_s, request_timeout=timeout_s)
    try:
        fut[topic].result(timeout=timeout_s)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


def wait_isr_full(bootstrap: str, topic: str, timeout_s: float) -> bool:
    """Poll metadata until every partition has a leader and its ISR equals its replicas."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(topic, timeout=5).topics[topic]
            parts = md.partitions.values()
            if parts and all(p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas)
                             for p in parts):
                return True
        except (KafkaException, KeyError):
            pass
        time.sleep(0.5)
    return False


def run(opts: Options) -> Outcome:
    """The whole run (see module doc)."""
    faults = list(opts.nemesis)
    if faults and opts.bootstrap and opts.data_dir is None:
        raise ValueError("faults need process control: give --data-dir of a `weir up` "
                         "cluster, or let weir verify start its own (no --bootstrap)")
    if opts.data_dir is not None and NEEDS_PROXY & set(faults):
        raise ValueError("partition needs the proxies of the built-in cluster")
    report_dir = Path(opts.report_dir or f"weir-verify-{time.strftime('%Y%m%d-%H%M%S')}")
    history = History()
    meta = {"workload": opts.workload, "nemesis": faults, "seed": opts.seed,
            "topic": opts.topic, "partitions": opts.partitions, "duration_s": opts.duration_s,
            "brokers": opts.brokers, "rate": opts.rate}
    history.add("verify", "info", "config", meta)
    target = Target(opts)
    errors: list[str] = []
    workers: list[wl._Worker] = []
    try:
        _say("starting the cluster" if not opts.bootstrap else f"using {opts.bootstrap}")
        target.start()
        _say(f"bootstrap {target.bootstrap}"
             + (f", data {target.tmp}" if target.tmp is not None else ""))
        replicas = min(3, opts.brokers)
        create_topic(target.bootstrap, opts.topic, opts.partitions, replicas)
        if not wait_isr_full(target.bootstrap, opts.topic, 60):
            errors.append("the topic's ISRs were not full before the run")
        writer = wl.Writer(history, target.bootstrap, opts.topic, opts.partitions, opts.rate)
        workers.append(writer)
        if opts.workload == "groups":
            workers += [wl.GroupMember(history, target.bootstrap, opts.topic, GROUP, i)
                        for i in range(opts.group_members)]
        else:
            workers.append(wl.Reader(history, target.bootstrap, opts.topic, opts.partitions))
        for w in workers:
            w.start()
        steps = schedule(opts.seed, faults,
                         windows=opts.windows or max(1, int(opts.duration_s // 4)),
                         brokers=opts.brokers, quiet_s=opts.quiet_s, hold_s=opts.hold_s)
        if faults and target.cluster is not None:
            target.nemesis = Nemesis(target.cluster, history, steps, target.net, target.zk,
                                     target.restart_zookeeper)
            target.nemesis.start()
        _say(f"running {opts.workload} for {opts.duration_s:.0f}s, nemesis"
             f" {','.join(faults) or 'none'}, seed {opts.seed}")
        deadline = time.monotonic() + opts.duration_s
        while time.monotonic() < deadline:
            if (opts.windows and target.nemesis is not None
                    and not target.nemesis.running):
                break
            threading.Event().wait(min(0.5, max(deadline - time.monotonic(), 0)))
        if target.nemesis is not None:
            _say("healing")
            target.nemesis.stop()
            target.nemesis.heal_all()
            errors += target.nemesis.errors
        writer.stop(timeout_s=writer.flush_timeout_s + 30)
        full = wait_isr_full(target.bootstrap, opts.topic, opts.heal_timeout_s)
        history.add("verify", "info", "healed", {"isr_full": full})
        if not full:
            errors.append(f"ISRs not full {opts.heal_timeout_s:.0f}s after healing")
        _say(f"writer stopped after {writer.sent} sends; draining the consumers")
        _drain(history, workers, opts)
        if opts.workload == "groups":
            wl.read_committed(history, target.bootstrap, opts.topic, GROUP, opts.partitions)
        wl.final_read(history, target.bootstrap, opts.topic, opts.partitions)
        _say("final read done; comparing replicas")
        target.stop_brokers()
        _record_replicas(history, target, opts)
        errors += [f"{w.thread.name}: {w.error!r}" for w in workers if w.error is not None]
    finally:
        for w in workers:
            w.stop(timeout_s=10)
        if target.nemesis is not None:
            with contextlib.suppress(Exception):
                target.nemesis.stop(timeout_s=5)
            target.unfreeze()
        target.close()
    ops = history.snapshot()
    history_path = history.write(report_dir / "history.jsonl")
    result = check(ops)
    meta["errors"] = errors
    index = write_report(report_dir, ops, result, meta)
    return Outcome(result, history_path, index, errors)


def _drain(history: History, workers: list[wl._Worker], opts: Options,
           timeout_s: float = 60) -> None:
    """Let the consumers catch up with every acknowledged value, then stop them."""
    consumers = [w for w in workers if not isinstance(w, wl.Writer)]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ops = history.snapshot()
        acked = {op["value"]["value"] for op in ops
                 if op["f"] == "send" and op["type"] == "ok"}
        seen = {r[2] for op in ops if op["f"] == "poll" and op["type"] == "ok"
                and op["process"] != "final" for r in op["value"]["records"]}
        if acked <= seen:
            break
        time.sleep(1)
    for w in consumers:
        w.stop(timeout_s=30)


def _record_replicas(history: History, target: Target, opts: Options) -> None:
    dirs = target.log_dirs()
    if not dirs:
        return
    op_id = history.invoke("checker", "replicas", {"log_dirs": {b: str(d)
                                                                for b, d in dirs.items()}})
    reports = [r for p in range(opts.partitions)
               if (r := replica_report(dirs, opts.topic, p)) is not None]
    history.complete("checker", "ok", "replicas", op_id, {"partitions": reports})

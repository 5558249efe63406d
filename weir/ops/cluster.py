"""LocalCluster: a managed ZooKeeper plus N broker processes under one data directory.

The engine behind ``weir up``/``weir down`` and the integration tests.  Layout::

    <data_dir>/zookeeper/                 managed ZooKeeper data
    <data_dir>/broker-<id>/server.properties
    <data_dir>/broker-<id>/logs/          the broker's log.dirs
    <data_dir>/broker-<id>/broker.log     its stdout and stderr
    <data_dir>/cluster.json               what is running (pids), for other processes

Broker ids run from ``first_broker_id`` (default 1; Kafka's quickstart numbers from 0);
broker ``id`` listens on ``port_base + id - first_broker_id``.  Existing
``server.properties`` files are kept on restart: only ``zookeeper.connect`` (the managed
ZooKeeper may have a new port) and the ``overrides`` are written into them.
``broker_overrides`` (per broker id, applied after ``overrides``) set keys that differ between
brokers, e.g. ``weir verify`` points ``advertised.listeners`` and ``zookeeper.connect`` of each
broker at its own fault-injecting TCP proxy.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from weir.config import effective_value, parse_listener, read_properties, write_properties
from weir.ops import procs
from weir.ops.zkview import close_zk, open_zk, registered_brokers
from weir.ports import free_port
from weir.tables.settings import default_catalog_properties

CHROOT = "/weir"
LOOPBACK = "127.0.0.1"
LOCAL_SESSION_TIMEOUT_MS = 6000
CONFIG_HEADER = ("Written by weir (LocalCluster). Edit freely: this file is kept on restart;\n"
                 "weir rewrites only zookeeper.connect and keys given with --set.")


class ClusterError(RuntimeError):
    """The local cluster could not be started or reached."""


@dataclass
class BrokerSlot:
    """One broker of the local cluster and, when known, its process id."""

    id: int
    host: str
    port: int
    config: Path
    pid: int = 0
    started: bool = False  # has registered once: its listener port is settled

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "host": self.host, "port": self.port, "pid": self.pid,
                "config": str(self.config), "started": self.started}


def read_cluster_file(data_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The parsed ``cluster.json`` of ``data_dir``, or None when there is none."""
    path = Path(data_dir) / "cluster.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ClusterError(f"Cannot read {path}: {exc}") from exc


def port_in_use(host: str, port: int) -> bool:
    """Whether another socket is bound to ``host:port`` (SO_REUSEADDR, as the broker's own
    listener binds, so that a port in TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or LOOPBACK, port))
        except OSError:
            return True
    return False


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class LocalCluster:
    """Start, inspect and stop a local ZooKeeper + broker cluster (see module doc)."""

    def __init__(self, data_dir: str | os.PathLike[str], brokers: int = 3,
                 port_base: int = 9092, overrides: Mapping[str, str] | None = None,
                 *, session_timeout_ms: int = LOCAL_SESSION_TIMEOUT_MS,
                 broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
                 first_broker_id: int | None = None, log_dirs: int = 1) -> None:
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if first_broker_id is not None and first_broker_id < 0:
            raise ValueError("broker ids start at 0 or above")
        if port_base != 0 and not 1 <= port_base <= 65536 - brokers:
            raise ValueError(f"port base {port_base}: the ports of {brokers} broker(s) must "
                             f"lie in 1..65535")
        self.data_dir = Path(data_dir).resolve()
        self.num_brokers = brokers
        self.port_base = port_base
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.broker_overrides = {int(b): {k: str(v) for k, v in o.items()}
                                 for b, o in (broker_overrides or {}).items()}
        self.session_timeout_ms = session_timeout_ms
        if log_dirs < 1:
            raise ValueError("a broker needs at least one log dir")
        self.log_dirs = log_dirs  # per new broker: logs/, or logs-1/ ... logs-N/ (JBOD)
        self.zookeeper_connect: str | None = None
        self.zookeeper_pid = 0
        self._zk_server: Any = None
        self._zk_client: Any = None
        self._slots: dict[int, BrokerSlot] = {}
        self._popens: dict[int, subprocess.Popen] = {}
        self._stale_epochs: dict[int, int] = {}  # registrations left by a killed process
        self.first_broker_id = 1
        self.serve_metrics = False  # weir up --console: each broker gets a metrics.http.port
        self.console_url: str | None = None  # weir up --console (weir/console)
        self.console_pid = 0
        self.console_port = 0  # kept while the console is down: a restart reuses it
        self._console_died = False  # cluster.json still names a console that has exited
        self.secure: Any = None  # weir up --secure: a weir.ops.secure.SecureCluster
        # weir up --port-base given: it re-pins brokers that never started (a failed first
        # start); brokers that did start keep their server.properties' port (notes says so)
        self.port_base_explicit = False
        # Written into a new broker's server.properties only (under --set), as Kafka ships
        # config/server.properties with development values (weir up: up.DEV_BROKER_DEFAULTS)
        self.new_broker_defaults: dict[str, str] = {}
        self.notes: list[str] = []
        self.attached = False  # start() found ZooKeeper or a broker already running
        self.started_now: list[str] = []  # what start() launched: "ZooKeeper", "broker 2"
        self.added_now: list[int] = []  # brokers start() configured for the first time
        self._load_state()
        if first_broker_id is not None:
            self.first_broker_id = first_broker_id

    # -- state -------------------------------------------------------------------------------
    @property
    def cluster_file(self) -> Path:
        return self.data_dir / "cluster.json"

    def broker_dir(self, broker_id: int) -> Path:
        return self.data_dir / f"broker-{broker_id}"

    def broker_log_dirs(self, broker_id: int) -> list[Path]:
        """The ``log.dirs`` a new broker gets: ``logs/``, or ``logs-1/`` ... with JBOD."""
        base = self.broker_dir(broker_id)
        if self.log_dirs == 1:
            return [base / "logs"]
        return [base / f"logs-{i}" for i in range(1, self.log_dirs + 1)]

    def config_path(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "server.properties"

    def log_path(self, broker_id: int) -> Path:
        return self.broker_dir(broker_id) / "broker.log"

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._slots)

    @property
    def brokers(self) -> list[BrokerSlot]:
        return [self._slots[i] for i in self.broker_ids]

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of every broker, in id order."""
        return ",".join(f"{s.host}:{s.port}" for s in self.brokers)

    def _load_state(self) -> None:
        state = read_cluster_file(self.data_dir)
        if state is None:
            return
        self.zookeeper_connect = state.get("zookeeper")
        self.zookeeper_pid = int(state.get("zookeeper_pid") or 0)
        if state.get("first_broker_id") is not None:
            self.first_broker_id = int(state["first_broker_id"])
        self.console_url = state.get("console")
        self.console_pid = int(state.get("console_pid") or 0)
        self.console_port = int(state.get("console_port") or 0)
        if self.console_url and not self.console_alive():  # not kept as if it served
            self.console_url, self.console_pid = None, 0
            self._console_died = True
        for entry in state.get("brokers", []):
            slot = BrokerSlot(int(entry["id"]), entry["host"], int(entry["port"]),
                              Path(entry["config"]), int(entry.get("pid") or 0),
                              bool(entry.get("started", True)))
            self._slots[slot.id] = slot

    def to_json(self) -> dict[str, Any]:
        """The ``cluster.json`` document."""
        return {"zookeeper": self.zookeeper_connect, "zookeeper_pid": self.zookeeper_pid,
                "bootstrap": self.bootstrap, "first_broker_id": self.first_broker_id,
                "brokers": [s.to_json() for s in self.brokers],
                **({"console": self.console_url, "console_pid": self.console_pid}
                   if self.console_url else {}),
                **({"console_port": self.console_port} if self.console_port else {})}

    def save_state(self) -> None:
        """Write ``cluster.json`` atomically."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.cluster_file.with_name("cluster.json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.cluster_file)

    # -- configuration files -----------------------------------------------------------------
    def wanted_ids(self) -> list[int]:
        """``brokers`` ids from ``first_broker_id`` plus any broker already configured here."""
        first = self.first_broker_id
        ids = set(range(first, first + self.num_brokers)) | set(self._slots)
        if self.data_dir.is_dir():
            for path in self.data_dir.glob("broker-*/server.properties"):
                suffix = path.parent.name.removeprefix("broker-")
                if suffix.isdigit():
                    ids.add(int(suffix))
        return sorted(ids)

    def _new_port(self, broker_id: int) -> int:
        if self.port_base == 0:
            return free_port()
        return self.port_base + broker_id - self.first_broker_id

    def write_config(self, broker_id: int) -> BrokerSlot:
        """Create or update ``broker-<id>/server.properties``; returns its slot."""
        if self.zookeeper_connect is None:
            raise ClusterError("ZooKeeper is not started")
        path = self.config_path(broker_id)
        own = self.broker_overrides.get(broker_id, {})
        managed = {"zookeeper.connect": self.zookeeper_connect, **self.overrides, **own}
        if path.exists() and self._repin(broker_id):
            old = parse_listener(effective_value(read_properties(path), "listeners")[0])
            managed["listeners"] = f"{old.name}://{old.host}:{self._new_port(broker_id)}"
        if not path.exists():
            replicas = str(min(3, max(self.num_brokers, 1)))
            port = self._new_port(broker_id)
            secured = self.secure.broker_keys(broker_id, port) if self.secure else {}
            managed = {
                "broker.id": str(broker_id),
                "listeners": f"PLAINTEXT://{LOOPBACK}:{port}",
                "log.dirs": ",".join(str(d) for d in self.broker_log_dirs(broker_id)),
                "zookeeper.connect": self.zookeeper_connect,
                "zookeeper.session.timeout.ms": str(self.session_timeout_ms),
                "offsets.topic.replication.factor": replicas,
                "transaction.state.log.replication.factor": replicas,
                "transaction.state.log.min.isr": str(min(2, int(replicas))),
                **self.new_broker_defaults,
                **secured,
                # Topic tables: the embedded SQLite catalog shared by the brokers (tables.md).
                **default_catalog_properties(self.data_dir),
                **self.overrides,
                **own,
            }
        if self.secure is not None:  # server.properties holds the broker user's password
            path.parent.mkdir(parents=True, exist_ok=True)
            path.parent.chmod(0o700)
        if self.serve_metrics and "metrics.http.port" not in managed:
            kept = (effective_value(read_properties(path), "metrics.http.port")
                    if path.exists() else -1)
            managed["metrics.http.port"] = str(kept if kept > 0 else free_port())
        write_properties(path, managed, header=CONFIG_HEADER)
        props = read_properties(path)
        listener = parse_listener(effective_value(props, "listeners")[0])
        old = self._slots.get(broker_id)
        slot = BrokerSlot(broker_id, listener.host or LOOPBACK, listener.port, path,
                          old.pid if old else 0, old.started if old else False)
        self._slots[broker_id] = slot
        return slot

    def _repin(self, broker_id: int) -> bool:
        """Whether an explicit ``--port-base`` moves this broker: it has a config file but
        never started (a first start that failed, e.g. on a port in use)."""
        slot = self._slots.get(broker_id)
        return (self.port_base_explicit and self.port_base != 0
                and self.config_path(broker_id).exists()
                and not (slot is not None and slot.started)
                and self.broker_pid(broker_id) is None)

    def check_ports(self) -> None:
        """Before anything is written: every broker about to start can bind its port.

        Raises ClusterError naming the address in use and where the port comes from.  Also
        notes (``notes``) brokers whose data-dir port differs from an explicit --port-base.
        """
        for broker_id in self.wanted_ids():
            running = self.broker_pid(broker_id) is not None
            path = self.config_path(broker_id)
            pinned = path.exists() and (running or not self._repin(broker_id))
            if pinned:
                try:
                    host, port = parse_listener(
                        effective_value(read_properties(path), "listeners")[0])[1:]
                except (OSError, ValueError) as exc:
                    raise ClusterError(f"cannot read the listener of {path}: {exc}") from exc
                wanted = self._new_port(broker_id)
                if self.port_base_explicit and self.port_base and wanted != port:
                    self.notes.append(
                        f"broker {broker_id} keeps port {port} from {path} (a data dir's "
                        f"settings win over --port-base; edit its listeners= line, or use "
                        f"another --data-dir)")
            if running:
                continue  # it holds its port: nothing to check
            if not pinned:
                if self.port_base == 0:
                    continue  # a free port is drawn when its config is written
                host, port = LOOPBACK, self._new_port(broker_id)
            if port and port_in_use(host, port):
                where = (f"the listeners= line of {path}" if pinned
                         else f"--port-base {self.port_base}")
                raise ClusterError(f"{host or LOOPBACK}:{port} (broker {broker_id}, from "
                                   f"{where}) is already in use by another process")

    # -- ZooKeeper ---------------------------------------------------------------------------
    def _attached_zookeeper(self) -> Any:
        """Our ZooKeeperServer, or the one a previous ``weir up`` left running, or None."""
        if self._zk_server is None and (self.data_dir / "zookeeper").is_dir():
            from weir.coordination.zkserver import ZooKeeperServer

            self._zk_server = ZooKeeperServer.attach(self.data_dir / "zookeeper")
        return self._zk_server

    def _ensure_zookeeper(self) -> None:
        server = self._attached_zookeeper()
        if server is None:
            from weir.coordination.zkserver import ZooKeeperServer

            server = ZooKeeperServer(self.data_dir / "zookeeper")
            # kept before it is ready: a Ctrl-C while it starts (weir up) stops it too, where
            # nothing else records its pid yet
            self._zk_server = server
            server.start()
        self.zookeeper_pid = int(server.pid or 0)
        self.zookeeper_connect = f"{LOOPBACK}:{server.port}{CHROOT}"  # ZkClient creates it

    def zk(self) -> Any:
        """A ZkClient on the cluster's chroot (opened once, closed by :meth:`stop`)."""
        if self._zk_client is None:
            if not self.zookeeper_connect:
                raise ClusterError("no ZooKeeper recorded for this cluster")
            self._zk_client = open_zk(self.zookeeper_connect)
        return self._zk_client

    def disconnect(self) -> None:
        """Close this object's ZooKeeper session, leaving every process running (detach)."""
        self._close_zk()

    def _close_zk(self) -> None:
        client, self._zk_client = self._zk_client, None
        if client is not None:
            close_zk(client)

    def controller_id(self) -> int | None:
        """The current controller's broker id, or None when there is none."""
        cid = self.zk().get_controller_id()
        return None if cid is None or cid < 0 else int(cid)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout_s: float = 60) -> LocalCluster:
        """Start (or attach to) ZooKeeper and every broker not running; wait until ready.

        ``attached`` tells whether anything was already running, ``started_now`` what this
        call launched."""
        deadline = time.monotonic() + timeout_s
        self.check_ports()
        self.attached = self.running()
        self.started_now = [] if self._attached_zookeeper() is not None else ["ZooKeeper"]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._ensure_zookeeper()
        wanted = self.wanted_ids()
        self.added_now = [i for i in wanted if not self.config_path(i).exists()]
        for broker_id in wanted:
            self.write_config(broker_id)
        self.save_state()
        if self.secure is not None:  # SCRAM users before any broker authenticates
            self.secure.create_users(self.zk())
            self.secure.write_client_properties(self.bootstrap)
        for broker_id in self.broker_ids:
            if self.broker_pid(broker_id) is None:
                self.start_broker(broker_id)
                self.started_now.append(f"broker {broker_id}")
        self.wait_for_brokers(self.broker_ids, max(deadline - time.monotonic(), 0.1))
        for slot in self.brokers:
            slot.started = True
        self.wait_for_controller(max(deadline - time.monotonic(), 0.1))
        self.save_state()
        return self

    def running(self) -> bool:
        """Whether ZooKeeper or any broker of this data dir runs (a cluster to attach to)."""
        return (self._attached_zookeeper() is not None
                or any(self.broker_pid(i) is not None for i in self._slots))

    def start_broker(self, broker_id: int, stale_wait_s: float | None = None) -> int:
        """Launch one broker process; returns its pid (not waiting for it to register).

        When a killed predecessor's registration is still in ZooKeeper, first waits for
        its session to expire (up to ``stale_wait_s``; default 1.5 × the broker's
        ``zookeeper.session.timeout.ms`` + 2 s).
        """
        pid = self.broker_pid(broker_id)
        if pid is not None:
            return pid
        slot = self._slots.get(broker_id) or self.write_config(broker_id)
        if stale_wait_s is None:
            stale_wait_s = self._stale_wait_s(slot.config)
        self._await_stale_registration(broker_id, stale_wait_s)
        log_path = self.log_path(broker_id)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log_file:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            log_file.write(f"=== weir: starting broker {broker_id} at {stamp} ===\n".encode())
            log_file.flush()
            child = subprocess.Popen(
                procs.broker_command(slot.config), stdin=subprocess.DEVNULL, stdout=log_file,
                stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._popens[child.pid] = child
        slot.pid = child.pid
        self.save_state()
        return child.pid

    def _stale_wait_s(self, config: Path) -> float:
        """How long a dead process's registration can outlive it: its session timeout."""
        try:
            timeout_ms = effective_value(read_properties(config), "zookeeper.session.timeout.ms")
            return timeout_ms / 1000 * 1.5 + 2
        except (OSError, ValueError):
            return 30.0

    def _await_stale_registration(self, broker_id: int, timeout_s: float) -> None:
        """Wait (bounded) until a registration left by a dead process of this id expires.

        A broker cannot register while its predecessor's ephemeral ``/brokers/ids/<id>``
        lives on (until that session times out).  If it is still there after
        ``timeout_s``, it is remembered so :meth:`wait_for_brokers` ignores it.
        """
        self._stale_epochs.pop(broker_id, None)
        if self.zookeeper_connect is None:
            return
        deadline = time.monotonic() + timeout_s
        try:
            stale = registered_brokers(self.zk()).get(broker_id)
            if stale is None or stale < 0:
                return
            while registered_brokers(self.zk()).get(broker_id) == stale:
                if time.monotonic() >= deadline:
                    self._stale_epochs[broker_id] = stale
                    return
                time.sleep(0.1)
        except Exception:  # noqa: BLE001 - ZooKeeper unreachable: launch and let it report
            return

    def broker_pid(self, broker_id: int) -> int | None:
        """The pid of a running broker ``broker_id``, or None."""
        slot = self._slots.get(broker_id)
        if slot is None or not slot.pid:
            return None
        child = self._popens.get(slot.pid)
        if child is not None:
            return slot.pid if child.poll() is None else None
        return slot.pid if procs.is_broker_process(slot.pid, slot.config) else None

    def _signal(self, broker_id: int, sig: int) -> int:
        pid = self.broker_pid(broker_id)
        if pid is None:
            raise ClusterError(f"broker {broker_id} is not running")
        procs.send_signal(pid, sig)
        return pid

    def kill_broker(self, broker_id: int, sig: int = signal.SIGKILL, timeout_s: float = 10
                    ) -> int:
        """Send ``sig`` (default SIGKILL) and, for SIGKILL, wait until the process is gone."""
        pid = self._signal(broker_id, sig)
        if sig == signal.SIGKILL:
            procs.wait_for_exit([pid], timeout_s, self._popens)
        return pid

    def stop_broker(self, broker_id: int, timeout_s: float = 30) -> None:
        """SIGTERM (clean shutdown), SIGKILL after ``timeout_s``."""
        pid = self.broker_pid(broker_id)
        if pid is not None:
            procs.terminate([pid], timeout_s, self._popens)

    def pause_broker(self, broker_id: int) -> int:
        """SIGSTOP: the process freezes (its ZooKeeper session will expire)."""
        return self._signal(broker_id, signal.SIGSTOP)

    def resume_broker(self, broker_id: int) -> int:
        return self._signal(broker_id, signal.SIGCONT)

    def stop(self, timeout_s: float = 30) -> None:
        """Stop every broker (SIGTERM, SIGKILL after ``timeout_s``), then ZooKeeper.

        Brokers stop one at a time, the controller last, so that each one's controlled
        shutdown can move its leaders to brokers still running."""
        self.stop_console(timeout_s)
        controller = self._controller_for_stop_order()
        order = sorted(self.broker_ids, key=lambda i: i == controller)
        for broker_id in order:
            pid = self.broker_pid(broker_id)
            if pid is not None:
                procs.terminate([pid], timeout_s, self._popens)
        self._close_zk()
        server = self._attached_zookeeper()
        if server is not None:
            server.stop()
            self._zk_server = None
        if self.cluster_file.exists() or self._slots:
            self.save_state()

    # -- web console (weir up --console) ---------------------------------------------------
    def start_console(self, port: int = 0, timeout_s: float = 30) -> str:
        """Run ``weir console`` on this cluster; returns its URL once it answers, recorded as
        ``console`` in cluster.json.  :meth:`stop` stops it.

        The port (0: the one it had before, else a free one) is kept as ``console_port``,
        also while the console is down, so that a restart serves the same URL."""
        if self.console_url and self.console_alive():
            return self.console_url
        port = port or self.console_port or free_port()
        if port_in_use(LOOPBACK, port):
            raise ClusterError(f"{LOOPBACK}:{port} (the console's port) is already in use "
                               f"by another process; choose another with --console-port")
        log_path = self.data_dir / "console.log"
        with open(log_path, "ab") as log_file:
            child = subprocess.Popen(
                [sys.executable, "-m", "weir", "console", "--data-dir",
                 str(self.data_dir), "--port", str(port)],
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                start_new_session=True)
        self._popens[child.pid] = child
        url = f"http://{LOOPBACK}:{port}/"
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with socket.create_connection((LOOPBACK, port), timeout=1):
                    break
            except OSError:
                if child.poll() is not None or time.monotonic() >= deadline:
                    procs.terminate([child.pid], 5, self._popens)
                    raise ClusterError(f"the console did not start:\n{log_tail(log_path)}"
                                       ) from None
                time.sleep(0.1)
        self.console_url, self.console_pid, self.console_port = url, child.pid, port
        self.save_state()
        return url

    def console_alive(self) -> bool:
        """Whether the recorded console process runs (``weir console`` on this data dir)."""
        pid = self.console_pid
        child = self._popens.get(pid) if pid else None
        if child is not None:
            return child.poll() is None
        argv = procs.pid_cmdline(pid) if procs.pid_alive(pid) else None
        return bool(argv and "console" in argv and str(self.data_dir) in argv)

    def forget_dead_console(self) -> bool:
        """Drop the URL of a console that has exited from cluster.json; True if it had."""
        if self.console_url and not self.console_alive():
            self.console_url, self.console_pid = None, 0
            self._console_died = True
        if not self._console_died:
            return False
        self._console_died = False
        self.save_state()
        return True

    def stop_console(self, timeout_s: float = 10) -> None:
        alive = self.console_alive()
        pid, self.console_pid, self.console_url = self.console_pid, 0, None
        if alive:
            procs.terminate([pid], timeout_s, self._popens)

    def _controller_for_stop_order(self) -> int | None:
        """The controller's id from a short-lived session (None if ZooKeeper is not up).

        A fresh client with a short timeout: a kept client whose server has gone would block.
        """
        server = self._attached_zookeeper()
        if server is None or not server.is_running() or not self.zookeeper_connect:
            return None
        try:
            client = open_zk(self.zookeeper_connect, timeout_s=3)
        except Exception:  # noqa: BLE001 - the order is a nicety; stopping must go on
            return None
        try:
            cid = client.get_controller_id()
        except Exception:  # noqa: BLE001
            cid = None
        finally:
            close_zk(client)
        return None if cid is None or cid < 0 else int(cid)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- waiting -----------------------------------------------------------------------------
    def wait_for_brokers(self, ids: Iterable[int], timeout_s: float = 30) -> None:
        """Poll ZooKeeper until every broker in ``ids`` is registered (TimeoutError).

        A registration still left by a process killed before :meth:`start_broker` does not
        count: the new process must register itself.
        """
        wanted = set(ids)
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_children(wanted)
            current = registered_brokers(self.zk())
            missing = {i for i in wanted
                       if i not in current or current[i] == self._stale_epochs.get(i, -2)}
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"brokers {sorted(missing)} did not register in ZooKeeper"
                                   f" within {timeout_s:.0f}s{self._log_tails(missing)}")
            time.sleep(0.1)

    def wait_for_controller(self, timeout_s: float = 30) -> int:
        """Poll until a controller is elected; returns its id (TimeoutError)."""
        deadline = time.monotonic() + timeout_s
        while True:
            cid = self.controller_id()
            if cid is not None:
                return cid
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no controller elected within {timeout_s:.0f}s")
            time.sleep(0.1)

    def _check_children(self, ids: set[int]) -> None:
        """Fail fast when a broker we launched has already exited."""
        for broker_id in ids:
            slot = self._slots.get(broker_id)
            child = self._popens.get(slot.pid) if slot else None
            if child is not None and child.poll() is not None:
                log = self.log_path(broker_id)
                if "address already in use" in log_tail(log, 40).lower():
                    raise ClusterError(
                        f"broker {broker_id} could not listen on {slot.host}:{slot.port}: the "
                        f"address is already in use by another process (its listeners= line "
                        f"is in {slot.config}; log: {log})" + (
                            "; it never started, so weir up --port-base N moves it"
                            if not slot.started else ""))
                raise ClusterError(f"broker {broker_id} exited with code {child.returncode}"
                                   f"{self._log_tails([broker_id])}")

    def _log_tails(self, ids: Iterable[int]) -> str:
        return "".join(f"\n--- {self.log_path(i)} (tail) ---\n{log_tail(self.log_path(i))}"
                       for i in sorted(ids))


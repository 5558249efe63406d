"""A managed local ZooKeeper server, for tests and ``weir up``.

Runs Debian's ZooKeeper (``libzookeeper-java``) as a standalone ``ZooKeeperServerMain``
in its own process group, with its config, data, log and a small ``server.json``
(pid and port) in one directory, so that a later process can :meth:`attach` and stop it.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from weir.ports import free_port
from weir.processes import pid_alive

JAVA_DIR = Path("/usr/share/java")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
STATE_FILE = "server.json"
CONFIG_FILE = "zoo.cfg"
LOG_FILE = "zookeeper.log"

# What ZooKeeperServerMain loads, by Debian package (the client shell's jline is not needed).
_REQUIRED_JARS = {
    "zookeeper.jar": "libzookeeper-java",
    "zookeeper-jute.jar": "libzookeeper-java",
    "slf4j-api.jar": "libslf4j-java",
    "netty-common.jar": "libnetty-java",
    "netty-buffer.jar": "libnetty-java",
    "netty-transport.jar": "libnetty-java",
    "netty-handler.jar": "libnetty-java",
    "commons-io.jar": "libcommons-io-java",
    "commons-cli.jar": "libcommons-cli-java",
    "metrics-core.jar": "libdropwizard-metrics-java",
}
_OPTIONAL_JARS = (
    "netty-transport-native-epoll.jar",
    "netty-resolver.jar",
    "netty-codec.jar",
    "snappy-java.jar",
    "jackson-core.jar",
    "jackson-databind.jar",
    "jackson-annotations.jar",
    "findbugs-annotations.jar",
    "slf4j-simple.jar",  # a logging backend: ZooKeeper's log goes to zookeeper.log
)


class ZooKeeperNotFound(RuntimeError):
    """ZooKeeper's jars (or java) are not installed."""


class ZooKeeperStartError(RuntimeError):
    """The server did not come up in time; the message holds the log's tail."""


def find_zookeeper_classpath(java_dir: Path = JAVA_DIR) -> str:
    """The classpath for ZooKeeperServerMain from Debian's jars in ``java_dir``."""
    missing = {pkg for jar, pkg in _REQUIRED_JARS.items() if not (java_dir / jar).exists()}
    if missing:
        raise ZooKeeperNotFound(
            f"ZooKeeper jars missing from {java_dir}; install the Debian package(s) "
            f"{', '.join(sorted(missing))} (`apt-get install zookeeper`)"
        )
    jars = list(_REQUIRED_JARS) + [j for j in _OPTIONAL_JARS if (java_dir / j).exists()]
    return os.pathsep.join(str(java_dir / jar) for jar in jars)


def _ruok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """ZooKeeper's ``ruok`` four-letter word: True once the server serves requests."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False


def _session_ok(connect: str, timeout_s: float) -> bool:
    """True once a kazoo client gets a session (``ruok`` answers a little earlier)."""
    client = KazooClient(hosts=connect, timeout=10.0)
    try:
        client.start(timeout=max(0.5, min(timeout_s, 10.0)))
        return True
    except (KazooTimeoutError, KazooException):
        return False
    finally:
        client.stop()
        client.close()


def _is_zookeeper(pid: int) -> bool:
    """Guards against a recycled pid: the process must be a ZooKeeperServerMain."""
    try:
        return MAIN_CLASS.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class ZooKeeperServer:
    """One standalone ZooKeeper on loopback, its files under ``data_dir``."""

    def __init__(self, data_dir: Path, port: int = 0, host: str = "127.0.0.1") -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self._requested_port = port
        self._port = port
        self._pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._pid

    @property
    def port(self) -> int:
        return self._port

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self._port}"

    def _write_config(self) -> Path:
        (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        lines = [
            f"dataDir={self.data_dir / 'data'}",
            f"clientPort={self._port}",
            f"clientPortAddress={self.host}",
            "tickTime=500",
            "minSessionTimeout=1000",
            "maxSessionTimeout=60000",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        path = self.data_dir / CONFIG_FILE
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self, timeout_s: float = 60) -> None:
        """Start the server and wait until it answers; raises ZooKeeperStartError."""
        if self.is_running():
            return
        classpath = find_zookeeper_classpath()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._port = self._requested_port or free_port(self.host)
        config = self._write_config()
        cmd = [
            "java",
            "-Xmx256m",
            "-Xms32m",
            "-XX:+UseSerialGC",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(config),
        ]
        with open(self.data_dir / LOG_FILE, "ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.data_dir,
                start_new_session=True,
            )
        self._pid = self._proc.pid
        self._wait_ready(timeout_s)
        (self.data_dir / STATE_FILE).write_text(
            json.dumps({"pid": self._pid, "port": self._port, "host": self.host})
        )

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                break
            if _ruok(self.host, self._port) and _session_ok(
                self.connect_string, deadline - time.monotonic()
            ):
                return
            time.sleep(0.05)
        tail = self.log_tail()
        self.stop()
        raise ZooKeeperStartError(
            f"ZooKeeper did not start on {self.connect_string} within {timeout_s}s:\n{tail}"
        )

    def log_tail(self, lines: int = 30) -> str:
        path = self.data_dir / LOG_FILE
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def is_running(self) -> bool:
        if self._pid is None:
            return False
        if self._proc is not None:
            return self._proc.poll() is None
        return pid_alive(self._pid)

    def stop(self, timeout_s: float = 10) -> None:
        """SIGTERM the server, SIGKILL it after ``timeout_s``; forget its state file."""
        pid = self._pid
        if pid is not None and self.is_running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not self._wait_exit(timeout_s):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._wait_exit(5)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=1)
        self._pid = None
        self._proc = None
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / STATE_FILE).unlink()

    def _wait_exit(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None:
                if self._proc.poll() is not None:
                    return True
            elif self._pid is None or not pid_alive(self._pid):
                return True
            time.sleep(0.05)
        return False

    @classmethod
    def attach(cls, data_dir: Path) -> "ZooKeeperServer | None":
        """The server recorded in ``data_dir`` if it is still alive and answering."""
        state_path = Path(data_dir) / STATE_FILE
        try:
            state = json.loads(state_path.read_text())
        except (FileNotFoundError, ValueError):
            return None
        server = cls(Path(data_dir), port=int(state["port"]), host=state.get("host", "127.0.0.1"))
        server._pid = int(state["pid"])
        if not server.is_running() or not _is_zookeeper(server._pid):
            return None
        if not _ruok(server.host, server.port):
            return None
        return server

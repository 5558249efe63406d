"""Network partitions without privileges: a TCP proxy in front of every broker.

Each broker advertises (``advertised.listeners``) the port of its proxy, so clients *and*
inter-broker traffic (followers fetching from leaders, the controller's LeaderAndIsr and
UpdateMetadata requests) reach it through the proxy; each broker's ``zookeeper.connect``
points at its own proxy to ZooKeeper.  Jepsen cuts links with iptables; here a link is cut by
the proxy: a partition *isolates* a broker, and every proxied connection with that broker at
either end is blackholed (bytes are held, not forwarded, as with dropped packets; TCP
retransmits them once the link heals, so held bytes flow on after healing).  New connections
through a cut link are accepted but not connected upstream until it heals (a SYN that gets
no answer).

The source of a connection arriving at a broker's proxy is found from ``/proc``: the peer's
port is looked up in ``/proc/net/tcp`` and the socket inode in the brokers' ``/proc/<pid>/fd``
(our own processes, no privileges needed).  A connection from no broker is a client's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"
CLIENT = "client"
ZOOKEEPER = "zookeeper"


def _inode_of(local_port: int, remote_port: int) -> str | None:
    """The socket inode of the loopback TCP connection ``local_port -> remote_port``."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                next(fh, None)
                for line in fh:
                    parts = line.split()
                    if len(parts) < 10:
                        continue
                    lport = int(parts[1].rsplit(":", 1)[1], 16)
                    rport = int(parts[2].rsplit(":", 1)[1], 16)
                    if lport == local_port and rport == remote_port:
                        return parts[9]
        except OSError:
            continue
    return None


def owner_of_connection(peer_port: int, proxy_port: int,
                        pids: Mapping[int, object]) -> object | None:
    """Which of ``pids`` ({pid: name}) holds the socket connected from ``peer_port``."""
    inode = _inode_of(peer_port, proxy_port)
    if inode is None:
        return None
    wanted = f"socket:[{inode}]"
    for pid, name in pids.items():
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") == wanted:
                    return name
            except OSError:
                continue
    return None


@dataclass
class Proxy:
    """One listening port forwarding to ``upstream_port``; ``dest`` names what it fronts."""

    name: str
    dest: object
    upstream_port: int
    listen_port: int = 0
    fixed_source: object | None = None  # a broker's own ZooKeeper proxy knows its source
    server: asyncio.AbstractServer | None = None
    connections: int = 0
    held_bytes: int = 0
    tasks: set[asyncio.Task] = field(default_factory=set)


class ProxyNet:
    """Proxies on one asyncio loop in a background thread, and the cut links between them."""

    def __init__(self, pids: Callable[[], Mapping[int, object]] = dict) -> None:
        self._pids = pids  # {pid: broker id} of the processes behind the proxies
        self._isolated: set[object] = set()
        self.proxies: dict[str, Proxy] = {}
        self._loop = asyncio.new_event_loop()
        self._changed: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="weir-verify-proxy", daemon=True)
        self._ready = threading.Event()
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._changed = asyncio.Event()
        self._ready.set()
        self._loop.run_forever()

    def _call(self, coro, timeout_s: float = 10):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    # -- configuration ---------------------------------------------------------------------
    def add(self, name: str, dest: object, upstream_port: int, listen_port: int = 0,
            fixed_source: object | None = None) -> Proxy:
        """Start a proxy; returns it with its ``listen_port`` set."""
        proxy = Proxy(name, dest, upstream_port, listen_port, fixed_source)
        self._call(self._listen(proxy))
        self.proxies[name] = proxy
        return proxy

    async def _listen(self, proxy: Proxy) -> None:
        proxy.server = await asyncio.start_server(
            lambda r, w: self._accept(proxy, r, w), LOOPBACK, proxy.listen_port,
            reuse_address=True)
        proxy.listen_port = proxy.server.sockets[0].getsockname()[1]

    # -- partitions ------------------------------------------------------------------------
    def isolate(self, node: object) -> None:
        """Cut every link between ``node`` (a broker id) and anything else."""
        self._loop.call_soon_threadsafe(self._set, self._isolated | {node})

    def heal(self, node: object | None = None) -> None:
        """Restore the links of ``node`` (of every node when None)."""
        rest = set() if node is None else self._isolated - {node}
        self._loop.call_soon_threadsafe(self._set, rest)

    @property
    def isolated(self) -> set[object]:
        return set(self._isolated)

    def _set(self, isolated: set[object]) -> None:
        self._isolated = isolated
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    def _cut(self, src: object, dst: object) -> bool:
        return src in self._isolated or dst in self._isolated

    async def _until_linked(self, src: object, dst: object) -> None:
        while self._cut(src, dst):
            assert self._changed is not None
            await self._changed.wait()

    # -- forwarding ------------------------------------------------------------------------
    async def _accept(self, proxy: Proxy, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            proxy.tasks.add(task)
        up_writer = None
        try:
            src = proxy.fixed_source
            if src is None:
                peer_port = writer.get_extra_info("peername")[1]
                src = await asyncio.get_running_loop().run_in_executor(
                    None, owner_of_connection, peer_port, proxy.listen_port, self._pids())
                src = CLIENT if src is None else src
            await self._until_linked(src, proxy.dest)
            try:
                up_reader, up_writer = await asyncio.open_connection(LOOPBACK,
                                                                     proxy.upstream_port)
            except OSError:
                return
            proxy.connections += 1
            pumps = [asyncio.ensure_future(self._pump(proxy, reader, up_writer, src)),
                     asyncio.ensure_future(self._pump(proxy, up_reader, writer, src))]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_writer):
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()
            if task is not None:
                proxy.tasks.discard(task)

    async def _pump(self, proxy: Proxy, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter, src: object) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                if self._cut(src, proxy.dest):
                    proxy.held_bytes += len(data)
                    await self._until_linked(src, proxy.dest)
                writer.write(data)
                await writer.drain()

    # -- shutdown --------------------------------------------------------------------------
    def close(self) -> None:
        if not self._loop.is_running():
            return
        with contextlib.suppress(Exception):
            self._call(self._close_all())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _close_all(self) -> None:
        self._set(set())
        for proxy in self.proxies.values():
            if proxy.server is not None:
                proxy.server.close()
            for task in list(proxy.tasks):
                task.cancel()
        await asyncio.sleep(0)

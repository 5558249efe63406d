"""A ZooKeeper ensemble at the znode level, and one session's kazoo client, for the
simulation.

:class:`ZnodeTree` is the ensemble: znodes with data and ZooKeeper's ``Stat`` (``czxid``,
``mzxid``, ``pzxid``, ``version``, ``cversion``, ``ephemeralOwner``, ...), persistent,
ephemeral and sequential creates (numbered by the children created under the parent so
far: a real ZooKeeper's deletions move the parent's ``cversion`` but not the numbering), conditional ``setData`` and ``delete``,
``check``, and ``multi`` transactions that apply all of their operations or none (a failed
one answers, as the server does, ``RolledBackError`` for the operations before the one that
failed, its own error, and ``RuntimeInconsistency`` after it).  Sessions own their
ephemeral nodes: expiring one deletes them and drops its watches.  Watches are ZooKeeper's:
one-shot data, exists and child watches, delivered to each session in order (a FIFO per
session) after ``schedule(latency(), ...)`` of the simulation's clock, so the order of
events is fixed by the seed.

:class:`SimKazoo` is what :class:`weir.coordination.zk.ZkClient` calls on
``kazoo.client.KazooClient`` — ``get``/``exists``/``get_children`` with watches,
``create``/``set``/``delete``/``ensure_path``, their ``_async`` forms, ``transaction()``,
session listeners, the ``DataWatch``/``ChildrenWatch`` recipes, and the ``multiRead``
request of :mod:`weir.coordination.multi_read` — over one session of a tree.  Errors are
kazoo's exception types (``NodeExistsError``, ``NoNodeError``, ``BadVersionError``,
``NotEmptyError``, ``NoChildrenForEphemeralsError``; ``SessionExpiredError`` on an expired
session, ``ConnectionClosedError`` once the client is closed), so the production client,
codecs, fenced multi-ops and controller writes run unchanged above it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    ConnectionClosedError,
    KazooException,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat

__all__ = ["SimKazoo", "ZnodeTree"]

Schedule = Callable[[int, Callable[[], None]], None]
"""``schedule(delay_ms, fn)``: run ``fn`` later (the simulation's clock)."""
Watcher = Callable[[WatchedEvent], Any]


class Znode:
    __slots__ = ("children", "cversion", "czxid", "data", "mzxid", "owner", "pzxid",
                 "sequence", "version")

    def __init__(self, data: bytes, zxid: int, owner: int) -> None:
        self.data = data
        self.czxid = self.mzxid = self.pzxid = zxid
        self.version = self.cversion = 0
        self.sequence = 0
        """The next sequential child's number: the children created so far (a deletion
        moves ``cversion`` but not this, as a real ZooKeeper numbers them)."""
        self.owner = owner
        self.children: set[str] = set()

    def stat(self) -> ZnodeStat:
        # ctime/mtime carry the zxids: the simulation has no wall clock in its znodes.
        return ZnodeStat(self.czxid, self.mzxid, self.czxid, self.mzxid, self.version,
                         self.cversion, 0, self.owner, len(self.data), len(self.children),
                         self.pzxid)


def _parent(path: str) -> str:
    head = path.rpartition("/")[0]
    return head or "/"


def _check_path(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise BadArgumentsError(f"invalid znode path {path!r}")


# One operation of a multi (kazoo's transaction request kinds).
Op = tuple[Any, ...]


class ZnodeTree:
    """The simulated ensemble: one consistent tree (latency lives in ``schedule``)."""

    def __init__(self, schedule: Schedule | None = None,
                 latency: Callable[[], int] = lambda: 1) -> None:
        self.zxid = 0
        self.nodes: dict[str, Znode] = {"/": Znode(b"", 0, 0)}
        self.sessions: dict[int, bool] = {}
        self.writer = -1
        """Who made the current write (the simulation's broker id; -1: an admin tool)."""
        self.on_write: Callable[[str, Znode | None, Znode], None] = lambda path, old, new: None
        """Called after a committed create or setData of ``path`` with the node as it was
        (None: created) and as it is."""
        self._schedule = schedule
        self._latency = latency
        self._next_session = 1
        self._data_watches: dict[str, list[tuple[int, Watcher]]] = {}
        self._child_watches: dict[str, list[tuple[int, Watcher]]] = {}
        self._outbox: dict[int, deque[Callable[[], None]]] = {}

    # -- sessions --------------------------------------------------------------------------

    def open_session(self) -> int:
        session = self._next_session
        self._next_session += 1
        self.sessions[session] = True
        self._outbox[session] = deque()
        return session

    def alive(self, session: int) -> bool:
        return bool(self.sessions.get(session))

    def expire(self, session: int) -> bool:
        """End a session (expiry or a clean close): its watches and undelivered events go,
        then its ephemeral nodes, in one transaction.  False if it had already ended."""
        if not self.sessions.get(session):
            return False
        self.sessions[session] = False
        self._outbox.pop(session, None)
        for table in (self._data_watches, self._child_watches):
            for path in list(table):
                kept = [w for w in table[path] if w[0] != session]
                if kept:
                    table[path] = kept
                else:
                    del table[path]
        owned = sorted((p for p, n in self.nodes.items() if n.owner == session), reverse=True)
        if owned:
            self.multi(0, [("delete", p, -1) for p in owned])
        return True

    def post(self, session: int, fn: Callable[[], None]) -> None:
        """Run ``fn`` as an event of ``session``: after every event queued before it, and
        only while the session lives."""
        outbox = self._outbox.get(session)
        if outbox is None:
            return
        outbox.append(fn)
        if self._schedule is None:
            self._deliver(session)
        else:
            self._schedule(self._latency(), lambda: self._deliver(session))

    def _deliver(self, session: int) -> None:
        outbox = self._outbox.get(session)
        if outbox:
            outbox.popleft()()

    # -- reads -----------------------------------------------------------------------------

    def get(self, session: int, path: str, watch: Watcher | None = None
            ) -> tuple[bytes, ZnodeStat]:
        node = self.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch is not None:
            self._data_watches.setdefault(path, []).append((session, watch))
        return node.data, node.stat()

    def exists(self, session: int, path: str, watch: Watcher | None = None
               ) -> ZnodeStat | None:
        if watch is not None:
            self._data_watches.setdefault(path, []).append((session, watch))
        node = self.nodes.get(path)
        return None if node is None else node.stat()

    def get_children(self, session: int, path: str, watch: Watcher | None = None
                     ) -> list[str]:
        node = self.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if watch is not None:
            self._child_watches.setdefault(path, []).append((session, watch))
        return sorted(node.children)

    # -- writes ----------------------------------------------------------------------------

    def multi(self, session: int, ops: list[Op]) -> list[Any]:
        """Apply ``ops`` all or none; one result per operation (a path, a stat, True) or,
        when one failed, the per-operation errors ZooKeeper answers."""
        self.zxid += 1
        zxid = self.zxid
        undo: list[Callable[[], None]] = []
        changes: list[tuple[str, str, Znode | None]] = []
        results: list[Any] = []
        for op in ops:
            try:
                results.append(self._apply(op, session, zxid, undo, changes))
            except KazooException as exc:
                for step in reversed(undo):
                    step()
                failed = len(results)
                return ([RolledBackError()] * failed + [exc]
                        + [RuntimeInconsistency()] * (len(ops) - failed - 1))
        self._commit(changes)
        return results

    def _apply(self, op: Op, session: int, zxid: int, undo: list[Callable[[], None]],
               changes: list[tuple[str, str, Znode | None]]) -> Any:
        kind, path = op[0], op[1]
        _check_path(path)
        if kind == "create":
            return self._create(path, *op[2:], session=session, zxid=zxid, undo=undo,
                                changes=changes)
        node = self.nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        if kind == "check":
            if op[2] != -1 and op[2] != node.version:
                raise BadVersionError(path)
            return True
        if kind == "set":
            data, version = op[2], op[3]
            if version != -1 and version != node.version:
                raise BadVersionError(path)
            old = Znode(node.data, node.czxid, node.owner)
            old.mzxid, old.version, old.cversion = node.mzxid, node.version, node.cversion
            node.data, node.mzxid, node.version = data, zxid, node.version + 1

            def unset(node: Znode = node, old: Znode = old) -> None:
                node.data, node.mzxid, node.version = old.data, old.mzxid, old.version
            undo.append(unset)
            changes.append(("changed", path, old))
            return node.stat()
        if kind == "delete":
            if op[2] != -1 and op[2] != node.version:
                raise BadVersionError(path)
            if node.children:
                raise NotEmptyError(path)
            parent_path = _parent(path)
            self._unlink(path, parent_path, zxid, undo)
            changes.append(("deleted", path, node))
            changes.append(("children", parent_path, None))
            return True
        raise ValueError(f"unknown operation {kind!r}")

    def _create(self, path: str, data: bytes, ephemeral: bool, sequence: bool, *,
                session: int, zxid: int, undo: list[Callable[[], None]],
                changes: list[tuple[str, str, Znode | None]]) -> str:
        parent_path = _parent(path)
        parent = self.nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(parent_path)
        if parent.owner:
            raise NoChildrenForEphemeralsError(parent_path)
        if sequence:
            path = f"{path}{parent.sequence:010d}"
        if path in self.nodes:
            raise NodeExistsError(path)
        self.nodes[path] = Znode(data, zxid, session if ephemeral else 0)
        name = path.rpartition("/")[2]
        old_pzxid = parent.pzxid
        parent.children.add(name)
        parent.cversion += 1
        parent.sequence += 1
        parent.pzxid = zxid

        def uncreate() -> None:
            del self.nodes[path]
            parent.children.discard(name)
            parent.cversion -= 1
            parent.sequence -= 1
            parent.pzxid = old_pzxid
        undo.append(uncreate)
        changes.append(("created", path, None))
        changes.append(("children", parent_path, None))
        return path

    def _unlink(self, path: str, parent_path: str, zxid: int,
                undo: list[Callable[[], None]]) -> None:
        node = self.nodes.pop(path)
        parent = self.nodes[parent_path]
        name = path.rpartition("/")[2]
        old_pzxid = parent.pzxid
        parent.children.discard(name)
        parent.cversion += 1
        parent.pzxid = zxid

        def relink() -> None:
            self.nodes[path] = node
            parent.children.add(name)
            parent.cversion -= 1
            parent.pzxid = old_pzxid
        undo.append(relink)

    def _commit(self, changes: list[tuple[str, str, Znode | None]]) -> None:
        for kind, path, old in changes:
            if kind in ("created", "changed"):
                self.on_write(path, old, self.nodes[path])
        for kind, path, _ in changes:
            if kind == "children":
                self._fire(self._child_watches, path, EventType.CHILD)
            elif kind == "created":
                self._fire(self._data_watches, path, EventType.CREATED)
            elif kind == "changed":
                self._fire(self._data_watches, path, EventType.CHANGED)
            else:
                self._fire(self._data_watches, path, EventType.DELETED)
                self._fire(self._child_watches, path, EventType.DELETED)

    def _fire(self, table: dict[str, list[tuple[int, Watcher]]], path: str,
              event_type: str) -> None:
        watches = table.pop(path, None)
        if not watches:
            return
        seen: set[tuple[int, Watcher]] = set()
        event = WatchedEvent(event_type, KazooState.CONNECTED, path)
        for session, watcher in watches:
            if (session, watcher) in seen:  # ZooKeeper keeps one per (path, watcher)
                continue
            seen.add((session, watcher))
            self.post(session, lambda w=watcher: w(event))


class _Result:
    """kazoo's ``IAsyncResult``, already settled (the fake answers at once)."""

    def __init__(self) -> None:
        self._value: Any = None
        self._exc: BaseException | None = None

    def set(self, value: Any = None) -> None:
        self._value = value

    def set_exception(self, exc: BaseException) -> None:
        self._exc = exc

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if self._exc is not None:
            raise self._exc
        return self._value


def _settled(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> _Result:
    result = _Result()
    try:
        result.set(fn(*args, **kwargs))
    except KazooException as exc:
        result.set_exception(exc)
    return result


class _Handler:
    """The part of kazoo's handler :mod:`weir.coordination.multi_read` uses."""

    @staticmethod
    def async_result() -> _Result:
        return _Result()


class _Transaction:
    """kazoo's ``TransactionRequest``: collect operations, commit them as one multi."""

    def __init__(self, client: SimKazoo) -> None:
        self._client = client
        self._ops: list[Op] = []

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False) -> None:
        self._ops.append(("create", path, value, ephemeral, sequence))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._ops.append(("set", path, value, version))

    def delete(self, path: str, version: int = -1) -> None:
        self._ops.append(("delete", path, version))

    def check(self, path: str, version: int) -> None:
        self._ops.append(("check", path, version))

    def commit(self) -> list[Any]:
        return self._client.multi(self._ops)

    def commit_async(self) -> _Result:
        return _settled(self.commit)


class SimKazoo:
    """One client of a :class:`ZnodeTree`, with the calls ``ZkClient`` makes on kazoo."""

    chroot = ""
    handler = _Handler()

    def __init__(self, tree: ZnodeTree, writer: int = -1,
                 closed_error: type[Exception] = ConnectionClosedError,
                 expired_error: type[Exception] = SessionExpiredError) -> None:
        """``closed_error`` and ``expired_error`` are raised by calls on a closed client
        and an expired session (subclasses of kazoo's, for a caller that must read them as
        something of its own)."""
        self.tree = tree
        self.writer = writer
        self._closed_error, self._expired_error = closed_error, expired_error
        self.session = tree.open_session()
        self.closed = False
        self._listeners: list[Callable[[str], Any]] = []

    # -- the session -----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return not self.closed and self.tree.alive(self.session)

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return (self.session, b"") if self.connected else None

    def start(self, timeout: float | None = None) -> None:
        if self.closed:
            raise ConnectionClosedError("Connection has been closed")

    def stop(self) -> None:
        """Close the session: its ephemeral nodes go at once."""
        if not self.closed:
            self.tree.expire(self.session)
            self.closed = True

    def close(self) -> None:
        self.closed = True

    def new_session(self) -> None:
        """kazoo's reconnection after ``LOST``: a new session (no watches, no ephemerals)."""
        self.session = self.tree.open_session()

    def add_listener(self, listener: Callable[[str], Any]) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[str], Any]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def session_event(self, state: str) -> None:
        """Tell the listeners a ``KazooState`` (none after the client is closed)."""
        if not self.closed:
            for listener in list(self._listeners):
                listener(state)

    def _live(self) -> int:
        if self.closed:
            raise self._closed_error("Connection has been closed")
        if not self.tree.alive(self.session):
            raise self._expired_error(f"session {self.session} expired")
        self.tree.writer = self.writer
        return self.session

    def retry(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    # -- reads -----------------------------------------------------------------------------

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        return self.tree.get(self._live(), path, watch)

    def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        return self.tree.exists(self._live(), path, watch)

    def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        return self.tree.get_children(self._live(), path, watch)

    def get_async(self, path: str, watch: Watcher | None = None) -> _Result:
        return _settled(self.get, path, watch)

    def exists_async(self, path: str, watch: Watcher | None = None) -> _Result:
        return _settled(self.exists, path, watch)

    def _call(self, request: Any, result: _Result) -> None:
        """ZooKeeper's ``multiRead`` (the one raw request Weir sends)."""
        out: list[Any] = []
        for path in request.paths:
            try:
                out.append(self.get(path))
            except NoNodeError as exc:
                out.append(exc)
        result.set(out)

    # -- writes ----------------------------------------------------------------------------

    def multi(self, ops: list[Op]) -> list[Any]:
        return self.tree.multi(self._live(), ops)

    def transaction(self) -> _Transaction:
        return _Transaction(self)

    def _one(self, op: Op) -> Any:
        (result,) = self.multi([op])
        if isinstance(result, Exception):
            raise result
        return result

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False, include_data: bool = False
               ) -> Any:
        if makepath:
            self.ensure_path(_parent(path))
        created = self._one(("create", path, value, ephemeral, sequence))
        return (created, self.tree.nodes[created].stat()) if include_data else created

    def ensure_path(self, path: str, acl: Any = None) -> bool:
        missing: list[str] = []
        while path != "/" and path not in self.tree.nodes:
            missing.append(path)
            path = _parent(path)
        for p in reversed(missing):
            try:
                self._one(("create", p, b"", False, False))
            except NodeExistsError:
                pass
        return True

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return self._one(("set", path, value, version))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        if recursive:
            for child in self.get_children(path):
                self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
        return bool(self._one(("delete", path, version)))

    # -- kazoo's watch recipes -------------------------------------------------------------

    def DataWatch(self, path: str, func: Callable[..., Any]) -> _DataWatch:
        return _DataWatch(self, path, func)

    def ChildrenWatch(self, path: str, func: Callable[..., Any]) -> _ChildrenWatch:
        return _ChildrenWatch(self, path, func)


class _DataWatch:
    """kazoo's ``DataWatch``: ``func(data, stat)`` now and whenever the node's ``mzxid``
    moves (created, changed, deleted: ``(None, None)``), re-armed with every read; a
    ``False`` return ends it.  A new session (``CONNECTED``) reads it again."""

    def __init__(self, client: SimKazoo, path: str, func: Callable[..., Any]) -> None:
        self._client, self._path, self._func = client, path, func
        self._version: int | None = None
        self._ever_called = False
        self._stopped = False
        client.add_listener(self._session_watcher)
        self._get_data()

    def _watcher(self, event: WatchedEvent) -> None:
        self._get_data()

    def _session_watcher(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._client.tree.post(self._client.session, self._get_data)

    def _get_data(self) -> None:
        if self._stopped:
            return
        initial = self._version
        try:
            try:
                data, stat = self._client.get(self._path, self._watcher)
            except NoNodeError:
                data = None
                stat = self._client.exists(self._path, self._watcher)
                if stat is not None:
                    self._get_data()
                    return
        except (ConnectionClosedError, SessionExpiredError):
            return
        self._version = None if stat is None else stat.mzxid
        if initial != self._version or not self._ever_called:
            self._ever_called = True
            if self._func(data, stat) is False:
                self._stopped = True
                self._client.remove_listener(self._session_watcher)


class _ChildrenWatch:
    """kazoo's ``ChildrenWatch``: ``func(children)`` now and after every change of the
    children, re-armed with every read; a ``False`` return or the node's deletion ends it.
    After ``LOST``, a new session reads it again (and calls ``func`` if they changed)."""

    def __init__(self, client: SimKazoo, path: str, func: Callable[..., Any]) -> None:
        self._client, self._path, self._func = client, path, func
        self._prior: list[str] | None = None
        self._established = False
        self._stopped = False
        client.add_listener(self._session_watcher)
        self._get_children()

    def _watcher(self, event: WatchedEvent) -> None:
        self._get_children()

    def _session_watcher(self, state: str) -> None:
        if state in (KazooState.LOST, KazooState.SUSPENDED):
            self._established = False
        elif state == KazooState.CONNECTED and not self._established and not self._stopped:
            self._client.tree.post(self._client.session, self._get_children)

    def _get_children(self) -> None:
        if self._stopped:
            return
        try:
            children = self._client.get_children(self._path, self._watcher)
        except NoNodeError:
            self._stopped = True
            return
        except (ConnectionClosedError, SessionExpiredError):
            return
        if not self._established:
            self._established = True
            if self._prior is not None and self._prior == children:
                return
        self._prior = children
        if self._func(children) is False:
            self._stopped = True
            self._client.remove_listener(self._session_watcher)


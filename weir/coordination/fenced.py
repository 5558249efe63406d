"""Controller writes fenced by ``/controller_epoch``'s version, in ZooKeeper transactions.

Every transaction starts with a ``check`` of ``/controller_epoch`` at the version the
controller got when it was elected: a deposed controller's writes fail as a whole
(:class:`ControllerMovedError`).  A batch is split into transactions of at most
:data:`CHUNK` operations, all sent at once (kazoo's ``commit_async``: pipelined on the
one session, as Kafka's ``KafkaZkClient`` sends its async multis, so ZooKeeper works on
one while the client encodes the next, without a thread per transaction).  When one
operation fails (a stale version, a missing or existing node) the others must still be
applied, so a failed transaction (nothing of it applied) is retried without the failing
operation, after a batched re-read that weeds out every other operation whose expected
version is already stale.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import ZnodeStat

from weir.coordination import paths
from weir.coordination.errors import (
    ControllerMovedError,
    ZkNodeExistsError,
    ZkNoNodeError,
    ZkVersionMismatchError,
)
from weir.protocol.errors import ErrorCode, KafkaError

CHUNK = 1000


@dataclass(frozen=True, slots=True)
class Op:
    """One write: ``create``, ``set`` or ``delete`` of ``path`` (version -1: any)."""

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    ephemeral: bool = False
    sequence: bool = False


def create(path: str, data: bytes = b"", **kw: bool) -> Op:
    return Op("create", path, data, **kw)


def set_data(path: str, data: bytes, version: int = -1) -> Op:
    return Op("set", path, data, version)


def delete(path: str, version: int = -1) -> Op:
    return Op("delete", path, version=version)


def to_kafka_error(op: Op, exc: BaseException) -> KafkaError:
    """The per-item error reported for a failed operation."""
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, BadVersionError):
        return ZkVersionMismatchError(op.path, op.version)
    if isinstance(exc, NoNodeError):
        return ZkNoNodeError(op.path)
    if isinstance(exc, NodeExistsError):
        return ZkNodeExistsError(op.path)
    return KafkaError(ErrorCode.unknown_server_error, f"{op.kind} {op.path}: {exc!r}")


def run_fenced(client: KazooClient, ops: Sequence[Op], epoch_zk_version: int | None) -> list[Any]:
    """Apply ``ops``; one result per op: the kazoo result, or the exception it failed with.

    ``epoch_zk_version`` None means unfenced (admin writes).  Raises
    :class:`ControllerMovedError` when the epoch check fails.
    """
    return start_fenced(client, ops, epoch_zk_version)()


def start_fenced(client: KazooClient, ops: Sequence[Op], epoch_zk_version: int | None
                 ) -> Callable[[], list[Any]]:
    """:func:`run_fenced` in two halves: the multis are sent now (behind any sent before on
    the session, which ZooKeeper applies in order), the function returned waits for their
    results (and retries a chunk that failed as a whole), blocking.  One thread can so keep
    several writes in flight (Kafka's controller pipelines its async ZooKeeper requests)."""
    chunks = [list(range(start, min(start + CHUNK, len(ops))))
              for start in range(0, len(ops), CHUNK)]
    pending = [_commit_async(client, [ops[i] for i in indexes], epoch_zk_version)
               for indexes in chunks]
    return lambda: _finish(client, ops, epoch_zk_version, chunks, pending)


def _finish(client: KazooClient, ops: Sequence[Op], epoch_zk_version: int | None,
            chunks: list[list[int]], pending: list[Any]) -> list[Any]:
    results: list[Any] = [None] * len(ops)
    retry = []
    moved: ControllerMovedError | None = None
    for indexes, result in zip(chunks, pending, strict=True):
        try:
            outcome = _outcome(result.get(), epoch_zk_version)
        except ControllerMovedError as exc:
            moved = moved or exc
            continue
        if any(_is_cause(r) for r in outcome):
            retry.append(indexes)  # nothing of it was applied
            continue
        for i, r in zip(indexes, outcome, strict=True):
            results[i] = r
    if moved is not None:
        raise moved
    for indexes in retry:
        _run_chunk(client, ops, indexes, epoch_zk_version, results)
    return results


def _run_chunk(
    client: KazooClient,
    ops: Sequence[Op],
    indexes: list[int],
    epoch_zk_version: int | None,
    results: list[Any],
) -> None:
    prefiltered = False
    while indexes:
        outcome = _commit(client, [ops[i] for i in indexes], epoch_zk_version)
        failed = next((k for k, r in enumerate(outcome) if _is_cause(r)), None)
        if failed is None:
            for i, result in zip(indexes, outcome, strict=True):
                results[i] = result
            return
        results[indexes[failed]] = outcome[failed]
        del indexes[failed]
        if not prefiltered:
            prefiltered = True
            indexes = _drop_stale(client, ops, indexes, results)


def _is_cause(result: Any) -> bool:
    return isinstance(result, KazooException) and not isinstance(
        result, RolledBackError | RuntimeInconsistency
    )


def _commit(client: KazooClient, ops: list[Op], epoch_zk_version: int | None) -> list[Any]:
    return _outcome(_commit_async(client, ops, epoch_zk_version).get(), epoch_zk_version)


def _commit_async(client: KazooClient, ops: list[Op], epoch_zk_version: int | None) -> Any:
    """Send one transaction (the epoch check first when fenced); its kazoo async result."""
    txn = client.transaction()
    if epoch_zk_version is not None:
        txn.check(paths.CONTROLLER_EPOCH, epoch_zk_version)
    for op in ops:
        if op.kind == "create":
            txn.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequence)
        elif op.kind == "set":
            txn.set_data(op.path, op.data, version=op.version)
        elif op.kind == "delete":
            txn.delete(op.path, version=op.version)
        else:
            raise ValueError(f"unknown op kind {op.kind!r}")
    return txn.commit_async()


def _outcome(outcome: list[Any], epoch_zk_version: int | None) -> list[Any]:
    """The per-operation results of a committed transaction (the epoch check's left out);
    raises :class:`ControllerMovedError` when the epoch check failed."""
    if epoch_zk_version is None:
        return list(outcome)
    if _is_cause(outcome[0]):
        raise ControllerMovedError(
            f"/controller_epoch is no longer at version {epoch_zk_version}: {outcome[0]!r}"
        )
    return list(outcome[1:])


def _drop_stale(
    client: KazooClient, ops: Sequence[Op], indexes: list[int], results: list[Any]
) -> list[int]:
    """Record BadVersion/NoNode for versioned ops the current stats already doom."""
    checked = [i for i in indexes if ops[i].kind in ("set", "delete") and ops[i].version >= 0]
    asyncs = {i: client.exists_async(ops[i].path) for i in checked}
    doomed: set[int] = set()
    for i, pending in asyncs.items():
        stat: ZnodeStat | None = pending.get()
        if stat is None:
            results[i] = NoNodeError()
            doomed.add(i)
        elif stat.version != ops[i].version:
            results[i] = BadVersionError()
            doomed.add(i)
    return [i for i in indexes if i not in doomed]

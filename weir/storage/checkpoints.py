"""Kafka's small checkpoint files, read and written atomically.

Offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``) live in each log dir::

    0                    <- version
    2                    <- entry count
    orders 0 1200        <- topic partition offset
    orders 1 977

``leader-epoch-checkpoint`` lives in each partition dir with ``epoch start_offset`` lines,
and ``partition.metadata`` holds the topic id (``version: 0`` / ``topic_id: <base64>``).

Every write goes to ``<name>.tmp``, is fsynced, renamed over the target, and the directory
is fsynced, so a crash leaves either the old or the new file, never a torn one.

A batch of such writes (:func:`weir.storage.deferred_writes.write_batch`) keeps that rule
with a constant number of syncs: every temp file is written (:func:`write_temp`), one
sync makes them all durable, every rename is done, one more sync makes the renames
durable.  A :class:`PreparedWrite` is one file of such a batch.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from weir.common import TopicPartition
from weir.coordination.codecs import topic_id_from_str, topic_id_to_str
from weir.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "PARTITION_METADATA_FILE",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "PreparedWrite",
    "atomic_write",
    "epoch_checkpoint_text",
    "fsync_dir",
    "partition_metadata_text",
    "read_epoch_checkpoint",
    "read_offset_checkpoint",
    "read_partition_metadata",
    "write_epoch_checkpoint",
    "write_offset_checkpoint",
    "write_partition_metadata",
    "write_temp",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
TMP_SUFFIX = ".tmp"
VERSION = 0


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename/create/unlink inside it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _load_syncfs() -> Callable[[int], int] | None:
    """Linux's ``syncfs(2)`` from the C library, None where it is missing."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_SYNCFS = _load_syncfs()


def sync_filesystems(dirs: Iterable[Path]) -> None:
    """Make every write on the filesystems that hold ``dirs`` durable, once per filesystem
    (``syncfs(2)``: returns when the writeback is done and reports its errors, Linux 5.8+).

    A batch of thousands of small files then costs one flush of the log dirs' filesystems,
    not an fsync per file and per directory, and not ``sync()``'s flush of every filesystem
    of the machine.  Where ``syncfs`` is missing, ``sync()``.  A directory that went away
    meanwhile (its log deleted) is skipped."""
    if _SYNCFS is None:
        os.sync()
        return
    done: set[int] = set()
    for d in dirs:
        try:
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue
        try:
            dev = os.fstat(fd).st_dev
            if dev in done:
                continue
            if _SYNCFS(fd) != 0:
                code = ctypes.get_errno() or errno.EIO
                raise OSError(code, f"syncfs of {d}: {os.strerror(code)}")
            done.add(dev)
        finally:
            os.close(fd)


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: temp file, fsync, rename, fsync the directory."""
    tmp = _write_file(path.with_name(path.name + TMP_SUFFIX), text, sync=True)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_temp(path: Path, text: str) -> Path:
    """Write ``text`` to ``path``'s temp file, not synced (a batch syncs them all at once);
    returns the temp file's path."""
    return _write_file(path.with_name(path.name + TMP_SUFFIX), text, sync=False)


def _write_file(path: Path, text: str, *, sync: bool) -> Path:
    """``text`` (UTF-8) as the whole of ``path``, with three system calls (four synced).

    Python's ``open(path, "w")`` adds four more (``fstat``, the ``isatty`` ioctl, two
    ``lseek``), and each call lets go of the GIL: on the storage thread, taking it back
    while the event loop runs Python waits up to the switch interval
    (:mod:`weir.server.gil_tuning`), so the calls a file takes set how fast a batch of
    thousands of checkpoints is written on a busy broker (``bench/gil_convoy.py``)."""
    data = text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return path


def _nothing() -> None:
    return None


@dataclass
class PreparedWrite:
    """One file of a batched atomic write: ``tmp`` (written, not yet synced) is to be
    renamed over ``target`` by :meth:`rename`.  ``replace`` (if given) does that rename
    itself and returns False when a newer write superseded this one (nothing renamed);
    ``durable`` is called once the renamed file is durable."""

    tmp: Path
    target: Path
    replace: Callable[[], bool] | None = None
    durable: Callable[[], None] = field(default=_nothing)

    def rename(self) -> bool:
        """Rename the temp file over the target; False if superseded.  Raises OSError."""
        if self.replace is not None:
            return self.replace()
        os.replace(self.tmp, self.target)
        return True


def _bad(path: Path, why: str) -> KafkaError:
    return KafkaError(ErrorCode.kafka_storage_error, f"malformed checkpoint {path}: {why}")


def _read_text(path: Path) -> str | None:
    """The file's text; None if it does not exist; invalid UTF-8 is a malformed file.

    Read with ``os.open``/``os.read``: a broker loads two small files per partition (its
    ``leader-epoch-checkpoint`` and ``partition.metadata``), and ``open()`` adds an
    ``fstat``, an ``isatty`` ioctl and a text wrapper to each (as in :func:`_write_file`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _read_entries(path: Path, fields: int) -> list[list[str]] | None:
    """Parse the version/count/lines framing; None if the file does not exist."""
    text = _read_text(path)
    if text is None:
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        raise _bad(path, "missing version or count line")
    try:
        version, count = int(lines[0]), int(lines[1])
    except ValueError as exc:
        raise _bad(path, "non-numeric header") from exc
    if version != VERSION:
        raise _bad(path, f"unsupported version {version}")
    if count < 0:
        raise _bad(path, f"negative entry count {count}")
    rows = [line.split() for line in lines[2:] if line.strip()]
    if len(rows) != count:
        raise _bad(path, f"expected {count} entries, found {len(rows)}")
    for row in rows:
        if len(row) != fields:
            raise _bad(path, f"bad line {' '.join(row)!r}")
    return rows


def _render(rows: list[str]) -> str:
    return "".join(f"{line}\n" for line in [str(VERSION), str(len(rows)), *rows])


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Read a ``topic partition offset`` checkpoint; a missing file is empty."""
    rows = _read_entries(path, 3)
    if rows is None:
        return {}
    offsets = {}
    for topic, partition, offset in rows:
        offsets[TopicPartition(topic, _non_negative(path, partition))] = _non_negative(path, offset)
    return offsets


def _non_negative(path: Path, text: str) -> int:
    """A partition, offset or epoch: a non-negative integer (Kafka never writes -1 here)."""
    try:
        value = int(text)
    except ValueError as exc:
        raise _bad(path, f"non-numeric value {text!r}") from exc
    if value < 0:
        raise _bad(path, f"negative value {value}")
    return value


# One lock per file name (striped): the broker's scheduler thread writes the periodic offset
# checkpoints while the event loop may write the same file (a log moved between dirs), and
# two writers of one ``<name>.tmp`` would tear it or rename it from under each other (the
# second rename failing, taking the log dir offline).  Kafka's ``CheckpointFile.write``
# holds a lock per file for the same reason.
_WRITE_LOCKS = tuple(threading.Lock() for _ in range(16))


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Atomically write a ``topic partition offset`` checkpoint (one writer at a time)."""
    rows = [f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items())]
    text = _render(rows)
    with _WRITE_LOCKS[hash(str(path)) % len(_WRITE_LOCKS)]:
        atomic_write(path, text)


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """Read ``leader-epoch-checkpoint`` as (epoch, start_offset) pairs."""
    rows = _read_entries(path, 2)
    if rows is None:
        return []
    return [(_non_negative(path, e), _non_negative(path, o)) for e, o in rows]


def write_epoch_checkpoint(path: Path, entries: Iterable[tuple[int, int]]) -> None:
    """Atomically write ``leader-epoch-checkpoint``."""
    atomic_write(path, epoch_checkpoint_text(entries))


def epoch_checkpoint_text(entries: Iterable[tuple[int, int]]) -> str:
    """The text of a ``leader-epoch-checkpoint`` holding ``entries``."""
    return _render([f"{epoch} {offset}" for epoch, offset in entries])


def partition_metadata_text(topic_id: str) -> str:
    """The text of a ``partition.metadata`` holding ``topic_id``."""
    return f"version: 0\ntopic_id: {topic_id}\n"


def write_partition_metadata(partition_dir: Path, topic_id: str) -> None:
    """Write ``partition.metadata`` (topic id as Kafka's base64 UUID string)."""
    atomic_write(partition_dir / PARTITION_METADATA_FILE, partition_metadata_text(topic_id))


def read_partition_metadata(partition_dir: Path) -> str | None:
    """The topic id stored in ``partition.metadata``, or None if absent."""
    path = partition_dir / PARTITION_METADATA_FILE
    text = _read_text(path)
    if text is None:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if fields.get("version", "").strip() != "0" or "topic_id" not in fields:
        raise _bad(path, "expected 'version: 0' and 'topic_id'")
    topic_id = fields["topic_id"].strip()
    try:  # Kafka's Uuid.toString, and only its canonical form (no stray characters)
        canonical = topic_id_to_str(topic_id_from_str(topic_id)) == topic_id
    except ValueError:  # binascii.Error is one
        canonical = False
    if not canonical:
        raise _bad(path, f"topic id {topic_id!r} is not 16 bytes of URL-safe base64")
    return topic_id

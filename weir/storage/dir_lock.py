"""The ``.lock`` file of a log dir (Kafka's ``LogManager.lockLogDirs`` with ``FileLock``).

A broker takes an exclusive, non-blocking ``flock`` on ``<log.dir>/.lock`` for every log dir
before it reads or writes anything there, and holds it for the life of the process (the
kernel drops it when the process dies, however it dies).  A second broker process pointed at
the same dirs - a mistyped ``--config``, a ``weir broker start`` beside ``weir up`` - is
refused before it loads a log, writes a checkpoint or leaves a ``.kafka_cleanshutdown``
marker that would make the owner's next start skip recovery.

As in Kafka, a dir whose lock cannot be taken because another process holds it stops the
start (:class:`LogDirLockedError`, Kafka's ``KafkaException("Failed to acquire lock on file
.lock in <dir>. A Kafka instance in another process or thread is using this directory.")``);
any other I/O error while locking is a failed dir (JBOD, KIP-112), for the caller to take
offline.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_FILE", "DirLock", "LogDirLockedError", "is_locked"]

LOCK_FILE = ".lock"


class LogDirLockedError(RuntimeError):
    """Another process holds a log dir's ``.lock``: the broker must not start."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(
            f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. A Kafka instance in "
            "another process or thread is using this directory.")
        self.log_dir = log_dir


class DirLock:
    """An exclusive lock on ``<log_dir>/.lock``, held until :meth:`release`.

    ``flock`` locks belong to the open file description, so a second ``DirLock`` of the
    same dir in the same process is refused too (Kafka's ``OverlappingFileLockException``).
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._fd: int | None = None

    @classmethod
    def acquire(cls, log_dir: Path) -> DirLock:
        """Create the dir if missing and lock it; :class:`LogDirLockedError` when another
        holder has it, ``OSError`` for any other failure (the dir is unusable)."""
        log_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LogDirLockedError(log_dir) from None
            raise
        lock = cls(log_dir)
        lock._fd = fd
        return lock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock and close (the ``.lock`` file stays, as Kafka's does)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def is_locked(log_dir: Path) -> bool:
    """Whether some process holds ``log_dir``'s lock now (tools ask before touching a dir;
    the answer can change the next moment, so a broker relies on :meth:`DirLock.acquire`)."""
    path = log_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        raise
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)

"""The seam through which log segments read, write and sync their files.

Production goes straight to ``os.pwrite`` / ``os.pread`` / ``os.fsync``
(:class:`OsFileIo`).  The seam exists so that a disk failing can be injected into the real
storage code: the deterministic simulation installs a :class:`FileIo` that raises
``OSError(EIO)`` for the files of one log dir from a chosen moment on, and everything above
runs as in production (``storage_op`` turns the error into KAFKA_STORAGE_ERROR, the
``LogManager`` takes the dir offline - Kafka's ``LogDirFailureChannel`` - and the broker
stops its replicas there and tells the controller, KIP-112).

Every call names the file's path, so that an implementation can decide by log dir.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

__all__ = ["FileIo", "OsFileIo", "current", "install"]


class FileIo(Protocol):
    """Positional I/O on an open segment file (``fd``) at ``path``."""

    def pwrite(self, path: Path, fd: int, data: bytes | bytearray, position: int) -> int: ...

    def pread(self, path: Path, fd: int, size: int, position: int) -> bytes: ...

    def fsync(self, path: Path, fd: int) -> None: ...


class OsFileIo:
    """The operating system's calls, unchanged."""

    def pwrite(self, path: Path, fd: int, data: bytes | bytearray, position: int) -> int:
        return os.pwrite(fd, data, position)

    def pread(self, path: Path, fd: int, size: int, position: int) -> bytes:
        return os.pread(fd, size, position)

    def fsync(self, path: Path, fd: int) -> None:
        os.fsync(fd)


_current: FileIo = OsFileIo()


def current() -> FileIo:
    """The installed implementation."""
    return _current


def install(file_io: FileIo) -> FileIo:
    """Use ``file_io`` for every segment from now on; returns the one it replaces (to be
    installed again when done)."""
    global _current
    previous, _current = _current, file_io
    return previous

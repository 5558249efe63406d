"""What a log's appends and reads return, and the I/O-error rule of every log operation.

``AppendResult`` is Kafka's ``LogAppendInfo`` (the part a produce response needs),
``ReadResult`` its ``FetchDataInfo`` (a span of whole batches of one segment, for sendfile),
and :func:`storage_op` the rule of Kafka's ``LogDirFailureChannel``: an ``OSError`` takes
the log offline and surfaces as ``KafkaError(kafka_storage_error)``.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from weir.protocol.errors import ErrorCode, KafkaError

__all__ = ["AppendResult", "ReadResult", "storage_op"]

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(slots=True)  # not frozen: built once per append, a frozen init costs 3x
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime
    log_start_offset: int
    duplicate: bool = False
    num_messages: int = 0
    valid_bytes: int = 0


@dataclass(frozen=True, slots=True)
class ReadResult:
    """A run of whole batches in one segment file (``size`` 0 = nothing to return).

    ``file_path``/``fd``/``position``/``size`` allow a zero-copy sendfile; ``read_bytes``
    copies.  Consume it before the log is next mutated (a deleted segment's fd is closed).
    """

    file_path: Path | None
    position: int
    size: int
    first_offset: int
    last_offset: int = -1
    file: io.FileIO | None = field(default=None, repr=False, compare=False)

    @property
    def fd(self) -> int:
        if self.file is None:
            raise ValueError("empty read result has no file")
        return self.file.fileno()

    @property
    def inode(self) -> int:
        """The segment file's inode (a cleaned segment replacing it has another one)."""
        return os.fstat(self.fd).st_ino if self.file is not None and not self.file.closed else 0

    def read_bytes(self) -> bytes:
        if self.size == 0:
            return b""
        assert self.file is not None and self.file_path is not None
        if not self.file.closed:
            return os.pread(self.file.fileno(), self.size, self.position)
        try:
            with open(self.file_path, "rb") as f:
                return os.pread(f.fileno(), self.size, self.position)
        except FileNotFoundError as exc:
            raise KafkaError(ErrorCode.offset_out_of_range, "segment was deleted") from exc


def storage_op(method: _F) -> _F:
    """Turn OSError into KafkaError(kafka_storage_error) and take the log offline."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.offline_reason is not None:
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"log {self.topic_partition} is offline: {self.offline_reason}",
            )
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self.offline_reason = str(exc)
            raise KafkaError(
                ErrorCode.kafka_storage_error, f"I/O error in {self.dir}: {exc}"
            ) from exc

    return cast(_F, wrapper)

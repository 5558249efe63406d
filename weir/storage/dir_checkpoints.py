"""A log dir's offset checkpoint files, as Kafka's ``LogManager`` keeps them:
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` (the high watermarks of ``ReplicaManager``'s
highWatermarkCheckpoints).  What each holds per log, reading the three when the dir is
loaded (a malformed one is reset, warned about and rewritten from the loaded logs) and the
offsets each writes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from weir.common import TopicPartition
from weir.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    write_offset_checkpoint,
)
from weir.storage.integrity import read_checkpoint_or_reset
from weir.storage.log import Log

__all__ = ["CHECKPOINT_VALUES", "DirCheckpoints", "checkpoint_offsets",
           "read_dir_checkpoints", "rewrite_malformed"]

CHECKPOINT_VALUES: dict[str, Callable[[Log], int]] = {
    RECOVERY_POINT_CHECKPOINT: lambda lg: lg.recovery_point,
    LOG_START_OFFSET_CHECKPOINT: lambda lg: lg.log_start_offset,
    REPLICATION_OFFSET_CHECKPOINT: lambda lg: lg.high_watermark,
}
"""What each offset checkpoint file holds, per log."""

_FALLBACKS = {
    RECOVERY_POINT_CHECKPOINT:
        "resetting the recovery points of its log dir to 0 (every segment is recovered)",
    LOG_START_OFFSET_CHECKPOINT: "each log starts at the base offset of its first segment",
    REPLICATION_OFFSET_CHECKPOINT:
        "high watermarks are unknown (each starts at its log start offset)",
}


@dataclass(frozen=True, slots=True)
class DirCheckpoints:
    """The three checkpoints of a log dir as read at load; ``malformed``: the files reset
    (read as empty) that :func:`rewrite_malformed` replaces once the logs are loaded."""

    recovery_points: dict[TopicPartition, int]
    log_start_offsets: dict[TopicPartition, int]
    high_watermarks: dict[TopicPartition, int]
    malformed: tuple[str, ...]


def read_dir_checkpoints(log_dir: Path) -> DirCheckpoints:
    """Read the three checkpoints of ``log_dir`` (missing: empty); an ``OSError`` propagates
    (it takes the dir offline)."""
    read = {name: read_checkpoint_or_reset(log_dir / name, fallback)
            for name, fallback in _FALLBACKS.items()}
    return DirCheckpoints(
        recovery_points=read[RECOVERY_POINT_CHECKPOINT][0],
        log_start_offsets=read[LOG_START_OFFSET_CHECKPOINT][0],
        high_watermarks=read[REPLICATION_OFFSET_CHECKPOINT][0],
        malformed=tuple(name for name, (_offsets, bad) in read.items() if bad))


def checkpoint_offsets(file_name: str, logs: Mapping[TopicPartition, Log]
                       ) -> dict[TopicPartition, int]:
    """The offsets ``file_name`` holds for ``logs``, read now."""
    value = CHECKPOINT_VALUES[file_name]
    return {tp: value(lg) for tp, lg in logs.items()}


def rewrite_malformed(log_dir: Path, malformed: tuple[str, ...],
                      logs: Mapping[TopicPartition, Log]) -> None:
    """Replace the malformed checkpoint files with the values the logs were loaded with."""
    for name in malformed:
        write_offset_checkpoint(log_dir / name, checkpoint_offsets(name, logs))

"""Names of partition directories inside a log dir, and a log dir's disk usage.

Kafka's ``UnifiedLog`` names (KIP-113): the current log of a partition lives in
``<topic>-<partition>``; a future log (a copy being built in another log dir of the same
broker by AlterReplicaLogDirs) in ``<topic>-<partition>.<uuid>-future``; a log renamed away
for deletion in ``<topic>-<partition>.<uuid>-delete``; a stray log in ``...-stray``.  The
uuid is 32 hex digits (a random UUID without dashes), so names stay unique.
"""

from __future__ import annotations

import enum
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from weir.common import TopicPartition

__all__ = [
    "DirKind",
    "DiskUsage",
    "delete_dir_name",
    "disk_usage",
    "future_dir_name",
    "parse_log_dir_name",
    "parse_topic_partition",
]

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"


class DirKind(enum.Enum):
    CURRENT = ""
    FUTURE = FUTURE_SUFFIX
    DELETE = DELETE_SUFFIX
    STRAY = STRAY_SUFFIX


def _parse_plain(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


def parse_log_dir_name(name: str) -> tuple[TopicPartition, DirKind] | None:
    """``orders-3`` → (orders-3, CURRENT); ``orders-3.<32 hex>-future`` → (orders-3, FUTURE);
    None for names that are not partition directories."""
    for kind in (DirKind.FUTURE, DirKind.DELETE, DirKind.STRAY):
        if name.endswith(kind.value):
            stem, dot, tag = name[: -len(kind.value)].rpartition(".")
            if not dot or len(tag) != 32 or any(c not in "0123456789abcdef" for c in tag):
                return None
            tp = _parse_plain(stem)
            return None if tp is None else (tp, kind)
    tp = _parse_plain(name)
    return None if tp is None else (tp, DirKind.CURRENT)


def _tagged(tp: TopicPartition, kind: DirKind) -> str:
    return f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}{kind.value}"


def future_dir_name(tp: TopicPartition) -> str:
    """A new ``<topic>-<partition>.<uuid>-future`` name (Kafka's ``logFutureDirName``)."""
    return _tagged(tp, DirKind.FUTURE)


def delete_dir_name(tp: TopicPartition) -> str:
    """A new ``<topic>-<partition>.<uuid>-delete`` name (Kafka's ``logDeleteDirName``)."""
    return _tagged(tp, DirKind.DELETE)


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """The volume a log dir is on (DescribeLogDirs v4, KIP-827)."""

    total_bytes: int
    usable_bytes: int


def disk_usage(path: Path) -> DiskUsage:
    """Total and usable (available to this user) bytes of ``path``'s file system.

    Raises OSError if it cannot be read (the log dir is then offline)."""
    st = os.statvfs(path)
    return DiskUsage(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)


def parse_topic_partition(name: str) -> TopicPartition | None:
    """``orders-3`` → TopicPartition("orders", 3); None for names that are not logs."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))

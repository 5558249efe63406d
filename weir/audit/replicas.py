"""Replica logs as batch summaries, and their comparison below the high watermark.

Pure functions on segment files: no broker, no Spark.  A replica of a partition is the
directory ``<log dir>/<topic>-<partition>`` of one broker; its ``*.log`` segment files hold
record batches back to back (magic v2).  Each batch is summarised by its base and last
offsets, its partition leader epoch, the CRC32C stored in its header and whether the
bytes still match that CRC.  Replicas agree when every batch below the high watermark has
the same summary on all of them (Kafka's replication copies batches byte for byte).
"""

from __future__ import annotations

import mmap
import struct
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12
_HEAD = struct.Struct(">qiibI")  # base offset, length, leader epoch, magic, crc
_LAST_DELTA = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class BatchSummary:
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int
    crc_ok: bool

    def describe(self) -> str:
        bad = "" if self.crc_ok else ", bytes fail the CRC"
        return (f"[{self.base_offset}..{self.last_offset}] epoch {self.leader_epoch}"
                f" crc {self.crc:08x}{bad}")


@dataclass
class ReplicaLog:
    """The batches of one replica that start below ``until``."""

    broker: int
    batches: list[BatchSummary] = field(default_factory=list)
    log_end: int = 0  # offset after its last whole batch
    problem: str | None = None  # a missing directory or a torn batch header

    @property
    def log_start(self) -> int:
        return self.batches[0].base_offset if self.batches else self.log_end


def partition_dir(log_dir: str | Path, topic: str, partition: int) -> Path:
    return Path(log_dir) / f"{topic}-{partition}"


def read_replica(broker: int, log_dirs: Iterable[str | Path], topic: str, partition: int,
                 until: int) -> ReplicaLog:
    """Summaries of the batches of ``topic-partition`` in whichever of ``log_dirs`` has it."""
    replica = ReplicaLog(broker)
    found = [partition_dir(d, topic, partition) for d in log_dirs
             if partition_dir(d, topic, partition).is_dir()]
    if not found:
        replica.problem = "no log directory for the partition"
        return replica
    for segment in sorted(found[0].glob("*.log")):
        if not _read_segment(segment, until, replica):
            break
    return replica


def _read_segment(path: Path, until: int, replica: ReplicaLog) -> bool:
    """Append the batches of one segment; False once ``until`` is reached or it is torn."""
    size = path.stat().st_size
    if size == 0:
        return True
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        view = memoryview(m)
        try:
            pos = 0
            while pos + HEADER_SIZE <= size:
                base, length, epoch, magic, crc = _HEAD.unpack_from(view, pos)
                total = length + LOG_OVERHEAD
                if magic != 2 or total < HEADER_SIZE or pos + total > size:
                    replica.problem = (f"{path.name}: torn or unknown batch at byte {pos}"
                                       f" (offset {base})")
                    return False
                if base >= until:
                    return False
                (last_delta,) = _LAST_DELTA.unpack_from(view, pos + 23)
                ok = crc32c.crc32c(view[pos + 21:pos + total]) == crc
                replica.batches.append(BatchSummary(base, base + last_delta, epoch, crc, ok))
                replica.log_end = base + last_delta + 1
                pos += total
        finally:
            view.release()
    return True


@dataclass
class PartitionReport:
    topic: str
    partition: int
    leader: int
    replicas: list[int]
    high_watermark: int
    batches_compared: int = 0
    first_divergent_offset: int | None = None
    disagreeing: list[int] = field(default_factory=list)
    detail: str = ""
    behind: dict[str, int] = field(default_factory=dict)  # replica → its log end, below HW
    problems: dict[str, str] = field(default_factory=dict)

    @property
    def diverged(self) -> bool:
        return self.first_divergent_offset is not None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compare(topic: str, partition: int, leader: int, high_watermark: int,
            logs: Mapping[int, ReplicaLog],
            isr: Iterable[int] | None = None) -> PartitionReport:
    """Compare replicas batch by batch from their common start up to the high watermark.

    At each batch position the replicas are grouped by the batch they hold; the group with
    the leader (else the largest) is the reference and the others disagree.  A batch that
    fails its CRC on any replica is a divergence.  A replica whose log ends before the high
    watermark is *behind* when it is out of the ISR (a lagging follower, legal in Kafka);
    a member of ``isr`` (the leader included) ending there has lost committed records — the
    high watermark is the minimum log end offset of the ISR (Kafka's ``Partition``
    ``maybeIncrementLeaderHW``) — so that is a divergence at its log end.  Without ``isr``
    every short replica counts as behind.
    """
    report = PartitionReport(topic, partition, leader, sorted(logs), high_watermark)
    for b, log in logs.items():
        if log.problem:
            report.problems[str(b)] = log.problem
    usable = {b: log for b, log in logs.items() if log.batches}
    if not usable:
        return report
    start = max(log.log_start for log in usable.values())  # retention runs per replica
    by_base = {b: {s.base_offset: s for s in log.batches
                   if s.base_offset >= start and s.base_offset < high_watermark}
               for b, log in usable.items()}
    in_sync = set(isr or ())
    for b, log in usable.items():
        if log.log_end < high_watermark:
            report.behind[str(b)] = log.log_end
    for base in sorted(set().union(*by_base.values())):
        holders = {b: by_base[b].get(base) for b in usable if usable[b].log_end > base}
        groups = Counter(s for s in holders.values())
        bad_crc = any(s is not None and not s.crc_ok for s in holders.values())
        if len(groups) <= 1 and not bad_crc:
            report.batches_compared += 1
            continue
        ref = holders.get(leader) if leader in holders else groups.most_common(1)[0][0]
        if ref is not None and not ref.crc_ok:
            good = [s for s in groups if s is not None and s.crc_ok]
            ref = good[0] if good else ref
        report.first_divergent_offset = base
        report.disagreeing = sorted(b for b, s in holders.items() if s != ref or
                                    (s is not None and not s.crc_ok))
        report.detail = "; ".join(
            f"broker {b}: {s.describe() if s is not None else 'no batch starts here'}"
            for b, s in sorted(holders.items()))
        break
    _truncated_in_sync(report, usable, in_sync, high_watermark)
    return report


def _truncated_in_sync(report: PartitionReport, logs: Mapping[int, ReplicaLog],
                       in_sync: set[int], high_watermark: int) -> None:
    """Report ISR members whose log ends below the high watermark (a truncated tail)."""
    short = {b: log.log_end for b, log in logs.items()
             if b in in_sync and log.log_end < high_watermark}
    if not short:
        return
    first = min(short.values())
    earlier = report.first_divergent_offset
    if earlier is not None and earlier < first:
        return  # a batch already differs before any tail is missing
    lost = [b for b, end in short.items() if end == first]
    truncated = "; ".join(f"broker {b}: in the ISR but its log ends at {short[b]}, below"
                          f" the high watermark {high_watermark}" for b in sorted(lost))
    if earlier == first:
        report.disagreeing = sorted(set(report.disagreeing) | set(lost))
        report.detail = f"{report.detail}; {truncated}"
    else:
        report.first_divergent_offset = first
        report.disagreeing = sorted(lost)
        report.detail = truncated
    for b in lost:
        report.behind.pop(str(b), None)

"""Progress of the replicas a reassignment adds, for ``weir reassign --verify``.

For each moving partition (ListPartitionReassignments, KIP-455) and each replica being added,
how far its log has caught up with the leader's: log end offsets and sizes from each broker's
metrics endpoint (``kafka_log_log_logendoffset`` and ``kafka_log_log_size``, Kafka's
``kafka.log:type=Log`` MBeans; the port is the broker's ``metrics.http.port``, read through
DescribeConfigs), or, for a local cluster, the bytes of its segment files.  A replica in the
ISR is caught up whatever the figures say.

:class:`LiveView` redraws the lines in place on a terminal and prints only changes
otherwise (a log file, a pipe).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO

from weir.common import TopicPartition

LOG_END_OFFSET = "kafka_log_log_logendoffset"
LOG_SIZE = "kafka_log_log_size"
_SAMPLE = re.compile(r'^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

# per broker: per partition, (log end offset, size in bytes); either may be unknown
LogFigures = dict[TopicPartition, tuple[int | None, int | None]]


def parse_log_metrics(text: str) -> LogFigures:
    """Log end offsets and sizes per partition from a Prometheus text page."""
    out: dict[TopicPartition, list[int | None]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or match.group("name") not in (LOG_END_OFFSET, LOG_SIZE):
            continue
        labels = dict(_LABEL.findall(match.group("labels")))
        try:
            tp = TopicPartition(labels["topic"], int(labels["partition"]))
            value = int(float(match.group("value")))
        except (KeyError, ValueError):
            continue
        slot = out.setdefault(tp, [None, None])
        slot[0 if match.group("name") == LOG_END_OFFSET else 1] = value
    return {tp: (leo, size) for tp, (leo, size) in out.items()}


@dataclass(frozen=True)
class ReplicaProgress:
    """One replica being added: what it has of what its leader has."""

    tp: TopicPartition
    broker: int
    in_isr: bool
    offsets: tuple[int, int] | None = None  # (the replica's log end, the leader's)
    size: tuple[int, int] | None = None  # (bytes here, bytes on the leader)

    def share(self) -> float | None:
        """0..1, or None when nothing is known but that it is not in the ISR yet."""
        if self.in_isr:
            return 1.0
        for figures in (self.offsets, self.size):
            if figures is not None:
                done, total = figures
                return 1.0 if total <= 0 else max(0.0, min(done / total, 1.0))
        return None


def measure(moving: Mapping[TopicPartition, tuple[list[int], list[int], list[int]]],
            leaders: Mapping[TopicPartition, int], isrs: Mapping[TopicPartition, list[int]],
            logs: Mapping[int, LogFigures],
            local_bytes: Mapping[TopicPartition, Mapping[int, int]] | None = None
            ) -> list[ReplicaProgress]:
    """A :class:`ReplicaProgress` per adding replica of every moving partition."""
    out = []
    for tp, (_, adding, _) in sorted(moving.items()):
        leader = leaders.get(tp, -1)
        lead_leo, lead_size = logs.get(leader, {}).get(tp, (None, None))
        for broker in adding:
            leo, size = logs.get(broker, {}).get(tp, (None, None))
            offsets = (leo or 0, lead_leo) if lead_leo is not None and broker in logs else None
            sizes = (size or 0, lead_size) if lead_size is not None and broker in logs else None
            if sizes is None and local_bytes is not None and tp in local_bytes:
                on_disk = local_bytes[tp]
                biggest = on_disk.get(leader, max(on_disk.values(), default=0))
                sizes = (min(on_disk.get(broker, 0), biggest), biggest)
            out.append(ReplicaProgress(tp, broker, broker in isrs.get(tp, []), offsets, sizes))
    return out


def bar(share: float | None, width: int = 24) -> str:
    if share is None:
        return "[" + "?" * width + "]    ?"
    filled = round(share * width)
    return f"[{'#' * filled}{'.' * (width - filled)}] {share * 100:3.0f}%"


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def render(progress: Iterable[ReplicaProgress]) -> list[str]:
    """One line per adding replica and a total line."""
    rows = list(progress)
    if not rows:
        return []
    lines = []
    for r in rows:
        figures = []
        if r.offsets is not None:
            figures.append(f"offsets {r.offsets[0]}/{r.offsets[1]}")
        if r.size is not None:
            figures.append(f"{human_bytes(r.size[0])}/{human_bytes(r.size[1])}")
        state = "in ISR" if r.in_isr else "catching up"
        lines.append(f"  {r.tp} -> broker {r.broker}  {bar(r.share())}  {state}"
                     + (f"  ({', '.join(figures)})" if figures else ""))
    done = sum(1 for r in rows if r.in_isr)
    shares = [r.share() for r in rows]
    known = [s for s in shares if s is not None]
    overall = sum(known) / len(rows) if known else None
    lines.append(f"Replicas caught up: {done}/{len(rows)}  overall {bar(overall)}")
    return lines


class LiveView:
    """Lines redrawn in place on a terminal, printed when they change otherwise."""

    def __init__(self, stream: IO[str] | None = None, tty: bool | None = None,
                 stamp: bool = True) -> None:
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.stamp = stamp
        self._shown = 0
        self._last: list[str] | None = None

    def show(self, lines: list[str]) -> None:
        if self.tty:
            erase = f"\x1b[{self._shown}F\x1b[J" if self._shown else ""
            self.stream.write(erase + "".join(line + "\n" for line in lines))
            self._shown = len(lines)
        elif lines != self._last:
            head = f"--- {time.strftime('%H:%M:%S')}\n" if self.stamp else ""
            self.stream.write(head + "".join(line + "\n" for line in lines))
        self._last = list(lines)
        self.stream.flush()

"""Planning a consumer group's offset reset, as kafka-consumer-groups.sh --reset-offsets does.

Sans-I/O: :func:`plan_reset` turns a scenario (``--to-earliest``, ``--to-offset N``, ...) and
what the cluster reported (committed offsets, log start and end offsets, offsets for a
timestamp) into the new offset of each partition.  Kafka's rules (ConsumerGroupCommand):

* ``--to-offset`` and ``--shift-by`` are clamped into ``[log start, log end]``, with a warning;
* ``--shift-by`` needs a committed offset for every partition it moves;
* ``--to-datetime`` / ``--by-duration`` take the first offset whose timestamp is at or after
  the time; a partition with no such record falls back to its log end offset;
* ``--to-current`` keeps the committed offset, or the log end offset where none is committed;
* ``--from-file`` applies a plan saved with ``--export`` (CSV ``topic,partition,offset``, or
  ``group,topic,partition,offset``), clamped like ``--to-offset``.

The time arguments follow Kafka's formats: ``--to-datetime`` is ISO-8601
(``2024-01-31T12:00:00.000``, UTC unless it names a zone), ``--by-duration`` an ISO-8601
duration (``PT15M``, ``P1DT2H``).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from weir.common import TopicPartition

SCENARIOS = ("to-earliest", "to-latest", "to-offset", "to-datetime", "by-duration",
             "shift-by", "to-current", "from-file")
# which lookups a scenario needs from the cluster
NEEDS_TIMESTAMP = ("to-datetime", "by-duration")


class ResetError(ValueError):
    """A reset that cannot be planned (bad argument, missing committed offset)."""


@dataclass
class ResetPlan:
    """New offsets per partition and the warnings Kafka's tool prints on the way."""

    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


_DURATION = re.compile(
    r"^(?P<sign>[-+]?)P(?:(?P<days>[-+]?\d+)D)?"
    r"(?:T(?:(?P<hours>[-+]?\d+)H)?(?:(?P<minutes>[-+]?\d+)M)?"
    r"(?:(?P<seconds>[-+]?\d+(?:[.,]\d{0,9})?)S)?)?$", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as java.time.Duration.parse reads it (PnDTnHnMn.nS), in ms."""
    match = _DURATION.match(text.strip())
    if not match or text.strip().upper().endswith("T") or not any(
            match.group(g) for g in ("days", "hours", "minutes", "seconds")):
        raise ResetError(f"not an ISO-8601 duration (e.g. PT15M, P1DT2H): {text!r}")
    seconds = float((match.group("seconds") or "0").replace(",", "."))
    total = datetime.timedelta(days=int(match.group("days") or 0),
                               hours=int(match.group("hours") or 0),
                               minutes=int(match.group("minutes") or 0), seconds=seconds)
    ms = int(total.total_seconds() * 1000)
    return -ms if match.group("sign") == "-" else ms


def parse_datetime_ms(text: str) -> int:
    """An ISO-8601 date-time in epoch milliseconds; without a zone it is UTC (as in Kafka)."""
    raw = text.strip()
    if "T" not in raw:
        raise ResetError(f"not an ISO-8601 date-time (it has no 'T'): {text!r}")
    try:
        when = datetime.datetime.fromisoformat(raw.replace("z", "Z"))
    except ValueError:
        raise ResetError(f"not an ISO-8601 date-time (e.g. 2024-01-31T12:00:00.000): "
                         f"{text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


def parse_topic_partitions(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,2`` (Kafka's --topic syntax for --reset-offsets)."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise ResetError(f"no topic in {spec!r}")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise ResetError(f"partitions must be numbers: {spec!r}") from None
    if not partitions or partitions[0] < 0:
        raise ResetError(f"no valid partitions in {spec!r}")
    return topic, partitions


def parse_reset_csv(text: str, group: str) -> dict[TopicPartition, int]:
    """A reset plan as ``--export`` writes it: ``topic,partition,offset`` lines, or
    ``group,topic,partition,offset`` (then only ``group``'s lines)."""
    plan: dict[TopicPartition, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 4:
            if cells[0] != group:
                continue
            cells = cells[1:]
        try:
            topic, partition, offset = cells[0], int(cells[1]), int(cells[2])
        except (ValueError, IndexError):
            raise ResetError(f"line {number} of the reset plan is not "
                             f"topic,partition,offset: {line!r}") from None
        if not topic or partition < 0 or offset < 0:
            raise ResetError(f"line {number} of the reset plan is out of range: {line!r}")
        plan[TopicPartition(topic, partition)] = offset
    if not plan:
        raise ResetError(f"No reset plan for group {group} found")
    return plan


def export_csv(offsets: Mapping[TopicPartition, int]) -> str:
    """The plan as kafka-consumer-groups --export writes it for one group."""
    return "".join(f"{tp.topic},{tp.partition},{o}\n" for tp, o in sorted(offsets.items()))


def target_time_ms(scenario: str, value: str, now_ms: int) -> int:
    """The timestamp a time-based scenario looks offsets up for."""
    if scenario == "to-datetime":
        return parse_datetime_ms(value)
    return now_ms - parse_duration_ms(value)


def _clamp(tp: TopicPartition, wanted: int, starts: Mapping[TopicPartition, int],
           ends: Mapping[TopicPartition, int], plan: ResetPlan) -> int:
    end, start = ends.get(tp), starts.get(tp)
    if end is not None and wanted > end:
        plan.warnings.append(f"New offset ({wanted}) is higher than latest offset for topic "
                             f"partition {tp}. Value will be set to {end}")
        return end
    if start is not None and wanted < start:
        plan.warnings.append(f"New offset ({wanted}) is lower than earliest offset for topic "
                             f"partition {tp}. Value will be set to {start}")
        return start
    return wanted


def plan_reset(scenario: str, value: int | str | Mapping[TopicPartition, int] | None,
               partitions: Iterable[TopicPartition],
               committed: Mapping[TopicPartition, int], starts: Mapping[TopicPartition, int],
               ends: Mapping[TopicPartition, int],
               by_time: Mapping[TopicPartition, int | None] | None = None) -> ResetPlan:
    """New offsets for ``partitions`` under ``scenario`` (see the module doc).

    ``starts``/``ends`` are log start and end offsets, ``by_time`` the ListOffsets answer
    for the target timestamp (None or -1: no record at or after it).  A partition missing
    from a lookup it needs raises ResetError naming it.
    """
    plan = ResetPlan()
    for tp in sorted(set(partitions)):
        plan.offsets[tp] = _one(scenario, value, tp, committed, starts, ends, by_time or {},
                                plan)
    return plan


def _need(lookup: Mapping[TopicPartition, int], tp: TopicPartition, what: str) -> int:
    found = lookup.get(tp)
    if found is None or found < 0:
        raise ResetError(f"Error getting {what} offset of topic partition: {tp}")
    return found


def _one(scenario: str, value: int | str | Mapping[TopicPartition, int] | None,
         tp: TopicPartition,
         committed: Mapping[TopicPartition, int], starts: Mapping[TopicPartition, int],
         ends: Mapping[TopicPartition, int], by_time: Mapping[TopicPartition, int | None],
         plan: ResetPlan) -> int:
    if scenario == "to-earliest":
        return _need(starts, tp, "starting")
    if scenario == "to-latest":
        return _need(ends, tp, "ending")
    if scenario == "to-offset":
        return _clamp(tp, int(value or 0), starts, ends, plan)
    if scenario == "shift-by":
        current = committed.get(tp)
        if current is None:
            raise ResetError(f"Cannot shift offset for partition {tp} since there is no "
                             f"current committed offset")
        return _clamp(tp, current + int(value or 0), starts, ends, plan)
    if scenario in NEEDS_TIMESTAMP:
        found = by_time.get(tp)
        if found is None or found < 0:
            plan.warnings.append(f"Partition {tp.partition} from topic {tp.topic} is empty. "
                                 f"Falling back to latest known offset.")
            return _need(ends, tp, "ending")
        return found
    if scenario == "from-file":
        wanted = value.get(tp) if isinstance(value, Mapping) else None
        if wanted is None:
            raise ResetError(f"No offset for {tp} in the reset plan")
        return _clamp(tp, wanted, starts, ends, plan)
    if scenario == "to-current":
        current = committed.get(tp)
        return current if current is not None else _need(ends, tp, "ending")
    raise ResetError(f"unknown reset scenario {scenario!r}")

"""The checker: a history in, anomalies out.  Pure: no I/O, no clock, no cluster.

The anomaly kinds follow Jepsen's Kafka workload (``jepsen.tests.kafka``), adapted to a
non-transactional idempotent producer and consumers reading with assign or in a group:

- ``lost-write``: a send was acknowledged (``ok``), yet its value is absent from the final
  read of its partition, which went up to the high watermark after every fault healed.
- ``duplicate``: one value is stored at two offsets (the producer is idempotent, so a retry
  must not store a record twice).
- ``inconsistent-offset``: one offset was seen with two values (by acks and reads together).
- ``nonmonotonic-poll``: within one consumer session a partition's offsets went backwards or
  repeated (Jepsen's "nonmonotonic poll").
- ``skipped-offset``: within one consumer session a poll jumped over offsets that hold
  records (Jepsen's "poll skip").
- ``phantom-read``: a read returned a value no producer ever sent.
- ``ack-without-offset``: an acknowledgement without an offset whose value the final read
  does not show stored exactly once (librdkafka's implicit acknowledgements of an idempotent
  producer carry no offset; proven stored, they are counted in the stats instead).
- ``commit-backwards``: a group's committed offset for a partition moved backwards in real
  time (a commit that completed earlier had committed a later offset).
- ``group-unconsumed``: an acknowledged record the consumer group never delivered.
- ``incomplete-final-read``: the final read did not reach a partition's high watermark, so
  lost writes cannot be ruled out there.
- ``replica-divergence``: replicas of a partition hold different bytes below the HW.

Unavailability per fault window: seconds from the fault's start until the first ``ok`` of a
send *invoked* at or after that start (a send already in flight does not count).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from weir.verify.history import Op, pair_ops

KINDS = ("lost-write", "duplicate", "inconsistent-offset", "nonmonotonic-poll",
         "skipped-offset", "phantom-read", "ack-without-offset", "commit-backwards",
         "group-unconsumed", "incomplete-final-read", "replica-divergence")
MAX_PER_KIND = 200  # detailed anomalies kept per kind (all are counted)


@dataclass
class Anomaly:
    kind: str
    message: str
    ops: list[int] = field(default_factory=list)  # indices of the operations involved
    partition: int | None = None
    offset: int | None = None
    value: str | None = None


@dataclass
class FaultWindow:
    window: int
    fault: str
    target: Any
    start: float
    end: float | None
    unavailable_s: float | None  # None: no send invoked after the start was ever acked


@dataclass
class CheckResult:
    anomalies: list[Anomaly]
    counts: dict[str, int]
    stats: dict[str, Any]
    windows: list[FaultWindow]

    @property
    def valid(self) -> bool:
        return not any(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "counts": self.counts, "stats": self.stats,
                "windows": [asdict(w) for w in self.windows],
                "anomalies": [asdict(a) for a in self.anomalies]}


class _Anomalies:
    def __init__(self) -> None:
        self.items: list[Anomaly] = []
        self.counts: Counter[str] = Counter({k: 0 for k in KINDS})

    def add(self, kind: str, message: str, ops: Iterable[int] = (), **where: Any) -> None:
        self.counts[kind] += 1
        if self.counts[kind] <= MAX_PER_KIND:
            self.items.append(Anomaly(kind, message, sorted(set(ops)), **where))


def _records(op: Op) -> list[tuple[int, int, str]]:
    return [(int(p), int(o), v) for p, o, v in (op.get("value") or {}).get("records", [])]


def _int_keys(mapping: dict | None) -> dict[int, Any]:
    return {int(k): v for k, v in (mapping or {}).items()}


def check(history: list[Op]) -> CheckResult:
    """Every anomaly of ``history`` (see the module doc), the counts and the fault windows."""
    found = _Anomalies()
    config = next((op["value"] for op in history if op.get("f") == "config"), {}) or {}
    sends = [(inv, done) for inv, done in pair_ops(history) if inv["f"] == "send"]
    sent_values = {inv["value"]["value"]: inv for inv, _ in sends}
    acks = [(inv, done) for inv, done in sends if done is not None and done["type"] == "ok"]

    # every observation of (partition, offset) -> value, from acks and reads
    by_offset: dict[tuple[int, int], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    final_values: dict[int, set[str]] = defaultdict(set)
    group_values: set[str] = set()
    offsetless: list[tuple[Op, Op]] = []
    for inv, done in acks:
        offset = done["value"].get("offset")
        if offset is None or offset < 0:
            offsetless.append((inv, done))
            continue
        by_offset[(done["value"]["partition"], offset)][inv["value"]["value"]].append(
            done["index"])
    for op in history:
        if op.get("f") != "poll" or op["type"] != "ok":
            continue
        for p, o, v in _records(op):
            by_offset[(p, o)][v].append(op["index"])
            if op["process"] == "final":
                final_values[p].add(v)
            if op["process"].startswith("group-"):
                group_values.add(v)
            if v not in sent_values:
                found.add("phantom-read", f"{op['process']} read {v!r} at {p}/{o}, never sent",
                          [op["index"]], partition=p, offset=o, value=v)

    by_value: dict[str, dict[tuple[int, int], list[int]]] = defaultdict(dict)
    for (p, o), values in sorted(by_offset.items()):
        if len(values) > 1:
            shown = ", ".join(f"{v!r}" for v in values)
            found.add("inconsistent-offset", f"offset {p}/{o} seen with values {shown}",
                      [i for idx in values.values() for i in idx[:3]], partition=p, offset=o)
        for v, idx in values.items():
            by_value[v][(p, o)] = idx
    for v, places in by_value.items():
        if len(places) > 1:
            where = ", ".join(f"{p}/{o}" for p, o in sorted(places))
            found.add("duplicate", f"value {v!r} stored at {where}",
                      [i for idx in places.values() for i in idx[:3]], value=v)

    _check_sessions(history, by_offset, found)
    _check_commits(history, found)

    finals = [op for op in history if op.get("f") == "final" and op["type"] == "ok"]
    complete: dict[int, bool] = {}
    for op in finals:
        for p, info in _int_keys(op["value"].get("partitions")).items():
            complete[p] = bool(info.get("complete"))
            if not info.get("complete"):
                found.add("incomplete-final-read", f"final read of partition {p} stopped at"
                          f" {info.get('read_to')} below the high watermark {info.get('hw')}",
                          [op["index"]], partition=p)
    if finals:
        for inv, done in acks:
            p, v = done["value"]["partition"], inv["value"]["value"]
            if complete.get(p) and v not in final_values[p]:
                found.add("lost-write", f"acknowledged {v!r} (offset {done['value'].get('offset')}"
                          f" of partition {p}) is missing from the final read",
                          [inv["index"], done["index"]], partition=p,
                          offset=done["value"].get("offset"), value=v)
    # An acknowledgement without an offset is the client's, not the broker's: librdkafka
    # reports an idempotent producer's earlier messages delivered with no offset once the
    # broker acknowledged a later batch of the same producer (rd_kafka_dr_implicit_ack; the
    # earlier request's own answer was lost or an error).  It is an anomaly unless the final
    # read proves the value stored exactly once; proven ones are counted in the stats.
    implicit = 0
    for inv, done in offsetless:
        p, v = done["value"].get("partition"), inv["value"]["value"]
        stored = [o for (q, o) in by_value.get(v, {}) if q == p]
        if finals and complete.get(p) and v in final_values[p] and len(stored) == 1:
            implicit += 1
            continue
        found.add("ack-without-offset", f"send of {v} acknowledged without an offset, and"
                  " the final read does not show it stored exactly once",
                  [inv["index"], done["index"]], partition=p, value=v)
    if config.get("workload") == "groups" and finals:
        for inv, done in acks:
            v = inv["value"]["value"]
            if v not in group_values:
                found.add("group-unconsumed", f"acknowledged {v!r} was never delivered to the"
                          " consumer group", [inv["index"], done["index"]],
                          partition=done["value"]["partition"], value=v)

    for op in history:
        if op.get("f") == "replicas" and op["type"] == "ok":
            for rep in op["value"].get("partitions", []):
                if rep.get("first_diff") is not None:
                    digests = ", ".join(f"broker {b}: {r['batches']} batches {r['digest']}"
                                        for b, r in sorted(rep["replicas"].items()))
                    found.add("replica-divergence", f"replicas of partition {rep['partition']}"
                              f" differ below the high watermark {rep['hw']}, first at offset"
                              f" {rep['first_diff']} ({digests})", [op["index"]],
                              partition=rep["partition"], offset=rep["first_diff"])

    windows = fault_windows(history, sends)
    stats = _stats(history, sends, acks)
    stats["acks_without_offset_stored_once"] = implicit
    return CheckResult(found.items, dict(found.counts), stats, windows)


def _check_sessions(history: list[Op], by_offset: dict, found: _Anomalies) -> None:
    """Per consumer process and partition: offsets strictly increase, with no known gap."""
    last: dict[tuple[str, int], tuple[int, int]] = {}  # (process, p) -> (offset, op index)
    for op in history:
        if op["type"] != "ok":
            continue
        proc = op["process"]
        if op.get("f") == "assign":
            for p, start in _int_keys(op["value"].get("partitions")).items():
                if start is None:
                    last.pop((proc, p), None)
                else:
                    last[(proc, p)] = (int(start) - 1, op["index"])
            continue
        if op.get("f") != "poll":
            continue
        for p, o, v in _records(op):
            prev = last.get((proc, p))
            if prev is not None:
                prev_offset, prev_index = prev
                if o <= prev_offset:
                    found.add("nonmonotonic-poll", f"{proc} read {p}/{o} after {p}/{prev_offset}",
                              [prev_index, op["index"]], partition=p, offset=o, value=v)
                elif o > prev_offset + 1:
                    skipped = [x for x in range(prev_offset + 1, o) if (p, x) in by_offset]
                    if skipped:
                        found.add("skipped-offset", f"{proc} jumped from {p}/{prev_offset} to"
                                  f" {p}/{o}, over {len(skipped)} stored record(s) from"
                                  f" offset {skipped[0]}", [prev_index, op["index"]],
                                  partition=p, offset=skipped[0])
            last[(proc, p)] = (o, op["index"])


def _check_commits(history: list[Op], found: _Anomalies) -> None:
    """A commit (or the final committed read) never goes below one completed before it began."""
    best: dict[int, tuple[int, int]] = {}  # p -> (highest committed offset, op index)
    seen_at_invoke: dict[int, dict[int, tuple[int, int]]] = {}
    for op in history:
        if op.get("f") not in ("commit", "committed"):
            continue
        if op["type"] == "invoke":
            seen_at_invoke[op["id"]] = dict(best)
            continue
        if op["type"] != "ok":
            continue
        before = seen_at_invoke.get(op.get("id"), {})
        for p, offset in _int_keys(op["value"].get("offsets")).items():
            if offset is None or offset < 0:
                continue
            if p in before and offset < before[p][0]:
                what = "committed read" if op["f"] == "committed" else "commit"
                found.add("commit-backwards", f"{op['process']}'s {what} of {p} at {offset} is"
                          f" below {before[p][0]}, committed before it began",
                          [before[p][1], op["index"]], partition=p, offset=offset)
            if op["f"] == "commit" and (p not in best or offset > best[p][0]):
                best[p] = (offset, op["index"])


def fault_windows(history: list[Op], sends: list[tuple[Op, Op | None]] | None = None
                  ) -> list[FaultWindow]:
    """The nemesis's fault windows, each with the unavailability it caused."""
    if sends is None:
        sends = [(inv, done) for inv, done in pair_ops(history) if inv["f"] == "send"]
    ok_sends = sorted((inv["time"], done["time"]) for inv, done in sends
                      if done is not None and done["type"] == "ok")
    windows: dict[int, FaultWindow] = {}
    for op in history:
        if op["process"] != "nemesis" or op.get("f") not in ("start", "stop"):
            continue
        v = op["value"]
        if op["f"] == "start":
            windows[v["window"]] = FaultWindow(v["window"], v["fault"], v.get("target"),
                                               op["time"], None, None)
        elif v["window"] in windows:
            windows[v["window"]].end = op["time"]
    for w in windows.values():
        acked_at = [done for invoked, done in ok_sends if invoked >= w.start]
        w.unavailable_s = round(min(acked_at) - w.start, 3) if acked_at else None
    return sorted(windows.values(), key=lambda w: w.start)


def _stats(history: list[Op], sends: list, acks: list) -> dict[str, Any]:
    by_f: Counter[str] = Counter()
    for op in history:
        if op["type"] == "invoke":
            by_f[op["f"]] += 1
    outcome = Counter(done["type"] if done else "pending" for _, done in sends)
    records_read = sum(len(_records(op)) for op in history
                       if op.get("f") == "poll" and op["type"] == "ok")
    return {"operations": sum(by_f.values()), "by_function": dict(by_f),
            "sends": len(sends), "acks": len(acks), "send_fail": outcome.get("fail", 0),
            "send_info": outcome.get("info", 0), "send_pending": outcome.get("pending", 0),
            "records_read": records_read,
            "duration_s": history[-1]["time"] if history else 0.0}

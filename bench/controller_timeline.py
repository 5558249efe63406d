"""A control-plane phase's timeline, read from the brokers' logs (bench/control_plane.py).

What each part of a controller operation logs, and where this module finds it:

* the victim: ``broker N shutting down`` (its SIGTERM handler), ``controlled shutdown of
  broker N succeeded`` (the controller's answer arrived);
* the controller: ``Broker N is shutting down`` (the ControlledShutdown request reached its
  event), ``Broker change: ... dead [N]`` (the BrokerChange event saw the znode gone),
  ``won the controller election``, and for every event of 100 ms or more its breakdown
  (weir.controller.stats: queue wait, core, ZooKeeper time and operations, when each request
  batch was handed to the channels);
* the controller's channels: ``controller channel to broker N: <Request> (P partitions)
  queued .., encoded .., answered ..`` (weir.controller.channel: the answer's arrival, so
  the recipient had applied it);
* every broker: ``LeaderAndIsr from controller epoch E: P partitions applied in M ms``,
  ``deferred writes: N files in M ms`` (weir.storage.deferred_writes: the storage thread's
  batches of 1,000 files or more), and ``gc: generation G collection took M ms``
  (weir.server.gc_tuning: collections of 50 ms or more).

:func:`timeline` turns those lines into ``(seconds since the phase's action, broker,
what)`` rows; the benchmark adds its own marks (process exit, znode gone, Metadata moved).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime

__all__ = ["timeline", "timeline_lines"]

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")
_EVENT = re.compile(
    r"controller \d+: (\w+) took (\d+) ms after (\d+) ms queued: core (\d+) ms, ZooKeeper "
    r"(\d+) ms \((\d+) ops, (\d+) znodes\), send (\d+) ms, other (\d+) ms; "
    r"request batches (.*)$")
_BATCH = re.compile(r"(\d+) at \+(\d+) ms")
_CHANNEL = re.compile(r"controller channel to broker (\d+): (\w+?)(?:Request)? \((\d+) "
                      r"partitions\) queued (\d+) ms, encoded (\d+) ms, answered (\d+) ms")
_SIMPLE = (
    (re.compile(r"broker \d+ shutting down"), "shutdown starts (SIGTERM handled)"),
    (re.compile(r"controller \d+: Broker (\d+) is shutting down"),
     "ControlledShutdown of broker {0} reaches the controller's event"),
    (re.compile(r"controller \d+: Broker change: new \[(.*?)\], dead \[(.*?)\]"),
     "BrokerChange handled: new [{0}], dead [{1}]"),
    (re.compile(r"won the controller election \(epoch (\d+)\)"),
     "won the controller election (epoch {0})"),
    (re.compile(r"controlled shutdown of broker \d+ succeeded"),
     "controlled shutdown answered: succeeded"),
    (re.compile(r"LeaderAndIsr from controller epoch \d+: (\d+) partitions applied in (\d+) ms"),
     "applied LeaderAndIsr of {0} partitions ({1} ms on its loop)"),
    (re.compile(r"broker \d+ stopped cleanly in ([\d.]+) s \((.*)\)$"),
     "stopped cleanly in {0} s ({1})"),
    (re.compile(r"(\d+) logs shut down in (\d+) ms \((.*)\)$"),
     "LogManager.shutdown of {0} logs: {1} ms ({2})"),
    (re.compile(r"deferred writes: (\d+) files in (\d+) ms \((.*)\)$"),
     "storage thread wrote {0} small files in {1} ms ({2})"),
    (re.compile(r"gc: generation (\d) collection took (\d+) ms \((\d+) collected"),
     "cyclic GC: generation {0} collection of {1} ms ({2} objects freed)"),
)


def _time(line: str) -> float | None:
    m = _STAMP.match(line)
    if m is None:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def timeline(logs: Mapping[int, str], wall0: float, until_s: float = 60.0
             ) -> list[tuple[float, int, str]]:
    """Rows ``(seconds since wall0, broker, what)`` from each broker's log text (the part
    written during the phase), sorted by time, up to ``until_s``."""
    rows: list[tuple[float, int, str]] = []
    for broker, text in logs.items():
        for line in text.splitlines():
            at = _time(line)
            if at is None:
                continue
            rows.extend((round(t - wall0, 3), broker, what)
                        for t, what in _parse(line, at))
    return sorted((r for r in rows if r[0] <= until_s), key=lambda r: (r[0], r[1]))


def _parse(line: str, at: float) -> Iterable[tuple[float, str]]:
    if (m := _EVENT.search(line)) is not None:
        event, took, queued, core, zk, ops, znodes, send, other, batches = m.groups()
        dequeued = at - int(took) / 1000
        yield dequeued, f"controller dequeues {event} (queued {queued} ms)"
        for count, plus in _BATCH.findall(batches):
            yield (dequeued + int(plus) / 1000,
                   f"controller hands {event}'s batch of {count} requests to the channels")
        yield at, (f"controller done with {event}: {took} ms = core {core} ms + ZooKeeper "
                   f"{zk} ms ({ops} ops, {znodes} znodes) + send {send} ms + other {other} ms")
        return
    if (m := _CHANNEL.search(line)) is not None:
        to, kind, partitions, queued, encoded, answered = m.groups()
        yield at, (f"broker {to} answered {kind} ({partitions} partitions): queued {queued} "
                   f"ms, encoded {encoded} ms, sent → answered {answered} ms")
        return
    for pattern, what in _SIMPLE:
        if (m := pattern.search(line)) is not None:
            yield at, what.format(*m.groups())
            return


def timeline_lines(rows: Iterable[tuple[float, int, str]]) -> list[str]:
    """A markdown table of :func:`timeline` rows (plus the benchmark's own marks, broker 0)."""
    out = ["| t (s) | broker | what |", "|---|---|---|"]
    out += [f"| {t:.3f} | {b or 'bench'} | {what} |" for t, b, what in rows]
    return out

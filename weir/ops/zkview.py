"""A read-only view of the cluster from ZooKeeper, and its plain-text rendering.

:func:`collect_snapshot` reads brokers, controller and partition states through a
``ZkClient``-like object (anything with the same getters works, so tests pass a fake);
:func:`render_snapshot` turns the snapshot into tables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition


def open_zk(connect: str, timeout_s: float = 15.0) -> Any:
    """A started :class:`weir.coordination.zk.ZkClient` on ``connect`` (with chroot).

    Raises ConnectionError at once when every server refuses a TCP connection (nothing
    listens, an unknown host): the client would retry until ``timeout_s`` and then report a
    "Connection time-out". A server that does not answer is left to the client's timeout."""
    from weir.coordination.zk import ZkClient

    refused_by_all(connect)
    timeout_ms = int(timeout_s * 1000)
    client = ZkClient(connect, session_timeout_ms=timeout_ms, connection_timeout_ms=timeout_ms)
    client.start()
    return client


def refused_by_all(connect: str, probe_s: float = 2.0) -> None:
    """Raise ConnectionError naming each server of ``host:port[,...][/chroot]`` when every
    one refuses or cannot be resolved; return as soon as one accepts or does not answer."""
    import socket

    failures = []
    for address in (a.strip() for a in connect.split("/", 1)[0].split(",") if a.strip()):
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            host, port = address, "2181"  # ZooKeeper's client port
        try:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)),
                                          timeout=probe_s):
                return
        except TimeoutError:
            return  # slow, not refused: the client's own timeout decides
        except OSError as exc:
            failures.append(f"{address}: {exc.strerror or exc}")
    if failures:
        raise ConnectionError("; ".join(failures))


def close_zk(client: Any) -> None:
    """Close a client from :func:`open_zk`, quietly."""
    for name in ("stop", "close"):
        method = getattr(client, name, None)
        if callable(method):
            with contextlib.suppress(Exception):  # best effort on shutdown
                method()
            return


def _broker_id(entry: Any) -> int:
    if isinstance(entry, int):
        return entry
    return int(getattr(entry, "id", getattr(entry, "broker_id", -1)))


def registered_brokers(zk: Any) -> dict[int, int]:
    """Broker id → broker epoch (registration czxid; -1 when unknown) under ``/brokers/ids``."""
    brokers = zk.get_all_brokers()
    entries = brokers.values() if isinstance(brokers, dict) else brokers
    return {_broker_id(b): int(getattr(b, "epoch", -1)) for b in entries}


def registered_broker_ids(zk: Any) -> set[int]:
    """Ids of the brokers registered under ``/brokers/ids``."""
    return set(registered_brokers(zk))


@dataclass(frozen=True)
class BrokerRow:
    id: int
    endpoints: list[str]
    rack: str | None = None


@dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class Snapshot:
    """What ``weir status`` shows: registered brokers, controller, partitions."""

    brokers: list[BrokerRow] = field(default_factory=list)
    controller_id: int | None = None
    controller_epoch: int | None = None
    partitions: list[PartitionRow] = field(default_factory=list)

    @property
    def live_ids(self) -> set[int]:
        return {b.id for b in self.brokers}

    @property
    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})

    def offline(self) -> list[PartitionRow]:
        """Partitions with no leader, or whose leader is not registered."""
        return [p for p in self.partitions if p.leader < 0 or p.leader not in self.live_ids]

    def under_replicated(self) -> list[PartitionRow]:
        return [p for p in self.partitions if len(p.isr) < len(p.replicas)]


def _broker_row(entry: Any) -> BrokerRow:
    if hasattr(entry, "listener_endpoints"):
        endpoints = list(entry.listener_endpoints())
    else:
        endpoints = [f"{getattr(entry, 'host', '?')}:{getattr(entry, 'port', '?')}"]
    return BrokerRow(_broker_id(entry), endpoints, getattr(entry, "rack", None))


def _controller_epoch(zk: Any) -> int | None:
    getter = getattr(zk, "get_controller_epoch", None)
    if not callable(getter):
        return None
    value = getter()
    if isinstance(value, tuple):  # (epoch, zk_version)
        value = value[0]
    return None if value is None else int(value)


def collect_snapshot(zk: Any) -> Snapshot:
    """Read the cluster's state from ZooKeeper through ``zk``."""
    brokers = zk.get_all_brokers()
    if isinstance(brokers, dict):
        brokers = list(brokers.values())
    snap = Snapshot(brokers=sorted((_broker_row(b) for b in brokers), key=lambda b: b.id))
    cid = zk.get_controller_id()
    snap.controller_id = None if cid is None or cid < 0 else int(cid)
    snap.controller_epoch = _controller_epoch(zk)
    assignments: dict[TopicPartition, list[int]] = {}
    for name in sorted(zk.get_topic_names()):
        topic = zk.get_topic(name)
        if topic is None:
            continue
        for pid, replicas in sorted(topic.partitions.items()):
            assignments[TopicPartition(name, int(pid))] = list(replicas)
    states = zk.get_partition_states(list(assignments)) if assignments else {}
    for tp, replicas in assignments.items():
        state = states.get(tp)
        snap.partitions.append(PartitionRow(
            tp.topic, tp.partition,
            leader=state.leader if state else -1,
            leader_epoch=state.leader_epoch if state else -1,
            replicas=replicas, isr=list(state.isr) if state else []))
    return snap


def snapshot_from_metadata(md: Any) -> Snapshot:
    """A :class:`Snapshot` from a Kafka Metadata answer (confluent-kafka's ClusterMetadata),
    for ``weir status --bootstrap-server``: what any broker knows, without ZooKeeper (no
    leader epochs, no controller epoch)."""
    snap = Snapshot(brokers=sorted((BrokerRow(int(b.id), [f"{b.host}:{b.port}"])
                                    for b in md.brokers.values()), key=lambda b: b.id))
    cid = getattr(md, "controller_id", -1)
    snap.controller_id = None if cid is None or cid < 0 else int(cid)
    for name in sorted(md.topics):
        for p in sorted(md.topics[name].partitions.values(), key=lambda p: int(p.id)):
            snap.partitions.append(PartitionRow(name, int(p.id), int(p.leader), -1,
                                                list(p.replicas), list(p.isrs)))
    return snap


def filter_snapshot(snap: Snapshot, include_internal: bool = False,
                    under_replicated: bool = False, unavailable: bool = False) -> Snapshot:
    """The partitions ``weir status`` shows, as kafka-topics.sh --describe filters them:
    internal topics (``__consumer_offsets``, ``__transaction_state``) only when asked,
    ``--under-replicated-partitions`` (ISR smaller than the replicas),
    ``--unavailable-partitions`` (no leader, or a leader that is not registered)."""
    live = snap.live_ids
    rows = [p for p in snap.partitions if include_internal or not p.topic.startswith("__")]
    if under_replicated or unavailable:
        rows = [p for p in rows
                if (under_replicated and len(p.isr) < len(p.replicas))
                or (unavailable and (p.leader < 0 or p.leader not in live))]
    return Snapshot(brokers=snap.brokers, controller_id=snap.controller_id,
                    controller_epoch=snap.controller_epoch, partitions=rows)


def snapshot_json(snap: Snapshot, processes: dict[int, int | None] | None = None
                  ) -> dict[str, Any]:
    """``weir status --json``."""
    live = snap.live_ids
    return {
        "controller": snap.controller_id, "controller_epoch": snap.controller_epoch,
        "brokers": [{"id": b.id, "endpoints": b.endpoints, "rack": b.rack,
                     **({"pid": processes.get(b.id)} if processes is not None else {})}
                    for b in snap.brokers],
        "topics": len(snap.topics), "offline": len(snap.offline()),
        "under_replicated": len(snap.under_replicated()),
        "partitions": [{"topic": p.topic, "partition": p.partition,
                        "leader": p.leader if p.leader >= 0 else None,
                        "leader_epoch": p.leader_epoch if p.leader_epoch >= 0 else None,
                        "replicas": p.replicas, "isr": p.isr,
                        "status": _flags(p, live) or "ok"} for p in snap.partitions]}


# -- rendering ------------------------------------------------------------------------------


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain left-aligned text table with a dashed rule under the header."""
    body = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in body]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple, set)):
        return ",".join(str(v) for v in value)
    return str(value)


def render_snapshot(snap: Snapshot, processes: dict[int, int | None] | None = None,
                    partitions: bool = True) -> str:
    """Brokers, controller and (optionally) every partition, as text tables.

    ``processes`` maps broker id → local pid (None: not running) for a local cluster.
    """
    ids = sorted(snap.live_ids | set(processes or {}))
    by_id = {b.id: b for b in snap.brokers}
    rows = []
    for bid in ids:
        row: list[Any] = [bid, by_id[bid].endpoints if bid in by_id else None,
                          bid in by_id, "*" if bid == snap.controller_id else ""]
        if processes is not None:
            row.insert(1, processes.get(bid))
        rows.append(row)
    headers = ["broker", "endpoints", "registered", "controller"]
    if processes is not None:
        headers.insert(1, "pid")
    offline, under = snap.offline(), snap.under_replicated()
    out = [format_table(headers, rows), "",
           f"controller: {_cell(snap.controller_id)} (epoch {_cell(snap.controller_epoch)})",
           (f"topics: {len(snap.topics)}  partitions: {len(snap.partitions)}  "
            f"offline: {len(offline)}  under-replicated: {len(under)}")]
    if partitions and snap.partitions:
        prow = [[p.topic, p.partition, p.leader if p.leader >= 0 else "none",
                 p.leader_epoch if p.leader_epoch >= 0 else None,
                 p.replicas, p.isr, _flags(p, snap.live_ids)] for p in snap.partitions]
        out += ["", format_table(
            ["topic", "partition", "leader", "epoch", "replicas", "isr", "status"], prow)]
    return "\n".join(out)


def _flags(p: PartitionRow, live: set[int]) -> str:
    if p.leader < 0 or p.leader not in live:
        return "OFFLINE"
    if len(p.isr) < len(p.replicas):
        return "under-replicated"
    return ""

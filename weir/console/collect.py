"""What the console shows, read from the cluster; pure shaping functions beside the readers.

Three sources, as an operator's tools would use them:

* the Kafka protocol, through the console's own client (:mod:`weir.console.admin`, no native
  client library in the process): brokers, the controller id, topics and partitions
  (leader, replicas, ISR), offsets, log dirs, consumer groups with committed offsets;
* ZooKeeper, when given: ``/controller`` and ``/controller_epoch``;
* each broker's metrics endpoint (``metrics.http.port``): ``/metrics`` (Prometheus text)
  and ``/controller`` (the controller's event queue and state-change log, as JSON).

The cluster reads are in :mod:`weir.console.reader`; the metrics endpoints are fetched
concurrently by the server.  Everything handed to the page is
plain JSON built by the pure functions here (tested without a cluster).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from weir.config import effective_value, read_properties
from weir.server.metrics import parse

COUNTERS = {
    "bytesin": "kafka_server_brokertopicmetrics_bytesin_total",
    "messagesin": "kafka_server_brokertopicmetrics_messagesin_total",
    "bytesout": "kafka_server_brokertopicmetrics_bytesout_total",
    "replicationbytesout": "kafka_server_brokertopicmetrics_replicationbytesout_total",
    "isrshrinks": "kafka_server_replicamanager_isrshrinks_total",
    "isrexpands": "kafka_server_replicamanager_isrexpands_total",
    "looplagsum": "weir_event_loop_lag_ms_sum",
    "looplagcount": "weir_event_loop_lag_ms_count",
}
GAUGES = {
    "state": "kafka_server_kafkaserver_brokerstate",
    "partitions": "kafka_server_replicamanager_partitioncount",
    "leaders": "kafka_server_replicamanager_leadercount",
    "under_replicated": "kafka_server_replicamanager_underreplicatedpartitions",
    "under_min_isr": "kafka_server_replicamanager_underminisrpartitioncount",
    "active_controller": "kafka_controller_kafkacontroller_activecontrollercount",
    "offline_partitions": "kafka_controller_kafkacontroller_offlinepartitionscount",
    "event_queue_size": "kafka_controller_controllereventmanager_eventqueuesize",
}
RATE_SERIES = ("bytesin", "messagesin", "bytesout", "replicationbytesout", "isrshrinks",
               "isrexpands")


# -- metrics endpoints ----------------------------------------------------------------------


def endpoints_from_data_dir(data_dir: str | Path) -> dict[int, str]:
    """``{broker id: base URL}`` of a local cluster's brokers whose ``server.properties``
    sets ``metrics.http.port`` to a fixed port (0 and -1 give no known endpoint)."""
    from weir.ops.cluster import read_cluster_file

    state = read_cluster_file(data_dir) or {}
    out: dict[int, str] = {}
    for entry in state.get("brokers", []):
        try:
            port = effective_value(read_properties(Path(entry["config"])), "metrics.http.port")
        except (OSError, ValueError, KeyError):
            continue
        if port > 0:
            out[int(entry["id"])] = f"http://{entry.get('host') or '127.0.0.1'}:{port}"
    return out


def parse_endpoint(text: str) -> tuple[int, str]:
    """``ID=URL`` (``--metrics``): a broker id and the base URL of its metrics endpoint."""
    ident, sep, url = text.partition("=")
    if not sep or not ident.strip().isdigit() or not url.startswith(("http://", "https://")):
        raise ValueError(f"expected BROKER_ID=http://HOST:PORT, got {text!r}")
    return int(ident), url.rstrip("/").removesuffix("/metrics")


def broker_metrics(text: str) -> dict[str, float]:
    """The gauges and counters the console uses, from one ``/metrics`` body."""
    samples = parse(text)
    by_name: dict[str, float] = {}
    for (name, _labels), value in samples.items():
        by_name[name] = by_name.get(name, 0.0) + value  # sums labelled series (none here)
    out = {key: by_name[name] for key, name in {**GAUGES, **COUNTERS}.items()
           if name in by_name}
    return out


def rate_series(history: Sequence[tuple[float, Mapping[int, Mapping[str, float]]]]
                ) -> dict[str, Any]:
    """Cluster-wide rates per second between consecutive samples of the brokers' counters.

    ``history`` is ``[(time_s, {broker: {counter: value}})]``, oldest first.  A broker
    missing from either sample adds nothing to that interval; a counter that went down (the
    broker restarted) counts from 0.  The event-loop lag is the mean of the observations
    made in the interval, per broker (None when it made none).
    """
    times: list[float] = []
    series: dict[str, list[float]] = {name: [] for name in RATE_SERIES}
    lag: dict[str, list[float | None]] = {}
    brokers = sorted({b for _t, sample in history for b in sample})
    for b in brokers:
        lag[str(b)] = []
    for (t0, before), (t1, after) in itertools.pairwise(history):
        dt = t1 - t0
        if dt <= 0:
            continue
        times.append(t1)
        for name in RATE_SERIES:
            total = 0.0
            for b, now in after.items():
                prev = before.get(b)
                if prev is None or name not in now or name not in prev:
                    continue
                delta = now[name] - prev[name]
                total += (now[name] if delta < 0 else delta) / dt
            series[name].append(total)
        for b in brokers:
            now, prev = after.get(b, {}), before.get(b, {})
            count = now.get("looplagcount", 0) - prev.get("looplagcount", 0)
            total_ms = now.get("looplagsum", 0) - prev.get("looplagsum", 0)
            lag[str(b)].append(total_ms / count if count > 0 and "looplagcount" in prev
                               else None)
    return {"t": times, **series, "loop_lag_ms": lag}


# -- topics and partitions --------------------------------------------------------------------


def partition_row(topic: str, partition: int, leader: int, replicas: Sequence[int],
                  isr: Sequence[int], live: Iterable[int]) -> dict[str, Any]:
    """One partition as the page shows it: under-replicated when the ISR is smaller than
    the replica set; offline when no live broker leads it (Kafka's OfflinePartitionsCount)."""
    live_set = set(live)
    offline = leader < 0 or leader not in live_set
    return {"topic": topic, "partition": partition, "leader": leader,
            "replicas": list(replicas), "isr": list(isr),
            "under_replicated": len(isr) < len(replicas), "offline": offline}


def topic_rows(metadata: Any) -> list[dict[str, Any]]:
    """Topics of a Metadata response (kio), partitions in order; a topic's error by Kafka's
    name."""
    from weir.console.admin import error_name

    live = [int(b.node_id) for b in metadata.brokers]
    topics = []
    for meta in sorted(metadata.topics, key=lambda t: t.name):
        parts = [partition_row(meta.name, int(p.partition_index), int(p.leader_id),
                               [int(r) for r in p.replica_nodes], [int(r) for r in p.isr_nodes],
                               live)
                 for p in sorted(meta.partitions, key=lambda p: int(p.partition_index))]
        topics.append({"name": meta.name,
                       "internal": bool(meta.is_internal) or meta.name.startswith("__"),
                       "error": error_name(meta.error_code), "partitions": parts,
                       "under_replicated": sum(p["under_replicated"] for p in parts),
                       "offline": sum(p["offline"] for p in parts)})
    return topics


def group_lag_rows(committed: Mapping[tuple[str, int], int],
                   ends: Mapping[tuple[str, int], int],
                   owners: Mapping[tuple[str, int], str]) -> list[dict[str, Any]]:
    """Per-partition lag of one group: log end offset minus committed offset (None when
    either is unknown), as kafka-consumer-groups.sh prints it."""
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        current, end = committed.get(tp), ends.get(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "current_offset": current,
                     "log_end_offset": end,
                     "lag": end - current if end is not None and current is not None else None,
                     "member": owners.get(tp)})
    return rows


# -- ZooKeeper -----------------------------------------------------------------------------------


def read_zookeeper(zk: Any) -> dict[str, Any]:
    """``/controller`` (id) and ``/controller_epoch`` through a ZkClient, plus the
    registered brokers (``/brokers/ids``)."""
    from weir.ops.zkview import registered_brokers

    epoch = zk.get_controller_epoch()
    return {"controller_id": zk.get_controller_id(),
            "epoch": None if epoch is None else int(epoch[0]),
            "registered": sorted(registered_brokers(zk))}


def now_s() -> float:
    return time.time()

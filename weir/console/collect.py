"""What the console shows, read from the cluster; pure shaping functions beside the readers.

Three sources, as an operator's tools would use them:

* the Kafka protocol (confluent-kafka's AdminClient): brokers, the controller id, topics and
  partitions (leader, replicas, ISR), consumer groups with committed and log end offsets;
* ZooKeeper, when given: ``/controller`` and ``/controller_epoch``;
* each broker's metrics endpoint (``metrics.http.port``): ``/metrics`` (Prometheus text)
  and ``/controller`` (the controller's event queue and state-change log, as JSON).

The blocking AdminClient calls run on a worker thread (:meth:`AdminReader.read`); the
metrics endpoints are fetched concurrently by the server.  Everything handed to the page is
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
MAX_GROUPS = 50


# -- metrics endpoints ----------------------------------------------------------------------


def endpoints_from_data_dir(data_dir: str | Path) -> dict[int, str]:
    """``{broker id: base URL}`` of a local cluster's brokers whose ``server.properties``
    sets ``metrics.http.port`` to a fixed port (0 and -1 give no known endpoint)."""
    from weir.cli.cluster import read_cluster_file

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
    """Topics of a confluent-kafka ClusterMetadata, partitions in order."""
    live = [int(b) for b in metadata.brokers]
    topics = []
    for name in sorted(metadata.topics):
        meta = metadata.topics[name]
        parts = [partition_row(name, int(p.id), int(p.leader), [int(r) for r in p.replicas],
                               [int(r) for r in p.isrs], live)
                 for p in sorted(meta.partitions.values(), key=lambda p: int(p.id))]
        error = meta.error.str() if meta.error is not None else None
        topics.append({"name": name, "internal": name.startswith("__"), "error": error,
                       "partitions": parts,
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


# -- the AdminClient reader ---------------------------------------------------------------------


def _error_text(exc: Any) -> str | None:
    """``NAME: message`` of a confluent-kafka KafkaException (None for no error)."""
    if exc is None:
        return None
    err = exc.args[0] if getattr(exc, "args", None) else exc
    if hasattr(err, "name") and hasattr(err, "str"):
        return f"{err.name()}: {err.str()}"
    return str(err)


def _enum_name(value: Any) -> str:
    name = getattr(value, "name", None)
    return str(name if name is not None else value)


class AdminReader:
    """Blocking reads through confluent-kafka's AdminClient (run it on a worker thread)."""

    def __init__(self, bootstrap: str, timeout_s: float = 5.0) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self._admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0,
                                   "socket.timeout.ms": int(timeout_s * 1000)})

    def _wait(self, future: Any) -> Any:
        return future.result(timeout=self.timeout_s + 2)

    def read(self) -> dict[str, Any]:
        """Brokers, controller id, topics and groups (raises on a failed Metadata)."""
        md = self._admin.list_topics(timeout=self.timeout_s)
        brokers = [{"id": int(b.id), "host": b.host, "port": int(b.port)}
                   for b in sorted(md.brokers.values(), key=lambda b: int(b.id))]
        topics = topic_rows(md)
        return {"brokers": brokers, "controller_id": int(md.controller_id),
                "topics": topics, "groups": self.read_groups()}

    def read_groups(self) -> list[dict[str, Any]]:
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException

        try:
            listed = self._wait(self._admin.list_consumer_groups(
                request_timeout=self.timeout_s))
        except KafkaException:
            return []
        ids = sorted(g.group_id for g in listed.valid)[:MAX_GROUPS]
        if not ids:
            return []
        described = self._admin.describe_consumer_groups(ids, request_timeout=self.timeout_s)
        groups = []
        wanted: set[tuple[str, int]] = set()
        for gid in ids:
            try:
                desc = self._wait(described[gid])
                fetched = self._wait(self._admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(gid)], request_timeout=self.timeout_s)[gid])
            except KafkaException as exc:
                groups.append({"group": gid, "state": "?", "error": str(exc.args[0]),
                               "members": 0, "committed": {}, "owners": {}})
                continue
            committed = {(tp.topic, tp.partition): tp.offset
                         for tp in fetched.topic_partitions or [] if tp.offset >= 0}
            owners = {(tp.topic, tp.partition): m.client_id or m.member_id
                      for m in desc.members for tp in m.assignment.topic_partitions}
            wanted |= set(committed) | set(owners)
            groups.append({"group": gid, "state": _enum_name(desc.state), "error": None,
                           "members": len(desc.members), "committed": committed,
                           "owners": owners})
        ends = self.log_end_offsets(wanted)
        out = []
        for g in groups:
            rows = group_lag_rows(g.pop("committed"), ends, g.pop("owners"))
            g["partitions"] = rows
            g["total_lag"] = sum(r["lag"] for r in rows if r["lag"] is not None)
            out.append(g)
        return out

    def log_end_offsets(self, partitions: Iterable[tuple[str, int]]
                        ) -> dict[tuple[str, int], int]:
        from confluent_kafka import KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in sorted(partitions)}
        if not request:
            return {}
        out = {}
        for tp, future in self._admin.list_offsets(
                request, request_timeout=self.timeout_s).items():
            try:
                out[(tp.topic, tp.partition)] = int(self._wait(future).offset)
            except (KafkaException, TimeoutError):
                continue  # e.g. the partition is offline: shown as unknown
        return out

    def elect_preferred(self, partitions: Sequence[tuple[str, int]] | None
                        ) -> dict[str, str | None]:
        """ElectLeaders (PREFERRED) for ``partitions`` (None: all); per partition the error
        text or None."""
        from confluent_kafka import ElectionType, KafkaException, TopicPartition

        tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        # No keyword options: confluent-kafka 2.x passes them on wrongly (a SystemError).
        future = self._admin.elect_leaders(ElectionType.PREFERRED, tps)
        try:
            result = self._wait(future)
        except KafkaException as exc:
            return {"*": str(exc.args[0])}
        return {f"{tp.topic}-{tp.partition}": _error_text(err) for tp, err in result.items()}


# -- ZooKeeper -----------------------------------------------------------------------------------


def read_zookeeper(zk: Any) -> dict[str, Any]:
    """``/controller`` (id) and ``/controller_epoch`` through a ZkClient, plus the
    registered brokers (``/brokers/ids``)."""
    from weir.cli.zkview import registered_brokers

    epoch = zk.get_controller_epoch()
    return {"controller_id": zk.get_controller_id(),
            "epoch": None if epoch is None else int(epoch[0]),
            "registered": sorted(registered_brokers(zk))}


def now_s() -> float:
    return time.time()

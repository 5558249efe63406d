"""Broker metrics in Prometheus text format, named after Kafka's JMX MBeans.

Kafka exposes its metrics over JMX; operators usually scrape them through the Prometheus JMX
exporter, which flattens ``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions``
to ``kafka_server_replicamanager_underreplicatedpartitions`` (lower case, MBean key
properties such as ``topic`` and ``partition`` become labels, ``...PerSec`` meters become
``..._total`` counters).  Weir serves the same names directly from a small HTTP endpoint,
enabled by the broker key ``metrics.http.port`` (Weir's own key; see docs/metrics.md).

Three layers, each testable alone:

* :func:`collect` reads a :class:`MetricsSource` (the broker's parts, read-only) into a
  :class:`MetricsSnapshot` (plain values);
* :func:`families` turns a snapshot into prometheus_client metric families, which a custom
  collector (:class:`SnapshotCollector`) hands to a ``CollectorRegistry``; :func:`render` is
  the registry's text exposition (prometheus_client's ``generate_latest``);
* :class:`MetricsServer` answers ``GET /metrics`` with the broker's registry (its snapshot
  collector plus the event-loop lag histogram of :mod:`weir.server.loop_lag`) and
  ``GET /controller`` with the controller's state as JSON (:func:`controller_json`).

Everything but the lag histogram is computed when a scrape arrives; nothing runs on the
produce/fetch paths except the counters that
:class:`~weir.replication.replica_manager.ReplicaManager` keeps (ISR changes, bytes in/out).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.parser import text_string_to_metric_families

from weir.common import TopicPartition
from weir.protocol.errors import KafkaError
from weir.server.loop_lag import EventLoopLagMonitor

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # what generate_latest writes
JSON_TYPE = "application/json"
MAX_REQUEST_HEAD = 8192
READ_TIMEOUT_S = 10.0

# kafka.server:type=KafkaServer,name=BrokerState values (Kafka's BrokerState enum).
STATE_STARTING = 1
STATE_RUNNING = 3
STATE_SHUTTING_DOWN = 7

Labels = tuple[tuple[str, str], ...]


# -- snapshot -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionSnapshot:
    """One partition hosted by this broker, as seen at scrape time."""

    tp: TopicPartition
    is_leader: bool
    leader: int
    replicas: int
    isr: int
    min_isr: int
    log_start_offset: int
    log_end_offset: int
    size_bytes: int
    num_segments: int | None = None
    follower_lag: int | None = None  # None: not followed by a fetcher here


@dataclass(slots=True)
class ControllerSnapshot:
    """What the active controller knows (all zero on the other brokers, as in Kafka)."""

    active: bool = False
    offline_partitions: int = 0
    global_topics: int = 0
    global_partitions: int = 0
    event_queue_size: int = 0
    timers: dict[str, Any] = field(default_factory=dict)
    """Kafka's controller timers on this broker (active or not), by metric family name:
    ``TimerHistogram``s of weir.controller.stats."""


@dataclass(slots=True)
class MetricsSnapshot:
    broker_state: int = STATE_RUNNING
    partitions: list[PartitionSnapshot] = field(default_factory=list)
    isr_shrinks: int = 0
    isr_expands: int = 0
    failed_isr_updates: int = 0
    offline_log_dirs: int = 0
    pending_small_file_writes: int = 0  # the storage thread's backlog (deferred_writes)
    bytes_in: int = 0
    messages_in: int = 0
    bytes_out: int = 0
    replication_bytes_out: int = 0
    controller: ControllerSnapshot = field(default_factory=ControllerSnapshot)
    fetch_sessions: int = 0
    fetch_session_partitions: int = 0
    fetch_session_evictions: int = 0
    cleaner: dict[str, float] = field(default_factory=dict)  # LogCleaner gauges by name


# -- collection -----------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricsSource:
    """What ``/metrics`` reads of the broker, each a public, named part (a read-only view:
    collection never changes them)."""

    replica_manager: Any
    log_manager: Any
    min_isr: Callable[[str], int]  # a topic's effective min.insync.replicas
    state: Callable[[], int]  # Kafka's BrokerState code (see broker_state)
    controller: Callable[[], Any]  # the ControllerService, once started
    fetch_sessions: Any = None  # the FetchSessionCache (KIP-227)
    log_cleaner: Any = None


def broker_state(stopping: bool, broker_epoch: int) -> int:
    """Kafka's BrokerState code: Starting until registered, RunningAsBroker, ShuttingDown."""
    if stopping:
        return STATE_SHUTTING_DOWN
    return STATE_RUNNING if broker_epoch >= 0 else STATE_STARTING


def _partition_snapshot(rm: Any, p: Any, min_isr: int) -> PartitionSnapshot | None:
    plog = p.log
    if plog is None:
        return None
    return PartitionSnapshot(
        tp=p.tp, is_leader=p.is_leader, leader=p.leader, replicas=len(p.replicas),
        isr=len(p.isr), min_isr=min_isr, log_start_offset=plog.log_start_offset,
        log_end_offset=plog.log_end_offset, size_bytes=plog.size_bytes,
        num_segments=len(plog.segments),
        follower_lag=None if p.is_leader else rm.fetchers.lag(p.tp),
    )


def _min_isr(source: MetricsSource, topic: str) -> int:
    try:
        return int(source.min_isr(topic))
    except (KafkaError, KeyError, ValueError):  # e.g. a topic whose overrides are invalid
        return 1


def controller_snapshot(controller: Any) -> ControllerSnapshot:
    """The active controller's gauges from its context (zeros when not active)."""
    timers = _controller_timers(getattr(controller, "stats", None))
    if controller is None or not controller.is_active:
        return ControllerSnapshot(timers=timers)
    ctx = controller.core.ctx
    return ControllerSnapshot(
        active=True, offline_partitions=ctx.offline_partition_count(),
        global_topics=len(ctx.topic_ids), global_partitions=sum(1 for _ in ctx.all_partitions()),
        event_queue_size=int(getattr(controller, "event_queue_size", 0)), timers=timers,
    )


def _controller_timers(stats: Any) -> dict[str, Any]:
    """kafka.controller:type=ControllerEventManager,name=EventQueue(Processing)TimeMs and
    type=ControllerStats,name=<state>RateAndTimeMs, by family name."""
    if stats is None:
        return {}
    manager = "kafka_controller_controllereventmanager_"
    timers = {manager + "eventqueuetimems": stats.event_queue_time,
              manager + "eventqueueprocessingtimems": stats.event_queue_processing_time}
    for name, histogram in sorted(stats.rate_and_time.items()):
        timers["kafka_controller_controllerstats_" + name.lower()] = histogram
    return timers


def collect(source: MetricsSource) -> MetricsSnapshot:
    """Read the broker's parts into a snapshot (runs on the event loop, at scrape time)."""
    rm = source.replica_manager
    partitions = []
    for p in list(rm.partitions.values()):
        snap = _partition_snapshot(rm, p, _min_isr(source, p.tp.topic))
        if snap is not None:
            partitions.append(snap)
    return MetricsSnapshot(
        broker_state=source.state(),
        partitions=partitions,
        isr_shrinks=getattr(rm, "isr_shrinks", 0),
        isr_expands=getattr(rm, "isr_expands", 0),
        failed_isr_updates=getattr(rm, "failed_isr_updates", 0),
        offline_log_dirs=len(source.log_manager.offline_dirs),
        pending_small_file_writes=_pending_writes(source.log_manager),
        bytes_in=getattr(rm, "bytes_in", 0),
        messages_in=getattr(rm, "messages_in", 0),
        bytes_out=getattr(getattr(rm, "reads", None), "bytes_out", 0),
        replication_bytes_out=getattr(getattr(rm, "reads", None), "replication_bytes_out", 0),
        controller=controller_snapshot(source.controller()),
        **_fetch_session_counts(source.fetch_sessions),
        cleaner=_cleaner_values(source.log_cleaner),
    )


def _pending_writes(log_manager: Any) -> int:
    """Checkpoint and ``partition.metadata`` files queued for the storage thread, or being
    written by it (weir.storage.deferred_writes)."""
    deferred = getattr(log_manager, "deferred", None)
    return deferred.pending if deferred is not None else 0


def _cleaner_values(cleaner: Any) -> dict[str, float]:
    """Kafka's kafka.log:type=LogCleaner / LogCleanerManager gauges."""
    if cleaner is None:
        return {}
    m = cleaner.metrics
    return {
        "kafka_log_logcleaner_cleaner_recopy_percent": m.cleaner_recopy_percent,
        "kafka_log_logcleaner_max_buffer_utilization_percent":
            m.max_buffer_utilization_percent,
        "kafka_log_logcleaner_max_clean_time_secs": m.max_clean_time_secs,
        "kafka_log_logcleaner_max_compaction_delay_secs": m.max_compaction_delay_secs,
        "kafka_log_logcleaner_deadthreadcount": m.dead_thread_count,
        "kafka_log_logcleanermanager_max_dirty_percent": m.max_dirty_percent,
        "kafka_log_logcleanermanager_time_since_last_run_ms": m.time_since_last_run_ms,
        "kafka_log_logcleanermanager_uncleanable_partitions_count":
            m.uncleanable_partitions_count,
    }


def _fetch_session_counts(cache: Any) -> dict[str, int]:
    if cache is None:
        return {}
    return {"fetch_sessions": len(cache.sessions),
            "fetch_session_partitions": cache.num_partitions,
            "fetch_session_evictions": cache.evictions}


# -- families (prometheus_client) --------------------------------------------------------------


def _gauge(name: str, doc: str, value: float | None = None,
           labels: Iterable[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value, labels=labels)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    """``name`` without ``_total``: the exposition adds it (``..._total``)."""
    return CounterMetricFamily(name, doc, value=value)


TP_LABELS = ("topic", "partition")


def _tp(tp: TopicPartition) -> list[str]:
    return [tp.topic, str(tp.partition)]


def _replica_manager_families(snap: MetricsSnapshot) -> list[Metric]:
    leaders = [p for p in snap.partitions if p.is_leader]
    prefix = "kafka_server_replicamanager_"
    return [
        _gauge(prefix + "partitioncount",
               "Partitions hosted by this broker (ReplicaManager PartitionCount).",
               len(snap.partitions)),
        _gauge(prefix + "leadercount",
               "Partitions this broker leads (ReplicaManager LeaderCount).", len(leaders)),
        _gauge(prefix + "underreplicatedpartitions",
               "Led partitions whose ISR is smaller than the replica set.",
               sum(1 for p in leaders if p.isr < p.replicas)),
        _gauge(prefix + "underminisrpartitioncount",
               "Led partitions whose ISR is below min.insync.replicas.",
               sum(1 for p in leaders if p.isr < p.min_isr)),
        _gauge(prefix + "atminisrpartitioncount",
               "Led partitions whose ISR is exactly min.insync.replicas.",
               sum(1 for p in leaders if p.isr == p.min_isr)),
        _counter(prefix + "isrshrinks",
                 "ISR shrinks committed by the controller for partitions led here "
                 "(IsrShrinksPerSec count).", snap.isr_shrinks),
        _counter(prefix + "isrexpands",
                 "ISR expansions committed by the controller for partitions led here "
                 "(IsrExpandsPerSec count).", snap.isr_expands),
        _counter(prefix + "failedisrupdates",
                 "ISR changes the controller refused (FailedIsrUpdatesPerSec count).",
                 snap.failed_isr_updates),
    ]


def _broker_topic_families(snap: MetricsSnapshot) -> list[Metric]:
    """kafka.server:type=BrokerTopicMetrics (the broker-wide meters, no topic tag)."""
    prefix = "kafka_server_brokertopicmetrics_"
    return [
        _counter(prefix + "bytesin", "Bytes appended by producers to partitions led here "
                 "(BytesInPerSec count).", snap.bytes_in),
        _counter(prefix + "messagesin", "Records appended by producers to partitions led "
                 "here (MessagesInPerSec count).", snap.messages_in),
        _counter(prefix + "bytesout", "Bytes returned to consumers by Fetch "
                 "(BytesOutPerSec count).", snap.bytes_out),
        _counter(prefix + "replicationbytesout", "Bytes returned to follower replicas by "
                 "Fetch (ReplicationBytesOutPerSec count).", snap.replication_bytes_out),
    ]


def _fetcher_families(snap: MetricsSnapshot) -> list[Metric]:
    followed = [p for p in snap.partitions if p.follower_lag is not None]
    max_lag = max((p.follower_lag or 0 for p in followed), default=0)
    lag = _gauge("kafka_server_fetcherlagmetrics_consumerlag",
                 "Messages this follower is behind the leader's high watermark.",
                 labels=("clientId", *TP_LABELS))
    for p in followed:
        lag.add_metric([f"ReplicaFetcherThread-0-{p.leader}", *_tp(p.tp)], p.follower_lag or 0)
    max_family = _gauge("kafka_server_replicafetchermanager_maxlag",
                        "Largest lag over the partitions followed by this broker.",
                        labels=("clientId",))
    max_family.add_metric(["Replica"], max_lag)
    return [max_family, lag]


def _partition_families(snap: MetricsSnapshot) -> list[Metric]:
    """kafka.cluster:type=Partition,... — non-zero on the leader only, as in Kafka."""
    prefix = "kafka_cluster_partition_"
    under = _gauge(prefix + "underreplicated",
                   "1 if this broker leads the partition and its ISR is incomplete.",
                   labels=TP_LABELS)
    isr = _gauge(prefix + "insyncreplicascount", "ISR size (on the leader; 0 elsewhere).",
                 labels=TP_LABELS)
    replicas = _gauge(prefix + "replicascount", "Replica count (on the leader; 0 elsewhere).",
                      labels=TP_LABELS)
    under_min = _gauge(prefix + "underminisr",
                       "1 if this broker leads the partition and its ISR < min.insync.replicas.",
                       labels=TP_LABELS)
    for p in snap.partitions:
        labels = _tp(p.tp)
        under.add_metric(labels, int(p.is_leader and p.isr < p.replicas))
        isr.add_metric(labels, p.isr if p.is_leader else 0)
        replicas.add_metric(labels, p.replicas if p.is_leader else 0)
        under_min.add_metric(labels, int(p.is_leader and p.isr < p.min_isr))
    return [under, isr, replicas, under_min]


def _log_families(snap: MetricsSnapshot) -> list[Metric]:
    end = _gauge("kafka_log_log_logendoffset", "Log end offset of each local log.",
                 labels=TP_LABELS)
    start = _gauge("kafka_log_log_logstartoffset", "Log start offset of each local log.",
                   labels=TP_LABELS)
    size = _gauge("kafka_log_log_size", "Bytes of each local log on disk.", labels=TP_LABELS)
    segments = _gauge("kafka_log_log_numlogsegments", "Segments of each local log.",
                      labels=TP_LABELS)
    for p in snap.partitions:
        labels = _tp(p.tp)
        end.add_metric(labels, p.log_end_offset)
        start.add_metric(labels, p.log_start_offset)
        size.add_metric(labels, p.size_bytes)
        if p.num_segments is not None:
            segments.add_metric(labels, p.num_segments)
    offline = _gauge("kafka_log_logmanager_offlinelogdirectorycount",
                     "Log directories marked offline after an I/O error.", snap.offline_log_dirs)
    pending = _gauge("weir_storage_pending_small_file_writes",
                     "Checkpoint and partition.metadata files queued for the storage thread "
                     "or being written by it.", snap.pending_small_file_writes)
    return [end, start, size, segments, offline, pending]


def _controller_families(snap: MetricsSnapshot) -> list[Metric]:
    c = snap.controller
    prefix = "kafka_controller_kafkacontroller_"
    return [
        _gauge(prefix + "activecontrollercount", "1 on the active controller, 0 elsewhere.",
               int(c.active)),
        _gauge(prefix + "offlinepartitionscount",
               "Partitions without a live leader (active controller only).",
               c.offline_partitions),
        _gauge(prefix + "globaltopiccount", "Topics in the cluster (active controller only).",
               c.global_topics),
        _gauge(prefix + "globalpartitioncount",
               "Partitions in the cluster (active controller only).", c.global_partitions),
        _gauge("kafka_controller_controllereventmanager_eventqueuesize",
               "Events waiting for the controller (active controller only).",
               c.event_queue_size),
        *(HistogramMetricFamily(name, "Kafka's controller timer of the same name, in ms.",
                                buckets=h.cumulative(), sum_value=h.sum_ms)
          for name, h in c.timers.items()),
    ]


def families(snap: MetricsSnapshot) -> list[Metric]:
    """Every metric family of a snapshot, in a stable order."""
    return [
        _gauge("kafka_server_kafkaserver_brokerstate",
               "Broker state: 1 Starting, 3 RunningAsBroker, 7 BrokerShuttingDown.",
               snap.broker_state),
        *_replica_manager_families(snap),
        *_broker_topic_families(snap),
        *_fetcher_families(snap),
        *_partition_families(snap),
        *_log_families(snap),
        *_controller_families(snap),
        *_fetch_session_families(snap),
        *(_gauge(name, f"Kafka's LogCleaner gauge {name} (log compaction).", value)
          for name, value in sorted(snap.cleaner.items())),
    ]


def _fetch_session_families(snap: MetricsSnapshot) -> list[Metric]:
    """kafka.server:type=FetchSessionCache (incremental fetch sessions, KIP-227)."""
    prefix = "kafka_server_fetchsessioncache_"
    return [
        _gauge(prefix + "numincrementalfetchsessions",
               "Incremental fetch sessions in the cache (NumIncrementalFetchSessions).",
               snap.fetch_sessions),
        _gauge(prefix + "numincrementalfetchpartitionscached",
               "Partitions in all cached fetch sessions (NumIncrementalFetchPartitionsCached).",
               snap.fetch_session_partitions),
        _counter(prefix + "incrementalfetchsessionevictions",
                 "Fetch sessions evicted to make room for new ones "
                 "(IncrementalFetchSessionEvictionsPerSec count).", snap.fetch_session_evictions),
    ]


class SnapshotCollector:
    """A prometheus_client custom collector: each scrape reads a fresh snapshot."""

    def __init__(self, snapshot: Callable[[], MetricsSnapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        yield from families(self._snapshot())


def registry_for(snapshot: Callable[[], MetricsSnapshot]) -> CollectorRegistry:
    """A registry of its own (never the process-global one: tests run several brokers)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return registry


def render(snap: MetricsSnapshot) -> str:
    """The ``/metrics`` body of a snapshot (pure)."""
    return generate_latest(registry_for(lambda: snap)).decode()


# -- parsing (tests, tools) -------------------------------------------------------------------


def parse(text: str) -> dict[tuple[str, Labels], float]:
    """Samples of a text exposition by (name, sorted labels), via prometheus_client's parser."""
    samples: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return samples


# -- the controller as JSON -------------------------------------------------------------------


def controller_json(broker_id: int, controller: Any) -> dict[str, Any]:
    """``GET /controller``: whether this broker is the active controller, its epoch, event
    queue and the newest lines of its state-change log (weir.controller.service)."""
    if controller is None:
        return {"broker_id": broker_id, "active": False}
    active = bool(controller.is_active)
    doc: dict[str, Any] = {
        "broker_id": broker_id, "active": active,
        "epoch": controller.core.ctx.controller_epoch if active else None,
        "event_queue_size": int(getattr(controller, "event_queue_size", 0)),
        "current_event": getattr(controller, "current_event", None),
        "events_processed": int(getattr(controller, "events_processed", 0)),
        "state_changes": [c.to_json() for c in list(getattr(controller, "state_changes", ()))],
    }
    return doc


# -- HTTP endpoint ----------------------------------------------------------------------------


class MetricsServer:
    """A minimal HTTP/1.1 server: ``GET /metrics`` → the exposition, ``GET /controller`` →
    JSON (when ``controller_doc`` is given); one request per connection (``Connection:
    close``).  The callables run on the event loop."""

    def __init__(self, render_body: Callable[[], str], host: str, port: int, *,
                 controller_doc: Callable[[], dict[str, Any]] | None = None,
                 lag_monitor: EventLoopLagMonitor | None = None) -> None:
        self._render_body = render_body
        self._controller_doc = controller_doc
        self.lag_monitor = lag_monitor
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    @classmethod
    def for_broker(cls, source: MetricsSource, broker_id: int, host: str,
                   port: int, collectors: tuple = ()) -> MetricsServer:
        """``collectors``: more custom collectors (the topic tables' gauges)."""
        registry = registry_for(lambda: collect(source))
        for collector in collectors:
            registry.register(collector)
        monitor = EventLoopLagMonitor(registry)
        return cls(lambda: generate_latest(registry).decode(), host, port,
                   controller_doc=lambda: controller_json(broker_id, source.controller()),
                   lag_monitor=monitor)

    async def start(self) -> int:
        """Bind (port 0: any free port) and return the bound port."""
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.lag_monitor is not None:
            self.lag_monitor.start()
        log.info("metrics endpoint listening on http://%s:%d/metrics",
                 self.host or "0.0.0.0", self.port)
        return self.port

    async def stop(self) -> None:
        if self.lag_monitor is not None:
            await self.lag_monitor.stop()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        content_type = CONTENT_TYPE
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            status, body, content_type = self._respond(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError):
            status, body = "400 Bad Request", "bad request\n"
        try:
            payload = body.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass

    def _respond(self, head: bytes) -> tuple[str, str, str]:
        """(status, body, content type) of one request head."""
        if len(head) > MAX_REQUEST_HEAD:
            return "431 Request Header Fields Too Large", "headers too large\n", CONTENT_TYPE
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3:
            return "400 Bad Request", "bad request\n", CONTENT_TYPE
        method, target, _version = parts
        if method != "GET":
            return "405 Method Not Allowed", "only GET\n", CONTENT_TYPE
        path = target.split("?", 1)[0]
        try:
            if path == "/metrics":
                return "200 OK", self._render_body(), CONTENT_TYPE
            if path == "/controller" and self._controller_doc is not None:
                return "200 OK", json.dumps(self._controller_doc()) + "\n", JSON_TYPE
        except Exception:
            log.exception("rendering %s failed", path)
            return "500 Internal Server Error", "metrics failed\n", CONTENT_TYPE
        return "404 Not Found", "try /metrics\n", CONTENT_TYPE

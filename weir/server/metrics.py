"""Broker metrics in Prometheus text format, named after Kafka's JMX MBeans.

Kafka exposes its metrics over JMX; operators usually scrape them through the Prometheus JMX
exporter, which flattens ``kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions``
to ``kafka_server_replicamanager_underreplicatedpartitions`` (lower case, MBean key
properties such as ``topic`` and ``partition`` become labels, ``...PerSec`` meters become
``..._total`` counters).  Weir serves the same names directly from a small HTTP endpoint,
enabled by the broker key ``metrics.http.port`` (Weir's own key; see docs/metrics.md).

Three layers, each testable alone:

* :func:`collect` reads the broker's objects into a :class:`MetricsSnapshot` (plain values);
* :func:`render` turns a snapshot into the exposition text (a pure function);
* :class:`MetricsServer` answers ``GET /metrics`` with ``render(collect(broker))``.

Everything is computed when a scrape arrives; nothing runs on the produce/fetch paths
except the ISR change counters that :class:`~weir.replication.replica_manager.ReplicaManager`
bumps when the controller confirms an ISR change.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition
from weir.protocol.errors import KafkaError

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
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


@dataclass(slots=True)
class MetricsSnapshot:
    broker_state: int = STATE_RUNNING
    partitions: list[PartitionSnapshot] = field(default_factory=list)
    isr_shrinks: int = 0
    isr_expands: int = 0
    failed_isr_updates: int = 0
    offline_log_dirs: int = 0
    controller: ControllerSnapshot = field(default_factory=ControllerSnapshot)


# -- collection -----------------------------------------------------------------------------


def broker_state(broker: Any) -> int:
    """Kafka's BrokerState code: Starting until registered, RunningAsBroker, ShuttingDown."""
    stopping = getattr(broker, "_stopping", None)
    if stopping is not None and stopping.is_set():
        return STATE_SHUTTING_DOWN
    return STATE_RUNNING if getattr(broker, "broker_epoch", -1) >= 0 else STATE_STARTING


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


def _min_isr(broker: Any, topic: str) -> int:
    try:
        return int(broker.topic_min_isr(topic))
    except (KafkaError, KeyError, ValueError):  # e.g. a topic whose overrides are invalid
        return 1


def controller_snapshot(controller: Any) -> ControllerSnapshot:
    """The active controller's gauges from its context (zeros when not active)."""
    if controller is None or not controller.is_active:
        return ControllerSnapshot()
    ctx = controller.core.ctx
    return ControllerSnapshot(
        active=True, offline_partitions=ctx.offline_partition_count(),
        global_topics=len(ctx.topic_ids), global_partitions=sum(1 for _ in ctx.all_partitions()),
    )


def collect(broker: Any) -> MetricsSnapshot:
    """Read the broker's objects into a snapshot (runs on the event loop, at scrape time)."""
    rm = broker.replica_manager
    partitions = []
    for p in list(rm.partitions.values()):
        snap = _partition_snapshot(rm, p, _min_isr(broker, p.tp.topic))
        if snap is not None:
            partitions.append(snap)
    return MetricsSnapshot(
        broker_state=broker_state(broker),
        partitions=partitions,
        isr_shrinks=getattr(rm, "isr_shrinks", 0),
        isr_expands=getattr(rm, "isr_expands", 0),
        failed_isr_updates=getattr(rm, "failed_isr_updates", 0),
        offline_log_dirs=len(broker.log_manager.offline_dirs),
        controller=controller_snapshot(broker.controller),
    )


# -- rendering ------------------------------------------------------------------------------


@dataclass(slots=True)
class Family:
    """One metric family: ``# HELP``/``# TYPE`` and its samples."""

    name: str
    kind: str  # "gauge" | "counter"
    help: str
    samples: list[tuple[Labels, float]] = field(default_factory=list)

    def add(self, value: float, labels: Labels = ()) -> Family:
        self.samples.append((labels, value))
        return self


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_value(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def format_families(families: Iterable[Family]) -> str:
    """The Prometheus text exposition (format 0.0.4) of ``families``."""
    lines: list[str] = []
    for fam in families:
        lines.append(f"# HELP {fam.name} {_escape(fam.help)}")
        lines.append(f"# TYPE {fam.name} {fam.kind}")
        for labels, value in fam.samples:
            label_text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            name = f"{fam.name}{{{label_text}}}" if labels else fam.name
            lines.append(f"{name} {_format_value(value)}")
    return "\n".join(lines) + "\n"


def _tp_labels(tp: TopicPartition) -> Labels:
    return (("topic", tp.topic), ("partition", str(tp.partition)))


def _replica_manager_families(snap: MetricsSnapshot) -> list[Family]:
    leaders = [p for p in snap.partitions if p.is_leader]
    prefix = "kafka_server_replicamanager_"
    return [
        Family(prefix + "partitioncount", "gauge",
               "Partitions hosted by this broker (ReplicaManager PartitionCount).")
        .add(len(snap.partitions)),
        Family(prefix + "leadercount", "gauge",
               "Partitions this broker leads (ReplicaManager LeaderCount).").add(len(leaders)),
        Family(prefix + "underreplicatedpartitions", "gauge",
               "Led partitions whose ISR is smaller than the replica set.")
        .add(sum(1 for p in leaders if p.isr < p.replicas)),
        Family(prefix + "underminisrpartitioncount", "gauge",
               "Led partitions whose ISR is below min.insync.replicas.")
        .add(sum(1 for p in leaders if p.isr < p.min_isr)),
        Family(prefix + "atminisrpartitioncount", "gauge",
               "Led partitions whose ISR is exactly min.insync.replicas.")
        .add(sum(1 for p in leaders if p.isr == p.min_isr)),
        Family(prefix + "isrshrinks_total", "counter",
               "ISR shrinks committed by the controller for partitions led here "
               "(IsrShrinksPerSec count).").add(snap.isr_shrinks),
        Family(prefix + "isrexpands_total", "counter",
               "ISR expansions committed by the controller for partitions led here "
               "(IsrExpandsPerSec count).").add(snap.isr_expands),
        Family(prefix + "failedisrupdates_total", "counter",
               "ISR changes the controller refused (FailedIsrUpdatesPerSec count).")
        .add(snap.failed_isr_updates),
    ]


def _fetcher_families(snap: MetricsSnapshot) -> list[Family]:
    followed = [p for p in snap.partitions if p.follower_lag is not None]
    max_lag = max((p.follower_lag or 0 for p in followed), default=0)
    lag = Family("kafka_server_fetcherlagmetrics_consumerlag", "gauge",
                 "Messages this follower is behind the leader's high watermark.")
    for p in followed:
        client = ("clientId", f"ReplicaFetcherThread-0-{p.leader}")
        lag.add(p.follower_lag or 0, (client, *_tp_labels(p.tp)))
    return [
        Family("kafka_server_replicafetchermanager_maxlag", "gauge",
               "Largest lag over the partitions followed by this broker.")
        .add(max_lag, (("clientId", "Replica"),)),
        lag,
    ]


def _partition_families(snap: MetricsSnapshot) -> list[Family]:
    """kafka.cluster:type=Partition,... — non-zero on the leader only, as in Kafka."""
    prefix = "kafka_cluster_partition_"
    under = Family(prefix + "underreplicated", "gauge",
                   "1 if this broker leads the partition and its ISR is incomplete.")
    isr = Family(prefix + "insyncreplicascount", "gauge",
                 "ISR size (on the leader; 0 elsewhere).")
    replicas = Family(prefix + "replicascount", "gauge",
                      "Replica count (on the leader; 0 elsewhere).")
    under_min = Family(prefix + "underminisr", "gauge",
                       "1 if this broker leads the partition and its ISR < min.insync.replicas.")
    for p in snap.partitions:
        labels = _tp_labels(p.tp)
        under.add(int(p.is_leader and p.isr < p.replicas), labels)
        isr.add(p.isr if p.is_leader else 0, labels)
        replicas.add(p.replicas if p.is_leader else 0, labels)
        under_min.add(int(p.is_leader and p.isr < p.min_isr), labels)
    return [under, isr, replicas, under_min]


def _log_families(snap: MetricsSnapshot) -> list[Family]:
    end = Family("kafka_log_log_logendoffset", "gauge", "Log end offset of each local log.")
    start = Family("kafka_log_log_logstartoffset", "gauge", "Log start offset of each local log.")
    size = Family("kafka_log_log_size", "gauge", "Bytes of each local log on disk.")
    segments = Family("kafka_log_log_numlogsegments", "gauge", "Segments of each local log.")
    for p in snap.partitions:
        labels = _tp_labels(p.tp)
        end.add(p.log_end_offset, labels)
        start.add(p.log_start_offset, labels)
        size.add(p.size_bytes, labels)
        if p.num_segments is not None:
            segments.add(p.num_segments, labels)
    offline = Family("kafka_log_logmanager_offlinelogdirectorycount", "gauge",
                     "Log directories marked offline after an I/O error.")
    return [end, start, size, segments, offline.add(snap.offline_log_dirs)]


def _controller_families(snap: MetricsSnapshot) -> list[Family]:
    c = snap.controller
    prefix = "kafka_controller_kafkacontroller_"
    return [
        Family(prefix + "activecontrollercount", "gauge",
               "1 on the active controller, 0 elsewhere.").add(int(c.active)),
        Family(prefix + "offlinepartitionscount", "gauge",
               "Partitions without a live leader (active controller only).")
        .add(c.offline_partitions),
        Family(prefix + "globaltopiccount", "gauge",
               "Topics in the cluster (active controller only).").add(c.global_topics),
        Family(prefix + "globalpartitioncount", "gauge",
               "Partitions in the cluster (active controller only).").add(c.global_partitions),
    ]


def families(snap: MetricsSnapshot) -> list[Family]:
    """Every metric family of a snapshot, in a stable order."""
    return [
        Family("kafka_server_kafkaserver_brokerstate", "gauge",
               "Broker state: 1 Starting, 3 RunningAsBroker, 7 BrokerShuttingDown.")
        .add(snap.broker_state),
        *_replica_manager_families(snap),
        *_fetcher_families(snap),
        *_partition_families(snap),
        *_log_families(snap),
        *_controller_families(snap),
    ]


def render(snap: MetricsSnapshot) -> str:
    """The ``/metrics`` body of a snapshot (pure)."""
    return format_families(families(snap))


# -- parsing (tests, tools) -------------------------------------------------------------------


def parse(text: str) -> dict[tuple[str, Labels], float]:
    """Samples of a text exposition by (name, sorted labels); enough for Weir's own output."""
    samples: dict[tuple[str, Labels], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, rest = head.partition("{")
        labels: list[tuple[str, str]] = []
        for part in _split_labels(rest.rstrip("}")):
            key, _, raw = part.partition("=")
            labels.append((key, _unescape(raw[1:-1])))
        samples[(name, tuple(sorted(labels)))] = float(value)
    return samples


def _split_labels(text: str) -> list[str]:
    parts, current, quoted, escaped = [], [], False, False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    if current:
        parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            i += 1
            ch = {"n": "\n"}.get(value[i], value[i])
        out.append(ch)
        i += 1
    return "".join(out)


# -- HTTP endpoint ----------------------------------------------------------------------------


class MetricsServer:
    """A minimal HTTP/1.1 server: ``GET /metrics`` → the exposition; one request per
    connection (``Connection: close``).  ``render_body`` is called on the event loop."""

    def __init__(self, render_body: Callable[[], str], host: str, port: int) -> None:
        self._render_body = render_body
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    @classmethod
    def for_broker(cls, broker: Any, port: int) -> MetricsServer:
        host = broker.config.listener_host
        return cls(lambda: render(collect(broker)), host, port)

    async def start(self) -> int:
        """Bind (port 0: any free port) and return the bound port."""
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics endpoint listening on http://%s:%d/metrics",
                 self.host or "0.0.0.0", self.port)
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            status, body = self._respond(head)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError):
            status, body = "400 Bad Request", "bad request\n"
        try:
            payload = body.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\n"
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

    def _respond(self, head: bytes) -> tuple[str, str]:
        if len(head) > MAX_REQUEST_HEAD:
            return "431 Request Header Fields Too Large", "headers too large\n"
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3:
            return "400 Bad Request", "bad request\n"
        method, target, _version = parts
        if method != "GET":
            return "405 Method Not Allowed", "only GET\n"
        if target.split("?", 1)[0] != "/metrics":
            return "404 Not Found", "try /metrics\n"
        try:
            return "200 OK", self._render_body()
        except Exception:
            log.exception("rendering metrics failed")
            return "500 Internal Server Error", "metrics failed\n"

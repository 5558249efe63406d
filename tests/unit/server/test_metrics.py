"""Broker metrics: rendering a snapshot (pure), collecting one from a real replica manager,
the ISR change counters, and the HTTP endpoint on a loopback port."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from weir.common import TopicPartition
from weir.config import BrokerConfig, ConfigError
from weir.protocol.errors import ErrorCode
from weir.replication.alter_partition import IsrResult
from weir.replication.partition import LeaderState
from weir.replication.replica_manager import PartitionStateUpdate, ReplicaManager
from weir.server import metrics
from weir.server.metrics import (
    ControllerSnapshot,
    MetricsServer,
    MetricsSnapshot,
    PartitionSnapshot,
    collect,
    parse,
    render,
)
from weir.storage.log import LogConfig
from weir.storage.log_manager import LogManager

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition('we"ird\\', 0)


def part(tp, *, leader=True, replicas=3, isr=3, min_isr=2, lag=None, end=10,
         leader_id=1) -> PartitionSnapshot:
    return PartitionSnapshot(tp=tp, is_leader=leader, leader=leader_id, replicas=replicas,
                             isr=isr, min_isr=min_isr, log_start_offset=2, log_end_offset=end,
                             size_bytes=1234, num_segments=1, follower_lag=lag)


def value(samples, name, **labels):
    return samples[(name, tuple(sorted((k, str(v)) for k, v in labels.items())))]


# -- rendering -----------------------------------------------------------------------------


def test_render_replica_manager_gauges_and_counters():
    snap = MetricsSnapshot(
        partitions=[part(A0, isr=1), part(A1, isr=2), part(B0, leader=False, lag=7,
                                                         leader_id=2)],
        isr_shrinks=3, isr_expands=1, failed_isr_updates=2)
    s = parse(render(snap))
    rm = "kafka_server_replicamanager_"
    assert value(s, rm + "partitioncount") == 3
    assert value(s, rm + "leadercount") == 2
    assert value(s, rm + "underreplicatedpartitions") == 2
    assert value(s, rm + "underminisrpartitioncount") == 1
    assert value(s, rm + "atminisrpartitioncount") == 1
    assert value(s, rm + "isrshrinks_total") == 3
    assert value(s, rm + "isrexpands_total") == 1
    assert value(s, rm + "failedisrupdates_total") == 2
    assert value(s, "kafka_server_kafkaserver_brokerstate") == 3


def test_render_follower_lag_and_max_lag():
    snap = MetricsSnapshot(partitions=[part(A0, leader=False, lag=4, leader_id=2),
                                       part(A1, leader=False, lag=9, leader_id=3),
                                       part(B0)])
    s = parse(render(snap))
    assert value(s, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 9
    lag = "kafka_server_fetcherlagmetrics_consumerlag"
    assert value(s, lag, clientId="ReplicaFetcherThread-0-2", topic="a", partition=0) == 4
    assert value(s, lag, clientId="ReplicaFetcherThread-0-3", topic="a", partition=1) == 9
    assert not [k for k in s if k[0] == lag and ("topic", B0.topic) in k[1]]  # led: no lag


def test_render_per_partition_and_log_metrics():
    snap = MetricsSnapshot(partitions=[part(A0, isr=2, end=42), part(A1, leader=False)])
    s = parse(render(snap))
    assert value(s, "kafka_log_log_logendoffset", topic="a", partition=0) == 42
    assert value(s, "kafka_log_log_logstartoffset", topic="a", partition=0) == 2
    assert value(s, "kafka_log_log_size", topic="a", partition=1) == 1234
    assert value(s, "kafka_log_log_numlogsegments", topic="a", partition=1) == 1
    assert value(s, "kafka_cluster_partition_underreplicated", topic="a", partition=0) == 1
    assert value(s, "kafka_cluster_partition_insyncreplicascount", topic="a", partition=0) == 2
    # Kafka reports the partition gauges on the leader only.
    assert value(s, "kafka_cluster_partition_underreplicated", topic="a", partition=1) == 0
    assert value(s, "kafka_cluster_partition_replicascount", topic="a", partition=1) == 0
    assert value(s, "kafka_log_logmanager_offlinelogdirectorycount") == 0


def test_render_controller_gauges():
    active = MetricsSnapshot(controller=ControllerSnapshot(True, 2, 5, 17))
    s = parse(render(active))
    kc = "kafka_controller_kafkacontroller_"
    assert value(s, kc + "activecontrollercount") == 1
    assert value(s, kc + "offlinepartitionscount") == 2
    assert value(s, kc + "globaltopiccount") == 5
    assert value(s, kc + "globalpartitioncount") == 17
    s = parse(render(MetricsSnapshot()))
    assert value(s, kc + "activecontrollercount") == 0
    assert value(s, kc + "offlinepartitionscount") == 0


def test_render_format_help_type_and_escaping():
    text = render(MetricsSnapshot(partitions=[part(B0)]))
    assert text.endswith("\n")
    lines = text.splitlines()
    assert "# TYPE kafka_server_replicamanager_isrshrinks_total counter" in lines
    assert "# TYPE kafka_server_replicamanager_partitioncount gauge" in lines
    # prometheus_client writes labels in name order and values as floats.
    assert 'kafka_log_log_logendoffset{partition="0",topic="we\\"ird\\\\"} 10.0' in lines
    # Each family is declared once, and HELP precedes TYPE precedes the samples.
    types = [ln.split()[2] for ln in lines if ln.startswith("# TYPE")]
    assert len(types) == len(set(types))
    s = parse(text)
    assert value(s, "kafka_log_log_logendoffset", topic=B0.topic, partition=0) == 10


def test_format_value_specials():
    lag = float("nan")
    snap = MetricsSnapshot(partitions=[part(A0, leader=False, lag=lag, leader_id=2)])
    lines = render(snap).splitlines()
    assert "kafka_server_replicafetchermanager_maxlag{clientId=\"Replica\"} NaN" in lines
    snap = MetricsSnapshot(partitions=[part(A0, end=float("inf"))])
    assert 'kafka_log_log_logendoffset{partition="0",topic="a"} +Inf' in render(snap).splitlines()


def test_render_throughput_counters_and_event_queue():
    snap = MetricsSnapshot(bytes_in=100, messages_in=7, bytes_out=50, replication_bytes_out=80,
                           controller=ControllerSnapshot(True, 0, 1, 1, event_queue_size=4))
    text = render(snap)
    assert "# TYPE kafka_server_brokertopicmetrics_bytesin_total counter" in text.splitlines()
    s = parse(text)
    bt = "kafka_server_brokertopicmetrics_"
    assert value(s, bt + "bytesin_total") == 100
    assert value(s, bt + "messagesin_total") == 7
    assert value(s, bt + "bytesout_total") == 50
    assert value(s, bt + "replicationbytesout_total") == 80
    assert value(s, "kafka_controller_controllereventmanager_eventqueuesize") == 4


# -- collection from a real replica manager ------------------------------------------------------


def make_rm(tmp_path) -> ReplicaManager:
    lm = LogManager([tmp_path], LogConfig.from_dict({}))
    lm.startup(0)
    return ReplicaManager(1, lm, lambda _t: LogConfig.from_dict({}), lambda _t: 2)


def apply(rm, tp, leader, replicas, isr, epoch=0):
    state = LeaderState(leader=leader, leader_epoch=epoch, isr=list(isr), replicas=list(replicas),
                        partition_epoch=0, controller_epoch=1)
    rm.apply_leader_and_isr(1, {tp: PartitionStateUpdate(state, None, False)}, False)


def fake_broker(rm, controller=None, epoch=5, stopping=False):
    return metrics.MetricsSource(
        replica_manager=rm, log_manager=rm.log_manager, min_isr=lambda _t: 2,
        state=lambda: metrics.broker_state(stopping, epoch), controller=lambda: controller)


def test_collect_reads_partitions_logs_and_lag(tmp_path):
    rm = make_rm(tmp_path)
    apply(rm, A0, leader=1, replicas=(1, 2, 3), isr=(1, 2))
    apply(rm, A1, leader=2, replicas=(2, 1), isr=(2, 1))  # leader 2 unknown: no fetcher
    rm.fetchers.lag = lambda tp: 5 if tp == A1 else None
    snap = collect(fake_broker(rm))
    by_tp = {p.tp: p for p in snap.partitions}
    assert by_tp[A0].is_leader and by_tp[A0].isr == 2 and by_tp[A0].replicas == 3
    assert by_tp[A0].follower_lag is None
    assert not by_tp[A1].is_leader and by_tp[A1].follower_lag == 5
    assert by_tp[A0].log_end_offset == 0 and by_tp[A0].num_segments == 1
    assert snap.broker_state == metrics.STATE_RUNNING
    assert not snap.controller.active
    s = parse(render(snap))
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert collect(fake_broker(rm, epoch=-1)).broker_state == metrics.STATE_STARTING
    assert collect(fake_broker(rm, stopping=True)).broker_state == metrics.STATE_SHUTTING_DOWN


def test_collect_reads_the_active_controller_context():
    ctx = SimpleNamespace(offline_partition_count=lambda: 1, topic_ids={"a": 1, "b": 2},
                          all_partitions=lambda: iter([A0, A1, B0]))
    active = SimpleNamespace(is_active=True, core=SimpleNamespace(ctx=ctx))
    snap = metrics.controller_snapshot(active)
    assert snap == ControllerSnapshot(True, 1, 2, 3)
    active.event_queue_size = 6
    assert metrics.controller_snapshot(active).event_queue_size == 6
    assert metrics.controller_snapshot(SimpleNamespace(is_active=False)) == ControllerSnapshot()
    assert metrics.controller_snapshot(None) == ControllerSnapshot()


def test_isr_results_count_shrinks_expands_and_failures(tmp_path):
    rm = make_rm(tmp_path)
    apply(rm, A0, leader=1, replicas=(1, 2, 3), isr=(1, 2, 3))
    rm.on_isr_result(IsrResult(A0, ErrorCode.none, 0, (1, 2), 1))
    assert (rm.isr_shrinks, rm.isr_expands) == (1, 0)
    rm.on_isr_result(IsrResult(A0, ErrorCode.none, 0, (1, 2, 3), 2))
    assert (rm.isr_shrinks, rm.isr_expands) == (1, 1)
    rm.on_isr_result(IsrResult(A0, ErrorCode.none, 7, (1,), 3))  # another epoch: ignored
    assert (rm.isr_shrinks, rm.isr_expands) == (1, 1)
    rm.on_isr_result(IsrResult(A0, ErrorCode.invalid_update_version))
    assert rm.failed_isr_updates == 1
    snap = collect(fake_broker(rm))
    assert (snap.isr_shrinks, snap.isr_expands, snap.failed_isr_updates) == (1, 1, 1)


# -- config ----------------------------------------------------------------------------------


def test_metrics_http_port_config():
    base = {"broker.id": "1", "zookeeper.connect": "zk:2181"}
    assert BrokerConfig.from_dict(base).metrics_http_port == -1
    assert BrokerConfig.from_dict({**base, "metrics.http.port": "0"}).metrics_http_port == 0
    with pytest.raises(ConfigError, match="metrics.http.port"):
        BrokerConfig.from_dict({**base, "metrics.http.port": "-2"})


# -- HTTP endpoint ---------------------------------------------------------------------------


async def http(port: int, request: bytes) -> tuple[str, dict[str, str], str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = raw.decode().partition("\r\n\r\n")
    status, *header_lines = head.split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return status, headers, body


def test_http_endpoint_serves_metrics_and_refuses_the_rest():
    calls = []

    def body() -> str:
        calls.append(1)
        return render(MetricsSnapshot(partitions=[part(A0)]))

    async def scenario():
        server = MetricsServer(body, "127.0.0.1", 0)
        port = await server.start()
        assert port > 0 and server.port == port
        try:
            status, headers, text = await http(
                port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status == "HTTP/1.1 200 OK"
            assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert int(headers["Content-Length"]) == len(text.encode())
            assert value(parse(text), "kafka_server_replicamanager_partitioncount") == 1
            status, _, _ = await http(port, b"GET /other HTTP/1.1\r\n\r\n")
            assert status.startswith("HTTP/1.1 404")
            status, _, _ = await http(port, b"POST /metrics HTTP/1.1\r\n\r\n")
            assert status.startswith("HTTP/1.1 405")
            status, _, _ = await http(port, b"garbage\r\n\r\n")
            assert status.startswith("HTTP/1.1 400")
        finally:
            await server.stop()
        assert len(calls) == 1  # rendered on demand, only for /metrics
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)

    asyncio.run(scenario())


def test_http_endpoint_reports_a_failing_render_as_500():
    def broken() -> str:
        raise RuntimeError("boom")

    async def scenario():
        server = MetricsServer(broken, "127.0.0.1", 0)
        port = await server.start()
        try:
            status, _, _ = await http(port, b"GET /metrics HTTP/1.0\r\n\r\n")
            assert status.startswith("HTTP/1.1 500")
        finally:
            await server.stop()

    asyncio.run(scenario())


# -- throughput counters (BrokerTopicMetrics) -------------------------------------------------


def test_bytes_in_and_out_are_counted_by_the_replica_manager(tmp_path):
    from weir.records.builder import build_batch
    from weir.replication.local_reads import FetchPartition

    rm = make_rm(tmp_path)
    apply(rm, A0, leader=1, replicas=(1,), isr=(1,))
    batch = build_batch([b"v1", b"v2", b"v3"], timestamp_ms=1)

    async def scenario():
        await rm.append(1, 1000, {A0: batch})
        consumer = await rm.reads.fetch(-1, 0, 1, 1 << 20, [FetchPartition(A0, 0, 1 << 20)])
        follower = await rm.reads.fetch(2, 0, 1, 1 << 20, [FetchPartition(A0, 0, 1 << 20)])
        return consumer, follower

    consumer, follower = asyncio.run(scenario())
    assert (rm.bytes_in, rm.messages_in) == (len(batch), 3)
    assert rm.reads.bytes_out == consumer[A0].size == len(batch)
    assert rm.reads.replication_bytes_out == follower[A0].size == len(batch)
    s = parse(render(collect(fake_broker(rm))))
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total") == len(batch)
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total") == 3


# -- /controller ---------------------------------------------------------------------------


def test_controller_endpoint_serves_the_state_change_ring_as_json():
    import json

    from weir.controller.service import StateChange

    controller = SimpleNamespace(
        is_active=True, core=SimpleNamespace(ctx=SimpleNamespace(controller_epoch=4)),
        event_queue_size=2, current_event="BrokerChange", events_processed=9,
        state_changes=[StateChange(5, "BrokerChange", "INFO", "Partition a-0 state changed")])
    doc = metrics.controller_json(1, controller)
    assert doc["active"] and doc["epoch"] == 4 and doc["event_queue_size"] == 2
    assert doc["state_changes"][0]["message"] == "Partition a-0 state changed"
    assert metrics.controller_json(2, None) == {"broker_id": 2, "active": False}
    passive = metrics.controller_json(3, SimpleNamespace(
        is_active=False, core=None, state_changes=[], event_queue_size=0))
    assert passive["active"] is False and passive["epoch"] is None

    async def scenario():
        server = MetricsServer(lambda: "", "127.0.0.1", 0,
                               controller_doc=lambda: metrics.controller_json(1, controller))
        port = await server.start()
        try:
            status, headers, body = await http(port, b"GET /controller HTTP/1.1\r\n\r\n")
            assert status == "HTTP/1.1 200 OK"
            assert headers["Content-Type"] == "application/json"
            assert json.loads(body)["current_event"] == "BrokerChange"
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_the_storage_threads_backlog_is_a_gauge(tmp_path):
    rm = make_rm(tmp_path)
    apply(rm, A0, leader=1, replicas=(1, 2, 3), isr=(1, 2))
    writer = rm.log_manager.deferred
    assert writer.drain(10)  # the new replica's files written
    assert value(parse(render(collect(fake_broker(rm)))),
                 "weir_storage_pending_small_file_writes") == 0
    release = threading.Event()
    started = threading.Event()

    class Slow:
        def flush(self, *, if_dir_exists=False):
            started.set()
            release.wait(10)

    writer.submit([Slow()])  # the worker takes it and blocks in its flush
    assert started.wait(10)
    writer.submit([Slow(), Slow()])  # queued behind it
    try:
        s = parse(render(collect(fake_broker(rm))))
        assert value(s, "weir_storage_pending_small_file_writes") == 3
    finally:
        release.set()
    assert writer.drain(10)
    s = parse(render(collect(fake_broker(rm))))
    assert value(s, "weir_storage_pending_small_file_writes") == 0

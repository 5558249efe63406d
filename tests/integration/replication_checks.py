"""Helpers for replication tests: a producer running in the background, leader lookup, and a
(the byte-level comparison of the replicas' logs below the high watermark lives in
``weir.verify.replicas``, shared with ``weir verify``)."""

from __future__ import annotations

import threading
import time
from typing import Self

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.integration.clients import consume_assigned, raw_request
from weir.common import TopicPartition


class BackgroundProducer:
    """An idempotent acks=all producer writing sequential values until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **config: object) -> None:
        conf = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                "linger.ms": 2, "message.timeout.ms": 120000,
                "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1000}
        conf.update(config)
        self.producer = Producer(conf)
        self.topic = topic
        self.partitions = partitions
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list[object] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.failed.append(err)
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def _run(self) -> None:
        while not self._stop.is_set():
            value = b"seq-%08d" % self.sent
            try:
                self.producer.produce(self.topic, value=value,
                                      partition=self.sent % self.partitions,
                                      on_delivery=self._on_delivery)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if self.sent % 50 else 0.01)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        return len(self.acked)

    def stop(self, flush_timeout_s: float = 120) -> None:
        self._stop.set()
        self._thread.join(30)
        remaining = self.producer.flush(flush_timeout_s)
        assert remaining == 0, f"{remaining} records still undelivered"

    def __exit__(self, *exc: object) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(30)


def partition_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: meta.leader for p, meta in md.topics[topic].partitions.items()}


def partition_isrs(bootstrap: str, topic: str) -> dict[int, list[int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: sorted(meta.isrs) for p, meta in md.topics[topic].partitions.items()}


def brokers_known_to_controller(cluster) -> set[int]:
    """The broker ids in the controller's own metadata: a broker appears there only after the
    controller has processed its registration (its UpdateMetadata follows the BrokerChange).
    A broker registered in ZooKeeper but not yet processed is not "alive" to the controller,
    in Kafka as here, and a reassignment naming it is refused."""
    controller = cluster.controller_id()
    slot = next((b for b in cluster.brokers if b.id == controller), None)
    if slot is None:
        return set()
    try:
        response = raw_request(slot.host, slot.port, 3, 12, topics=[])
    except OSError:
        return set()
    return {int(b.node_id) for b in response.brokers}


def wait_until(fn, timeout_s: float, what: str, describe=None):
    """Poll ``fn`` until truthy; on timeout fail with ``describe()`` (what was seen) appended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.2)
    seen = f"\n{describe()}" if describe is not None else ""
    raise AssertionError(f"timed out waiting for {what}{seen}")


def leadership_report(cluster, topic: str) -> str:
    """What each broker's Metadata, ZooKeeper and the controller's log say about ``topic``,
    for a failure message: which of them is behind."""
    lines = [f"controller: {cluster.controller_id()}"]
    for slot in cluster.brokers:
        try:
            md = raw_request(slot.host, slot.port, 3, 12, topics=[{"name": topic}])
            seen = {t.name: (t.error_code, sorted((p.partition_index, p.leader_id,
                                                   list(p.isr_nodes)) for p in t.partitions))
                    for t in md.topics}
            lines.append(f"broker {slot.id} Metadata: brokers "
                         f"{sorted(int(b.node_id) for b in md.brokers)}, {seen}")
        except OSError as exc:
            lines.append(f"broker {slot.id} Metadata: {exc!r}")
    zk = cluster.zk()
    assignment = zk.get_topic(topic)
    partitions = dict(assignment.partitions) if assignment else {}
    states = zk.get_partition_states(TopicPartition(topic, p) for p in partitions)
    lines.append(f"ZooKeeper: assignment {partitions}, states {states}")
    controller = cluster.controller_id()
    if controller is not None:
        log = cluster.log_path(controller).read_text(errors="replace").splitlines()
        lines.append(f"controller {controller} log lines naming the topic or a broker change:")
        lines += [line for line in log if topic in line or "Broker" in line][-40:]
    return "\n".join(lines)


def wait_for_progress(producer: BackgroundProducer, records: int, timeout_s: float,
                      what: str) -> None:
    target = producer.acked_count() + records
    wait_until(lambda: producer.acked_count() >= target, timeout_s, what)


def verify_exactly_once(bootstrap: str, topic: str, partitions: int,
                        producer: BackgroundProducer) -> None:
    """Every acknowledged record is consumed once, at its offset, in offset order.

    librdkafka acknowledges some retried idempotent sends without an offset (it infers they
    were persisted when a later batch succeeds): those need only be stored exactly once.
    """
    acked = producer.acked
    assert acked, "nothing was acknowledged"
    got = consume_assigned(bootstrap, topic, list(range(partitions)), len(acked), timeout_s=120)
    by_partition: dict[int, list] = {}
    for m in got:
        by_partition.setdefault(m.partition(), []).append((m.offset(), m.value()))
    stored = {}
    for p, records in by_partition.items():
        offsets = [o for o, _ in records]
        assert offsets == sorted(offsets), f"partition {p} not in offset order"
        values = [v for _, v in records]
        assert len(values) == len(set(values)), f"partition {p} has duplicates"
        stored.update({(p, o): v for o, v in records})
    present = set(stored.values())
    lost = [(p, o) for p, o, v in acked
            if (v not in present if o is None or o < 0 else stored.get((p, o)) != v)]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"

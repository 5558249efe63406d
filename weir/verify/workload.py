"""Workloads: real Kafka clients (confluent-kafka / librdkafka) recording into a History.

- ``Writer``: an idempotent producer (``enable.idempotence``, ``acks=all``) sending unique
  values ``v-<n>`` round-robin to the topic's partitions at a bounded rate.  A delivery
  report without an error is ``ok``; a delivery error is ``info`` (indeterminate: the record
  may have been written, as after a timeout).
- ``Reader``: a consumer that ``assign``s every partition from offset 0 and polls (Jepsen's
  assign/poll consumer); it re-assigns from where it got to after an error.
- ``GroupMember``: one member of a consumer group (subscribe; commits explicit offsets
  synchronously about once a second and on revocation).
- ``final_read``: after healing, read every partition from 0 up to its high watermark.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from weir.verify.history import History

log = logging.getLogger(__name__)
_QUIET_LOG = logging.getLogger("weir.verify.librdkafka")
_QUIET_LOG.setLevel(logging.CRITICAL)


def _client_conf(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "logger": _QUIET_LOG,
            "reconnect.backoff.max.ms": 1000, "socket.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 2000}


class _Worker:
    def __init__(self, name: str) -> None:
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._guarded, name=f"weir-verify-{name}",
                                       daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self.thread.start()

    def _guarded(self) -> None:
        try:
            self.run()
        except BaseException as exc:
            self.error = exc
            log.exception("%s failed", self.thread.name)

    def run(self) -> None:
        raise NotImplementedError

    def stop(self, timeout_s: float = 60) -> None:
        self.stop_event.set()
        self.thread.join(timeout_s)


class Writer(_Worker):
    """Idempotent acks=all producer of unique values (see module doc)."""

    def __init__(self, history: History, bootstrap: str, topic: str, partitions: int,
                 rate: float = 100.0) -> None:
        super().__init__("writer")
        self.history, self.bootstrap, self.topic = history, bootstrap, topic
        self.partitions, self.rate = partitions, rate
        self.sent = 0
        self.flush_timeout_s = 60.0
        self.fatal: KafkaError | None = None

    def _producer(self) -> Producer:
        self.fatal = None
        return Producer({**_client_conf(self.bootstrap), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 30000, "request.timeout.ms": 10000,
                         "retry.backoff.ms": 100, "error_cb": self._on_error})

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal = err
            self.history.add("writer", "info", "producer-fatal", {"error": err.str()})

    def _on_delivery(self, op_id: int, partition: int, value: str):
        def report(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                self.history.complete("writer", "ok", "send", op_id, {
                    "partition": msg.partition(), "offset": msg.offset(), "value": value})
                return
            # librdkafka's Python client does not expose whether the record was persisted:
            # a failed delivery may still have been written (indeterminate)
            self.history.complete("writer", "info", "send", op_id, {
                "partition": partition, "value": value, "error": err.str()})
        return report

    def run(self) -> None:
        producer = self._producer()
        interval = 1.0 / self.rate if self.rate > 0 else 0.0
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            now = time.monotonic()
            if now < next_at:
                producer.poll(min(next_at - now, 0.05))
                continue
            next_at = max(next_at + interval, now - 1.0)
            partition = self.sent % self.partitions
            value = f"v-{self.sent}"
            op_id = self.history.invoke("writer", "send", {"partition": partition,
                                                           "value": value})
            try:
                producer.produce(self.topic, value=value.encode(), partition=partition,
                                 on_delivery=self._on_delivery(op_id, partition, value))
            except (BufferError, KafkaException) as exc:
                self.history.complete("writer", "fail", "send", op_id, {
                    "partition": partition, "value": value, "error": str(exc)})
                producer.poll(0.1)
            self.sent += 1
            with contextlib.suppress(KafkaException):
                producer.poll(0)
            if self.fatal is not None:  # an idempotent producer's fatal error: a new one
                log.warning("producer fatal error %s; new producer", self.fatal)
                with contextlib.suppress(KafkaException):
                    producer.purge()
                    producer.poll(1)
                producer = self._producer()
        try:
            producer.flush(self.flush_timeout_s)
        except KafkaException as exc:  # librdkafka gave up on the idempotent state
            log.warning("producer flush: %s", exc)
        with contextlib.suppress(KafkaException):
            producer.purge()
            producer.poll(1)


class Reader(_Worker):
    """assign() every partition from offset 0 and poll until stopped (process ``name``)."""

    def __init__(self, history: History, bootstrap: str, topic: str, partitions: int,
                 name: str = "reader") -> None:
        super().__init__(name)
        self.name, self.history, self.bootstrap = name, history, bootstrap
        self.topic, self.partitions = topic, partitions
        self.position = {p: 0 for p in range(partitions)}

    def _consumer(self) -> Consumer:
        consumer = Consumer({**_client_conf(self.bootstrap), "group.id": "weir-verify-assign",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "enable.partition.eof": False, "fetch.wait.max.ms": 200})
        start = dict(self.position)
        consumer.assign([TopicPartition(self.topic, p, o) for p, o in start.items()])
        self.history.add(self.name, "ok", "assign", {"partitions": start})
        return consumer

    def run(self) -> None:
        consumer = self._consumer()
        try:
            while not self.stop_event.is_set():
                if not poll_once(self.history, self.name, consumer, self.position):
                    consumer.close()
                    consumer = self._consumer()
        finally:
            consumer.close()


def poll_once(history: History, process: str, consumer: Consumer,
              position: dict[int, int] | None = None, timeout_s: float = 0.5) -> bool:
    """One recorded poll; False after a consumer error (the caller re-assigns)."""
    op_id = history.invoke(process, "poll")
    try:
        msgs = consumer.consume(num_messages=500, timeout=timeout_s)
    except KafkaException as exc:
        history.complete(process, "info", "poll", op_id, {"error": str(exc)})
        return False
    records, errors = [], []
    for m in msgs:
        if m.error():
            errors.append(m.error().str())
            continue
        records.append([m.partition(), m.offset(), m.value().decode(errors="replace")])
        if position is not None:
            position[m.partition()] = m.offset() + 1
    history.complete(process, "ok", "poll", op_id, {"records": records, "errors": errors})
    return not any("truncat" in e.lower() or "out of range" in e.lower() for e in errors)


class GroupMember(_Worker):
    """A consumer group member that commits what it consumed (process ``group-<n>``)."""

    def __init__(self, history: History, bootstrap: str, topic: str, group: str,
                 index: int, commit_interval_s: float = 1.0) -> None:
        super().__init__(f"group-{index}")
        self.name, self.history, self.bootstrap = f"group-{index}", history, bootstrap
        self.topic, self.group, self.commit_interval_s = topic, group, commit_interval_s
        self.position: dict[int, int] = {}
        self.consumer: Consumer | None = None

    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.history.add(self.name, "ok", "assign",
                         {"partitions": {tp.partition: None for tp in parts}})

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        self.commit(consumer, [tp.partition for tp in parts])
        for tp in parts:
            self.position.pop(tp.partition, None)
        self.history.add(self.name, "ok", "revoke",
                         {"partitions": [tp.partition for tp in parts]})

    def commit(self, consumer: Consumer, only: list[int] | None = None) -> None:
        offsets = {p: o for p, o in self.position.items() if only is None or p in only}
        if not offsets:
            return
        op_id = self.history.invoke(self.name, "commit", {"offsets": offsets})
        try:
            result = consumer.commit(offsets=[TopicPartition(self.topic, p, o)
                                              for p, o in offsets.items()],
                                     asynchronous=False)
        except KafkaException as exc:
            self.history.complete(self.name, "fail", "commit", op_id, {
                "offsets": offsets, "error": str(exc)})
            return
        failed = [tp for tp in result or [] if tp.error]
        if failed:
            self.history.complete(self.name, "fail", "commit", op_id, {
                "offsets": offsets, "error": str(failed[0].error)})
        else:
            self.history.complete(self.name, "ok", "commit", op_id, {"offsets": offsets})

    def run(self) -> None:
        consumer = Consumer({**_client_conf(self.bootstrap), "group.id": self.group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "enable.partition.eof": False, "session.timeout.ms": 10000,
                             "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 200})
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        last_commit = time.monotonic()
        try:
            while not self.stop_event.is_set():
                poll_once(self.history, self.name, consumer, self.position)
                if time.monotonic() - last_commit >= self.commit_interval_s:
                    self.commit(consumer)
                    last_commit = time.monotonic()
            self.commit(consumer)
        finally:
            consumer.close()


def high_watermarks(bootstrap: str, topic: str, partitions: int, timeout_s: float = 10
                    ) -> dict[int, int]:
    consumer = Consumer({**_client_conf(bootstrap), "group.id": "weir-verify-hw"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout_s)[1]
                for p in range(partitions)}
    finally:
        consumer.close()


def final_read(history: History, bootstrap: str, topic: str, partitions: int,
               timeout_s: float = 120) -> None:
    """Read each partition from 0 to its high watermark, as process ``final``."""
    deadline = time.monotonic() + timeout_s
    op_id = history.invoke("final", "final")
    hws: dict[int, int] = {}
    while not hws and time.monotonic() < deadline:
        try:
            hws = high_watermarks(bootstrap, topic, partitions)
        except KafkaException:
            time.sleep(0.5)
    position = {p: 0 for p in range(partitions)}
    consumer = Consumer({**_client_conf(bootstrap), "group.id": "weir-verify-final",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    history.add("final", "ok", "assign", {"partitions": dict(position)})
    try:
        while (any(position[p] < hws.get(p, 0) for p in range(partitions))
               and time.monotonic() < deadline):
            poll_once(history, "final", consumer, position, timeout_s=1.0)
    finally:
        consumer.close()
    history.complete("final", "ok", "final", op_id, {"partitions": {
        p: {"hw": hws.get(p), "read_to": position[p],
            "complete": bool(hws) and position[p] >= hws.get(p, 0)}
        for p in range(partitions)}})


def read_committed(history: History, bootstrap: str, topic: str, group: str,
                   partitions: int, timeout_s: float = 30) -> None:
    """The group's committed offsets, recorded as a ``committed`` read."""
    op_id = history.invoke("checker", "committed", {"group": group})
    consumer = Consumer({**_client_conf(bootstrap), "group.id": group})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                 timeout=timeout_s)
        history.complete("checker", "ok", "committed", op_id,
                         {"offsets": {tp.partition: tp.offset for tp in got}})
    except KafkaException as exc:
        history.complete("checker", "fail", "committed", op_id, {"error": str(exc)})
    finally:
        consumer.close()

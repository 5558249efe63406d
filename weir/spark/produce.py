"""Executor side of a write: Arrow batches of rows into an idempotent Kafka producer.

``enable.idempotence=true`` and ``acks=all``: a record is acknowledged once every in-sync
replica has it, and the producer's retries never duplicate or reorder.  Any record that
cannot be delivered fails the Spark task (which Spark retries; as with Spark's Kafka sink,
a retried task may write its records again: writes are at-least-once).

``exactlyOnce`` streaming writes (:func:`write_batches_exactly_once`) put each task's records
of a micro-batch in one Kafka transaction (KIP-98) that also commits, as the transaction's
offset of a marker consumer group, the micro-batch id: a retried or replayed task whose
micro-batch is already committed writes nothing, and an earlier attempt still running is
fenced by the new attempt's InitProducerId.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

FLUSH_TIMEOUT_S = 300.0
PRODUCER_DEFAULTS = {
    "linger.ms": 10,
    "batch.size": 1024 * 1024,
    "queue.buffering.max.kbytes": 256 * 1024,
    "compression.type": "none",
}


def producer_conf(client_conf: Mapping[str, str]) -> dict[str, Any]:
    conf: dict[str, Any] = {**PRODUCER_DEFAULTS, **client_conf}
    conf.update({"enable.idempotence": True, "acks": "all"})
    return conf


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _column(batch: Any, name: str) -> list[Any]:
    index = batch.schema.get_field_index(name)
    return batch.column(index).to_pylist() if index >= 0 else [None] * batch.num_rows


class ProduceFailed(RuntimeError):
    """Records could not be delivered: the write task fails."""


def write_batches(client_conf: Mapping[str, str], topic: str | None,
                  batches: Iterable[Any]) -> int:
    """Produce every row of ``batches`` (``pyarrow.RecordBatch``); returns how many.

    ``topic`` (the option) overrides a ``topic`` column.  ``key``, ``partition`` and
    ``headers`` columns are used when present.
    """
    from confluent_kafka import Producer

    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    producer = Producer(producer_conf(client_conf))
    count = 0
    for batch in batches:
        count += _produce_batch(producer, topic, batch, on_delivery)
        if failures:
            break
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if failures:
        raise ProduceFailed(f"{len(failures)} records were not written; first error:"
                            f" {failures[0]}")
    if remaining:
        raise ProduceFailed(f"{remaining} records were not acknowledged within"
                            f" {FLUSH_TIMEOUT_S:.0f}s")
    return count


def write_batches_exactly_once(client_conf: Mapping[str, str], topic: str,
                               batches: Iterable[Any], transactional_id: str,
                               batch_id: int) -> int:
    """Produce every row of ``batches`` in one transaction of ``transactional_id``, once per
    ``batch_id``; returns how many rows were written (0 if this micro-batch already was).

    The marker is the committed offset of partition 0 of ``topic`` in the consumer group
    named like the transactional id: ``batch_id + 1`` once micro-batch ``batch_id`` is
    committed. It is read with ``isolation.level=read_committed`` (OffsetFetch
    ``require_stable``: an undecided transaction is waited for, KIP-447).
    """
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    if batch_id < 0:
        raise ProduceFailed("exactlyOnce writes need the micro-batch id")
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    producer = Producer({**producer_conf(client_conf), "transactional.id": transactional_id})
    consumer = Consumer({**client_conf, "group.id": transactional_id,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    marker = TopicPartition(topic, 0)
    try:
        producer.init_transactions(FLUSH_TIMEOUT_S)  # fences an earlier attempt
        done = consumer.committed([marker], timeout=FLUSH_TIMEOUT_S)[0].offset
        if done > batch_id:
            return 0  # this task's micro-batch is already committed
        producer.begin_transaction()
        count = 0
        for batch in batches:
            count += _produce_batch(producer, topic, batch, on_delivery)
            if failures:
                break
        producer.flush(FLUSH_TIMEOUT_S)
        if failures:
            raise ProduceFailed(f"{len(failures)} records were not written; first error:"
                                f" {failures[0]}")
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, batch_id + 1)], consumer.consumer_group_metadata(),
            FLUSH_TIMEOUT_S)
        producer.commit_transaction(FLUSH_TIMEOUT_S)
        return count
    except (KafkaException, ProduceFailed) as exc:
        try:
            producer.abort_transaction(FLUSH_TIMEOUT_S)
        except KafkaException:
            pass  # fenced or not in a transaction: nothing of ours stays open
        raise ProduceFailed(f"transaction {transactional_id!r} of micro-batch {batch_id}"
                            f" failed: {exc}") from exc
    finally:
        consumer.close()


def _produce_batch(producer: Any, topic: str | None, batch: Any, on_delivery: Any) -> int:
    values = _column(batch, "value")
    keys = _column(batch, "key")
    topics = [topic] * batch.num_rows if topic else _column(batch, "topic")
    partitions = _column(batch, "partition")
    headers = _column(batch, "headers")
    for i, value in enumerate(values):
        if not topics[i]:
            raise ProduceFailed("a row has a null topic; set the 'topic' option or fill the"
                                " 'topic' column")
        kwargs: dict[str, Any] = {"value": _bytes(value), "key": _bytes(keys[i]),
                                  "on_delivery": on_delivery}
        if partitions[i] is not None:
            kwargs["partition"] = partitions[i]
        if headers[i]:
            kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
        while True:
            try:
                producer.produce(topics[i], **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 1000 == 0:
            producer.poll(0)
    return batch.num_rows

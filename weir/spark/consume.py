"""Executor side of a read: one offset range into Arrow batches.

Plaintext clusters are read by :mod:`weir.spark.fetch` (Fetch requests, bulk decoding);
otherwise (TLS, SASL) by a confluent-kafka consumer, here.  The consumer is assigned its partition explicitly (no consumer group is joined, nothing is
committed) and reads with large fetches.  The range never reaches past the high watermark
seen when it was planned, so only committed records are read.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from weir.spark.offsets import OffsetRange, report_data_loss
from weir.spark.schema import arrow_schema

log = logging.getLogger(__name__)

BATCH_ROWS = 20_000
CONSUMER_DEFAULTS = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "isolation.level": "read_uncommitted",
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "fetch.wait.max.ms": 100,
    "queued.max.messages.kbytes": 256 * 1024,
}


def consumer_conf(client_conf: Mapping[str, str], fail_on_data_loss: bool) -> dict[str, Any]:
    """Consumer settings: the user's ``kafka.*`` options over the connector's defaults.

    librdkafka insists on a ``group.id`` even for assign-only consumers; a random one is
    given and never used to join a group or commit.
    """
    conf: dict[str, Any] = {**CONSUMER_DEFAULTS, **client_conf}
    conf["group.id"] = f"weir-spark-{uuid.uuid4().hex[:12]}"
    conf["auto.offset.reset"] = "error" if fail_on_data_loss else "earliest"
    return conf


def to_arrow(msgs: list[Any], topic: str, partition: int, include_headers: bool) -> Any:
    """One ``pyarrow.RecordBatch`` (the Kafka schema) from consumed messages."""
    import pyarrow as pa

    schema = arrow_schema(include_headers)
    n = len(msgs)
    stamps = [m.timestamp() for m in msgs]
    arrays = [
        pa.array([m.key() for m in msgs], pa.binary()),
        pa.array([m.value() for m in msgs], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([m.offset() for m in msgs], pa.int64()),
        pa.array([ts * 1000 if kind > 0 else None for kind, ts in stamps],
                 schema.field("timestamp").type),
        pa.array([kind - 1 if kind > 0 else -1 for kind, _ in stamps], pa.int32()),
    ]
    if include_headers:
        arrays.append(pa.array([m.headers() or None for m in msgs],
                               schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def read_range(client_conf: Mapping[str, str], rng: OffsetRange, *, include_headers: bool,
               fail_on_data_loss: bool, poll_timeout_ms: int,
               batch_rows: int = BATCH_ROWS) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch``es of the records in ``rng``.

    Plaintext clusters are read with Fetch requests and the bulk decoder
    (:mod:`weir.spark.fetch`); TLS or SASL settings fall back to a confluent-kafka consumer.

    Raises DataLossError (``fail_on_data_loss``) when the range's first offsets were deleted
    or its last ones are no longer there, TimeoutError when no progress is made for
    ``poll_timeout_ms``, KafkaException on client errors.
    """
    if rng.size <= 0:
        return
    from weir.spark.fetch import native_supported, read_range_native

    if native_supported(client_conf):
        yield from read_range_native(client_conf, rng, include_headers=include_headers,
                                     fail_on_data_loss=fail_on_data_loss,
                                     poll_timeout_ms=poll_timeout_ms)
        return
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTP

    consumer = Consumer(consumer_conf(client_conf, fail_on_data_loss))
    try:
        consumer.assign([KafkaTP(rng.topic, rng.partition, rng.from_offset)])
        yield from _consume(consumer, rng, include_headers, fail_on_data_loss,
                            poll_timeout_ms / 1000, batch_rows)
    finally:
        consumer.close()


def _consume(consumer: Any, rng: OffsetRange, include_headers: bool, fail: bool,
             timeout_s: float, batch_rows: int) -> Iterator[Any]:
    from confluent_kafka import KafkaError, KafkaException

    position = rng.from_offset
    deadline = time.monotonic() + timeout_s
    while position < rng.until_offset:
        kept: list[Any] = []
        for msg in consumer.consume(min(batch_rows, rng.until_offset - position), 1.0):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() < rng.until_offset:
                        report_data_loss(f"{rng.tp}: the log ends at {msg.offset()} but"
                                         f" offsets up to {rng.until_offset} were expected.",
                                         fail)
                    position = rng.until_offset  # the rest of the range is a gap
                    break
                if err.code() in (KafkaError._AUTO_OFFSET_RESET,
                                  KafkaError.OFFSET_OUT_OF_RANGE):
                    report_data_loss(f"{rng.tp}: offset {position} is out of range ({err}).",
                                     True)
                raise KafkaException(err)
            offset = msg.offset()
            if offset >= rng.until_offset:
                position = rng.until_offset
                break
            if not fail and position == rng.from_offset < offset:
                # auto.offset.reset=earliest moved us past records deleted meanwhile
                log.warning("%s: records %d to %d are gone, reading from %d"
                            " (failOnDataLoss=false)", rng.tp, position, offset - 1, offset)
            kept.append(msg)
            position = offset + 1
        if kept:
            deadline = time.monotonic() + timeout_s
            yield to_arrow(kept, rng.topic, rng.partition, include_headers)
        elif time.monotonic() > deadline:
            raise TimeoutError(f"no record of {rng.tp} arrived for {timeout_s:.0f}s at offset"
                               f" {position} (reading up to {rng.until_offset})")


def first_at_or_after(client_conf: Mapping[str, str], candidates: Mapping[Any, int],
                      timestamp_ms: int, timeout_s: float = 30.0) -> dict[Any, int | None]:
    """Exact offsets of the first record with timestamp >= ``timestamp_ms`` per partition.

    ``candidates`` are ListOffsets answers ({TopicPartition: offset}), which a broker may
    give at batch granularity (the base offset of the batch holding the record); reading
    forward from each candidate to the first matching record makes them exact.  None where
    the log ends first.
    """
    from confluent_kafka import Consumer, KafkaError
    from confluent_kafka import TopicPartition as KafkaTP

    by_key = {(tp.topic, tp.partition): tp for tp in candidates}
    found: dict[Any, int | None] = {}
    if not candidates:
        return found
    consumer = Consumer(consumer_conf(client_conf, fail_on_data_loss=False))
    try:
        consumer.assign([KafkaTP(tp.topic, tp.partition, o) for tp, o in candidates.items()])
        deadline = time.monotonic() + timeout_s
        while len(found) < len(candidates):
            if time.monotonic() > deadline:
                raise TimeoutError(f"looking up offsets for timestamp {timestamp_ms} timed out")
            for msg in consumer.consume(500, 0.5):
                tp = by_key[(msg.topic(), msg.partition())]
                if tp in found:
                    continue
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    found[tp] = None
                elif err is None and msg.timestamp()[1] >= timestamp_ms:
                    found[tp] = msg.offset()
    finally:
        consumer.close()
    return found

"""``weir produce``: kafka-console-producer.sh for Weir.

Reads records from stdin (or ``--file``), one per line, and produces them with
confluent-kafka's Producer (librdkafka: batching, retries, idempotence and partitioning as
every other Kafka client; Weir's own asyncio client is a broker-to-broker request channel,
not a producer).  Line syntax and ``--property`` keys are the console producer's (see
``weir/cli/record_format.py``); ``--format json`` reads JSON lines with key, value, headers,
partition and timestamp.  Exit code 1 if any record was not acknowledged.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from weir.cli import int32
from weir.cli.admin_common import (
    AdminCliError,
    _common,
    _key_value,
    client_settings,
    first_session,
    kafka_error_text,
    kafka_name,
    reachable_bootstrap,
)
from weir.cli.errors import sigterm_as_interrupt
from weir.cli.record_format import ENCODINGS, FormatError, LineReader, Record, read_json_line


def add_parser(sub: Any) -> None:
    p = _common(sub.add_parser(
        "produce", help="produce records read from stdin, one per line (console producer)"))
    p.add_argument("--topic", required=True, help="the topic to write")
    p.add_argument("--property", dest="properties", type=_key_value, action="append",
                   default=[], metavar="KEY=VALUE",
                   help="line reader: parse.key, key.separator, parse.headers, "
                        "headers.delimiter, headers.separator, headers.key.separator, "
                        "ignore.error, null.marker")
    p.add_argument("--producer-property", dest="producer_properties", type=_key_value,
                   action="append", default=[], metavar="KEY=VALUE",
                   help="a librdkafka producer setting (e.g. linger.ms=5)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text lines (default) or JSON lines")
    p.add_argument("--encoding", choices=ENCODINGS, default="utf8",
                   help="how keys, values and header values are written (hex/base64: binary)")
    p.add_argument("--file", default=None, help="read this file instead of stdin")
    p.add_argument("--partition", type=int32, default=None, help="every record to this one")
    p.add_argument("--acks", default="all", choices=("all", "-1", "0", "1"),
                   help="request.required.acks (default all)")
    p.add_argument("--compression-type", default="none",
                   choices=("none", "gzip", "snappy", "lz4", "zstd"),
                   help="compression.type of the batches")


def _records(stream: IO[str], args: argparse.Namespace) -> Iterator[Record]:
    reader = LineReader.from_properties(dict(args.properties), args.encoding)
    for raw in stream:
        line = raw.rstrip("\n").removesuffix("\r")
        if args.format == "json":
            if not line.strip():
                continue
            yield read_json_line(line, args.encoding)
        else:
            yield reader.read(line)


def cmd_produce(args: argparse.Namespace) -> int:
    with sigterm_as_interrupt():  # stops reading; what was read is still flushed
        return _produce(args)


def _produce(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    if args.format == "json" and args.properties:
        raise AdminCliError("--property configures text lines; JSON lines carry their own "
                            "key and headers")
    try:  # a bad property fails before connecting
        LineReader.from_properties(dict(args.properties))
    except FormatError as exc:
        raise AdminCliError(str(exc)) from None
    errors: list[Any] = []  # librdkafka's error_cb: an authentication failure shows here
    config = {"bootstrap.servers": reachable_bootstrap(args), "log_level": 2,
              "acks": args.acks, "compression.type": args.compression_type,
              "message.timeout.ms": int(args.timeout * 1000),
              "socket.timeout.ms": int(args.timeout * 1000), "error_cb": errors.append,
              **client_settings(args), **dict(args.producer_properties)}
    try:
        producer = Producer(config)
    except KafkaException as exc:  # a bad --producer-property
        raise AdminCliError(f"producer settings: {kafka_error_text(exc)}") from None
    first_session(producer, errors, args.timeout, secured=bool(client_settings(args)))
    _check_partition(producer, args)
    acked: list[dict[str, Any]] = []
    failed: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(f"{kafka_name(err)}: {err.str()}")
            if args.json:
                print(json.dumps({"error": kafka_name(err), "message": err.str()}), flush=True)
            return
        report = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
                  "timestamp": msg.timestamp()[1]}
        acked.append(report)
        if args.json:
            print(json.dumps(report), flush=True)

    stream = open(args.file, encoding="utf-8") if args.file else sys.stdin  # noqa: SIM115
    count = 0
    try:
        for record in _records(stream, args):
            count += 1
            _send(producer, args, record, delivered)
    except FormatError as exc:
        producer.flush(args.timeout)
        raise AdminCliError(str(exc)) from None
    except KafkaException as exc:  # refused before sending, e.g. a partition it lacks
        producer.flush(args.timeout)
        raise AdminCliError(f"producing to {args.topic}: {kafka_error_text(exc)}") from None
    except KeyboardInterrupt:
        pass
    finally:
        if args.file:
            stream.close()
    left = producer.flush(args.timeout + 5)
    if left:
        failed.extend([f"REQUEST_TIMED_OUT: not delivered within {args.timeout:g}s"] * left)
    if failed:  # one error line: the first failure's Kafka error name, and the counts
        raise AdminCliError(f"producing to {args.topic}: {failed[0]} ({len(failed)} of "
                            f"{count} record(s) not acknowledged)")
    if not args.json:
        print(f"Produced {len(acked)} of {count} record(s) to {args.topic}"
              + (f" (--file {Path(args.file).name})" if args.file else ""), file=sys.stderr)
    return 0


def _check_partition(producer: Any, args: argparse.Namespace) -> None:
    """Metadata of the topic (which also fails fast on an unreachable cluster); a
    ``--partition`` the topic lacks is UNKNOWN_TOPIC_OR_PARTITION before any line is read.
    An unknown topic is left to the broker (auto.create.topics.enable)."""
    from confluent_kafka import KafkaException

    try:
        md = producer.list_topics(args.topic, timeout=args.timeout)
    except KafkaException as exc:
        raise AdminCliError(f"cannot reach the cluster: {kafka_error_text(exc)}") from None
    meta = md.topics.get(args.topic)
    if meta is not None and meta.error is not None and kafka_name(
            meta.error) == "UNKNOWN_TOPIC_OR_PARTITION":  # not created on request either
        raise AdminCliError(f"producing to {args.topic}: UNKNOWN_TOPIC_OR_PARTITION: the "
                            "topic does not exist (and the cluster does not create topics "
                            "on request: auto.create.topics.enable)")
    if args.partition is None or meta is None or meta.error is not None:
        return
    if args.partition not in meta.partitions:
        raise AdminCliError(f"topic {args.topic} has no partition {args.partition} (it has "
                            f"{len(meta.partitions)})", name="UNKNOWN_TOPIC_OR_PARTITION")


def _send(producer: Any, args: argparse.Namespace, record: Record, delivered: Any) -> None:
    partition = args.partition if record.partition is None else record.partition
    kwargs: dict[str, Any] = {"value": record.value, "key": record.key,
                              "on_delivery": delivered}
    if record.headers:
        kwargs["headers"] = list(record.headers)
    if partition is not None:
        kwargs["partition"] = partition
    if record.timestamp is not None:
        kwargs["timestamp"] = record.timestamp
    while True:
        try:
            producer.produce(args.topic, **kwargs)
            break
        except BufferError:  # the local queue is full: let deliveries drain
            producer.poll(0.1)
    producer.poll(0)

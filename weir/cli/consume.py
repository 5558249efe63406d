"""``weir consume``: kafka-console-consumer.sh for Weir.

confluent-kafka's Consumer (librdkafka) reads ``--topic``: as a member of ``--group`` (or of a
throwaway ``console-consumer-<n>`` group that commits nothing), or, with ``--partition``,
from one assigned partition.  Where to start: the group's committed offset, else the log end
(``--from-beginning``: the log start); ``--offset N|earliest|latest`` with ``--partition``;
``--from-timestamp`` (ISO-8601 or epoch ms) the first offset at or after that time
(ListOffsets by timestamp) on every partition, or on ``--partition``.  It stops after
``--max-messages``, when nothing arrived for ``--timeout-ms``, or on Ctrl-C, and prints
``Processed a total of N messages`` on stderr, as Kafka's tool does.

Records are printed by Kafka's DefaultMessageFormatter rules (``--property print.key=true``
...; see ``weir/cli/record_format.py``), or as JSON lines with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

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
from weir.cli.record_format import ENCODINGS, FormatError, Formatter, Record, record_json
from weir.ops.offset_reset import ResetError, parse_datetime_ms


def add_parser(sub: Any) -> None:
    p = _common(sub.add_parser("consume", help="print records of a topic (console consumer)"))
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--group", default=None,
                   help="consumer group (commits its offsets); default: a throwaway group "
                        "that commits nothing")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the log start when there is no committed offset")
    start.add_argument("--offset", default=None, metavar="N|earliest|latest",
                       help="start offset on --partition")
    start.add_argument("--from-timestamp", default=None, metavar="ISO|MS",
                       help="first record at or after this time (2024-01-31T12:00:00, "
                            "UTC unless a zone is given; or epoch milliseconds)")
    p.add_argument("--partition", type=int32, default=None, help="read only this partition")
    p.add_argument("--max-messages", type=int, default=None, metavar="N",
                   help="stop after N records")
    p.add_argument("--timeout-ms", type=int, default=None, metavar="MS",
                   help="stop when no record arrived for this long")
    p.add_argument("--isolation-level", default="read_uncommitted",
                   choices=("read_uncommitted", "read_committed"),
                   help="read_committed skips aborted transactions' records")
    p.add_argument("--property", dest="properties", type=_key_value, action="append",
                   default=[], metavar="KEY=VALUE",
                   help="formatter: print.key, print.timestamp, print.offset, "
                        "print.partition, print.headers, print.value, key.separator, "
                        "line.separator, headers.separator, null.literal")
    p.add_argument("--consumer-property", dest="consumer_properties", type=_key_value,
                   action="append", default=[], metavar="KEY=VALUE",
                   help="a librdkafka consumer setting")
    p.add_argument("--encoding", choices=ENCODINGS, default="utf8",
                   help="how keys, values and header values are printed (hex/base64: binary)")


MAX_INT64 = 2**63 - 1  # a Kafka timestamp or offset is an int64


def _start_offset(args: argparse.Namespace) -> int | None:
    """The offset ``--offset`` names (librdkafka's logical offsets for earliest/latest)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if args.offset is None:
        return OFFSET_BEGINNING if args.from_beginning else None
    named = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}
    if args.offset.lower() in named:
        return named[args.offset.lower()]
    try:
        offset = int(args.offset)
    except ValueError:
        raise AdminCliError(f"--offset takes a number, earliest or latest: {args.offset!r}"
                            ) from None
    if not 0 <= offset <= MAX_INT64:
        raise AdminCliError(f"--offset must be 0 or more and at most {MAX_INT64}")
    return offset


def _timestamp_ms(text: str) -> int:
    if text.strip().isdigit():
        if int(text) > MAX_INT64:
            raise AdminCliError(f"--from-timestamp: {text.strip()} ms is beyond the largest "
                                f"Kafka timestamp ({MAX_INT64})")
        return int(text)
    try:
        return parse_datetime_ms(text)
    except ResetError as exc:
        raise AdminCliError(str(exc)) from None


def _check(args: argparse.Namespace) -> None:
    if args.offset is not None and args.partition is None:
        raise AdminCliError("--offset needs --partition")
    if args.max_messages is not None and args.max_messages < 1:
        raise AdminCliError("--max-messages must be 1 or more")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise AdminCliError("--timeout-ms must be 0 or more")


def _consumer(args: argparse.Namespace) -> Any:
    from confluent_kafka import Consumer, KafkaException

    group = args.group or f"console-consumer-{random.randrange(100000)}"
    errors: list[Any] = []  # librdkafka's error_cb: an authentication failure shows here
    config = {"bootstrap.servers": reachable_bootstrap(args), "group.id": group, "log_level": 2,
              "error_cb": errors.append,
              "enable.auto.commit": args.group is not None,
              "auto.offset.reset": "earliest" if args.from_beginning else "latest",
              "isolation.level": args.isolation_level,
              "socket.timeout.ms": int(args.timeout * 1000),
              **client_settings(args), **dict(args.consumer_properties)}
    try:
        consumer = Consumer(config)
    except KafkaException as exc:  # a bad --consumer-property: librdkafka's _INVALID_ARG
        raise AdminCliError(f"consumer settings: {kafka_error_text(exc)}") from None
    try:
        first_session(consumer, errors, args.timeout, secured=bool(client_settings(args)))
    except AdminCliError:
        consumer.close()
        raise
    return consumer


def _partitions(args: argparse.Namespace, consumer: Any) -> list[int]:
    """The topic's partitions (checks that the topic and --partition exist)."""
    from confluent_kafka import KafkaException

    try:
        md = consumer.list_topics(args.topic, timeout=args.timeout)
    except KafkaException as exc:
        raise AdminCliError(f"cannot reach the cluster: {kafka_error_text(exc)}"
                            ) from None
    meta = md.topics.get(args.topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise AdminCliError(f"unknown topic {args.topic!r}", name="UNKNOWN_TOPIC_OR_PARTITION")
    ids = sorted(meta.partitions)
    if args.partition is not None and args.partition not in ids:
        raise AdminCliError(f"topic {args.topic} has no partition {args.partition} "
                            f"(it has {len(ids)})", name="UNKNOWN_TOPIC_OR_PARTITION")
    return ids


def _position(args: argparse.Namespace, consumer: Any, partitions: list[int]) -> bool:
    """Assign where the start is explicit; False: subscribe to the group instead."""
    from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

    wanted = [args.partition] if args.partition is not None else partitions
    if args.from_timestamp is not None:
        when = _timestamp_ms(args.from_timestamp)
        try:
            found = consumer.offsets_for_times(
                [TopicPartition(args.topic, p, when) for p in wanted], timeout=args.timeout)
        except KafkaException as exc:
            raise AdminCliError(f"looking up offsets for {args.from_timestamp}: "
                                f"{kafka_error_text(exc)}") from None
        # no record at or after the time: start at the log end (offset -1 from ListOffsets)
        consumer.assign([TopicPartition(tp.topic, tp.partition,
                                        tp.offset if tp.offset >= 0 else OFFSET_END)
                         for tp in found])
        return True
    if args.partition is None:
        consumer.subscribe([args.topic])
        return False
    offset = _start_offset(args)
    tp = TopicPartition(args.topic, args.partition)
    if offset is not None:
        tp.offset = offset
    elif args.group is None:
        tp.offset = OFFSET_END  # Kafka's default --offset latest
    consumer.assign([tp])
    return True


def _record(msg: Any) -> Record:
    kind, ts = msg.timestamp()
    return Record(value=msg.value(), key=msg.key(), headers=list(msg.headers() or []),
                  partition=msg.partition(), offset=msg.offset(), topic=msg.topic(),
                  timestamp=ts, timestamp_type=kind)


def cmd_consume(args: argparse.Namespace) -> int:
    with sigterm_as_interrupt():  # closes the consumer: commits, leaves the group
        return _consume(args)


def _consume(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaError

    _check(args)
    try:
        formatter = Formatter.from_properties(dict(args.properties), args.encoding)
    except FormatError as exc:
        raise AdminCliError(str(exc)) from None
    consumer = _consumer(args)
    count, started = 0, False
    try:
        _position(args, consumer, _partitions(args, consumer))
        started = True
        idle_s = None if args.timeout_ms is None else args.timeout_ms / 1000
        last = time.monotonic()
        while args.max_messages is None or count < args.max_messages:
            msg = consumer.poll(0.2 if idle_s is None else max(0.0, min(0.2, idle_s)))
            if msg is None:
                if idle_s is not None and time.monotonic() - last >= idle_s:
                    break
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                 KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                 KafkaError.GROUP_AUTHORIZATION_FAILED):
                    raise AdminCliError(f"{kafka_name(err)}: {err.str()}")
                print(f"weir: {kafka_name(err)}: {err.str()}", file=sys.stderr)
                continue
            last = time.monotonic()
            count += 1
            record = _record(msg)
            if args.json:
                sys.stdout.write(json.dumps(record_json(record, args.encoding)) + "\n")
            else:
                sys.stdout.write(formatter.format(record))
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()  # commits the consumed offsets when --group is given
        if started:
            print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0

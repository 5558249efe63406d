"""Options of the ``weir`` Spark data source, named and checked as Spark's Kafka source does.

Pure parsing: every read or write checks its options here, on the driver, before any work
starts; a missing, malformed or contradictory option raises :class:`OptionError` whose
message names the option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from weir.common import TopicPartition

EARLIEST = -2
LATEST = -1
SUBSCRIPTION_KEYS = ("subscribe", "subscribepattern", "assign")
# Spark Kafka options this source does not implement: refused rather than silently ignored.
UNSUPPORTED = ("startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "minoffsetspertrigger",
               "maxtriggerdelay", "groupidprefix")
# Client settings the connector owns; a kafka.* override would break its guarantees.
RESERVED_CLIENT_KEYS = ("group.id", "enable.auto.commit", "auto.offset.reset",
                        "enable.idempotence", "acks", "isolation.level", "transactional.id")
DEFAULT_POLL_TIMEOUT_MS = 120_000


class OptionError(ValueError):
    """A missing, malformed or contradictory option of the ``weir`` data source."""


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: ``subscribe`` topics, a ``subscribePattern`` or ``assign``."""

    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` belongs to a subscribe/subscribePattern subscription."""
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        return any(tp.topic == topic for tp in self.assigned)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: ``earliest``, ``latest``, per-partition offsets, a time."""

    kind: str  # "earliest" | "latest" | "specific" | "timestamp"
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp_ms: int = -1

    def describe(self) -> str:
        if self.kind == "timestamp":
            return f"timestamp {self.timestamp_ms}"
        return self.kind


EARLIEST_SPEC = OffsetSpec("earliest")
LATEST_SPEC = OffsetSpec("latest")


@dataclass(frozen=True)
class ReadOptions:
    """Everything a batch or streaming read needs, checked."""

    client_conf: Mapping[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # batch only
    streaming: bool
    max_offsets_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy
    # Where history comes from (weir.spark.read): "table", "log", or None (the table when
    # the topic has one).
    history: str | None = None


@dataclass(frozen=True)
class WriteOptions:
    """What a batch or streaming write needs, checked."""

    client_conf: Mapping[str, str]
    topic: str | None
    # Streaming writes only: each task's records of a micro-batch in one Kafka transaction
    # (KIP-98), written at most once per (query, partition, micro-batch).
    exactly_once: bool = False


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def client_conf(opts: Mapping[str, str]) -> dict[str, str]:
    """``bootstrap.servers`` plus every ``kafka.*`` option with the prefix removed."""
    conf = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    alias = opts.get("bootstrap.servers")
    if alias and conf.get("bootstrap.servers", alias) != alias:
        raise OptionError("'kafka.bootstrap.servers' and 'bootstrap.servers' disagree")
    if alias:
        conf["bootstrap.servers"] = alias
    if not conf.get("bootstrap.servers", "").strip():
        raise OptionError("option 'kafka.bootstrap.servers' (or 'bootstrap.servers') is"
                          " required, e.g. 127.0.0.1:9092")
    reserved = sorted(k for k in conf if k in RESERVED_CLIENT_KEYS)
    if reserved:
        raise OptionError(f"kafka.{reserved[0]} is set by the weir data source and cannot be"
                          " overridden")
    return conf


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option '{name}' must be true or false, got {raw!r}")
    return value == "true"


def _positive(opts: Mapping[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be a positive integer, got {raw!r}")
    return value


def _json(raw: str, name: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise OptionError(f"option '{name}' is not valid JSON ({exc}): {raw!r}") from None


def parse_subscription(opts: Mapping[str, str]) -> Subscription:
    """Exactly one of ``subscribe``, ``subscribePattern``, ``assign``."""
    given = [k for k in SUBSCRIPTION_KEYS if k in opts]
    if len(given) != 1:
        found = ", ".join(given) or "none"
        raise OptionError("exactly one of the options 'subscribe', 'subscribePattern' or"
                          f" 'assign' must be given (found: {found})")
    key = given[0]
    raw = opts[key].strip()
    if key == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' needs a comma-separated list of topics")
        return Subscription("subscribe", topics=topics)
    if key == "subscribepattern":
        if not raw:
            raise OptionError("option 'subscribePattern' needs a regular expression")
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
        return Subscription("subscribePattern", pattern=raw)
    parsed = _json(raw, "assign")
    if not isinstance(parsed, dict) or not parsed or not all(
            isinstance(v, list) and v and all(isinstance(p, int) for p in v)
            for v in parsed.values()):
        raise OptionError("option 'assign' must be JSON like {\"topicA\":[0,1],\"topicB\":[2]},"
                          f" got {raw!r}")
    tps = tuple(sorted({TopicPartition(t, p) for t, parts in parsed.items() for p in parts}))
    return Subscription("assign", assigned=tps)


def parse_offsets_json(raw: str, name: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -2}}`` → {TopicPartition: offset}."""
    parsed = _json(raw, name)
    example = 'JSON like {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f"option '{name}' must be 'earliest', 'latest' or {example}")
    result: dict[TopicPartition, int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option '{name}' must be {example}, got {raw!r}")
        for part, offset in parts.items():
            try:
                tp = TopicPartition(str(topic), int(part))
            except ValueError:
                raise OptionError(f"option '{name}': partition {part!r} is not a number") from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                raise OptionError(f"option '{name}': offset of {tp} must be an integer >= -2"
                                  f" (-2 earliest, -1 latest), got {offset!r}")
            result[tp] = offset
    return result


def _offset_spec(opts: Mapping[str, str], key: str, name: str) -> OffsetSpec | None:
    raw = opts.get(key)
    if raw is None:
        return None
    value = raw.strip()
    if value.lower() == "earliest":
        return EARLIEST_SPEC
    if value.lower() == "latest":
        return LATEST_SPEC
    return OffsetSpec("specific", parse_offsets_json(value, name))


def _timestamp(opts: Mapping[str, str], key: str, name: str) -> OffsetSpec | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{name}' must be milliseconds since the epoch, got"
                          f" {raw!r}") from None
    if value < 0:
        raise OptionError(f"option '{name}' must be >= 0, got {raw!r}")
    return OffsetSpec("timestamp", timestamp_ms=value)


def parse_read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    """Check the options of a batch (``streaming=False``) or streaming read."""
    opts = _lower(options)
    for key in UNSUPPORTED:
        if key in opts:
            raise OptionError(f"option '{key}' of Spark's Kafka source is not supported by the"
                              " weir data source")
    conf = client_conf(opts)
    sub = parse_subscription(opts)
    starting = (_timestamp(opts, "startingtimestamp", "startingTimestamp")
                or _offset_spec(opts, "startingoffsets", "startingOffsets"))
    ending = (_timestamp(opts, "endingtimestamp", "endingTimestamp")
              or _offset_spec(opts, "endingoffsets", "endingOffsets"))
    max_per_trigger = _positive(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    max_bytes = _positive(opts, "maxbytespertrigger", "maxBytesPerTrigger")
    if streaming:
        if ending is not None:
            raise OptionError("options 'endingOffsets'/'endingTimestamp' are for batch queries;"
                              " a streaming query has no end")
        starting = starting or LATEST_SPEC
    else:
        if max_per_trigger is not None:
            raise OptionError("option 'maxOffsetsPerTrigger' is for streaming queries only")
        if max_bytes is not None:
            raise OptionError("option 'maxBytesPerTrigger' is for streaming queries only")
        starting = starting or EARLIEST_SPEC
        ending = ending or LATEST_SPEC
        _check_batch_bounds(starting, ending)
    _check_specific_within(sub, starting, "startingOffsets")
    if ending is not None:
        _check_specific_within(sub, ending, "endingOffsets")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or"
                          f" 'latest', got {strategy!r}")
    poll = _positive(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs")
    history = opts.get("history")
    if history is not None:
        history = history.strip().lower()
        if streaming or history not in ("table", "log"):
            raise OptionError("option 'history' must be 'table' or 'log' and is for batch reads"
                              f" only, got {opts['history']!r}")
    return ReadOptions(
        client_conf=conf, subscription=sub, starting=starting, ending=ending,
        streaming=streaming, max_offsets_per_trigger=max_per_trigger,
        max_bytes_per_trigger=max_bytes,
        min_partitions=_positive(opts, "minpartitions", "minPartitions"),
        max_records_per_partition=_positive(opts, "maxrecordsperpartition",
                                            "maxRecordsPerPartition"),
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        poll_timeout_ms=poll or DEFAULT_POLL_TIMEOUT_MS, timestamp_strategy=strategy,
        history=history,
    )


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if starting.kind == "latest":
        raise OptionError("startingOffsets='latest' is not allowed for batch queries")
    if ending.kind == "earliest":
        raise OptionError("endingOffsets='earliest' is not allowed for batch queries")
    bad = [tp for tp, o in starting.offsets.items() if o == LATEST]
    if bad:
        raise OptionError(f"startingOffsets for {bad[0]} can't be latest (-1) for batch queries")
    bad = [tp for tp, o in ending.offsets.items() if o == EARLIEST]
    if bad:
        raise OptionError(f"endingOffsets for {bad[0]} can't be earliest (-2) for batch queries")


def _check_specific_within(sub: Subscription, spec: OffsetSpec, name: str) -> None:
    outside = sorted(tp for tp in spec.offsets if not sub.matches(tp.topic)
                     or (sub.kind == "assign" and tp not in sub.assigned))
    if outside:
        raise OptionError(f"option '{name}' names {outside[0]}, which is not in the"
                          f" {sub.kind} subscription")


def parse_write_options(options: Mapping[str, str], columns: Mapping[str, str],
                        overwrite: bool = False, streaming: bool = False) -> WriteOptions:
    """Check a write: client options, ``topic`` option or column, the input's columns.

    ``columns`` maps each input column name to its Spark type name (``simpleString``).
    """
    opts = _lower(options)
    if overwrite:
        raise OptionError("the weir data source only appends; use mode('append')")
    conf = client_conf(opts)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' is empty")
    if "value" not in columns:
        raise OptionError("a 'value' column (string or binary) is required to write records")
    wanted = {"value": ("string", "binary"), "key": ("string", "binary"), "topic": ("string",),
              "partition": ("int",),
              "headers": ("array<struct<key:string,value:binary>>",)}
    for name, types in wanted.items():
        if name in columns and columns[name] not in types:
            raise OptionError(f"column '{name}' must be of type {' or '.join(types)},"
                              f" not {columns[name]}")
    if topic is None and "topic" not in columns:
        raise OptionError("a topic is required: set the 'topic' option or add a 'topic' column")
    exactly_once = _bool(opts, "exactlyonce", "exactlyOnce", False)
    if exactly_once and not streaming:
        raise OptionError("option 'exactlyOnce' is for streaming writes (writeStream) only")
    if exactly_once and topic is None:
        raise OptionError("option 'exactlyOnce' needs the 'topic' option")
    return WriteOptions(client_conf=conf, topic=topic.strip() if topic else None,
                        exactly_once=exactly_once)

"""Per-log configuration, keyed by Kafka's *topic* config names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, ClassVar

from weir.config.keys import topic_default
from weir.config.topic import topic_config
from weir.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from weir.config import BrokerConfig

__all__ = ["LogConfig"]

LONG_MAX = 2**63 - 1
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Typed log settings (Kafka's ``LogConfig``); the field defaults are Kafka's topic-level
    defaults from the key table, :meth:`from_config` is a topic's effective config on a
    broker."""

    segment_bytes: int = topic_default("segment.bytes")
    segment_ms: int = topic_default("segment.ms")
    retention_ms: int = topic_default("retention.ms")  # -1 = infinite
    retention_bytes: int = topic_default("retention.bytes")  # -1 = infinite
    index_interval_bytes: int = topic_default("index.interval.bytes")
    segment_index_bytes: int = topic_default("segment.index.bytes")
    max_message_bytes: int = topic_default("max.message.bytes")
    message_timestamp_type: str = topic_default("message.timestamp.type")
    flush_messages: int = topic_default("flush.messages")
    flush_ms: int = topic_default("flush.ms")
    file_delete_delay_ms: int = topic_default("file.delete.delay.ms")
    # Log compaction (KIP-58, KIP-354, KIP-534): weir.storage.cleaner
    cleanup_policy: tuple[str, ...] = tuple(sorted(topic_default("cleanup.policy")))
    min_cleanable_dirty_ratio: float = topic_default("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = topic_default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = topic_default("max.compaction.lag.ms")
    delete_retention_ms: int = topic_default("delete.retention.ms")

    KEYS: ClassVar[dict[str, str]] = {
        "segment.bytes": "segment_bytes",
        "segment.ms": "segment_ms",
        "retention.ms": "retention_ms",
        "retention.bytes": "retention_bytes",
        "index.interval.bytes": "index_interval_bytes",
        "segment.index.bytes": "segment_index_bytes",
        "max.message.bytes": "max_message_bytes",
        "message.timestamp.type": "message_timestamp_type",
        "flush.messages": "flush_messages",
        "flush.ms": "flush_ms",
        "file.delete.delay.ms": "file_delete_delay_ms",
        "cleanup.policy": "cleanup_policy",
        "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
        "min.compaction.lag.ms": "min_compaction_lag_ms",
        "max.compaction.lag.ms": "max_compaction_lag_ms",
        "delete.retention.ms": "delete_retention_ms",
    }

    @classmethod
    def from_dict(cls, d: dict[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka topic config keys; missing keys come from ``base`` (or Kafka's
        defaults).  Keys this layer does not use (``cleanup.policy``...) are ignored."""
        return (base or cls()).merged(d)

    @classmethod
    def from_config(cls, config: BrokerConfig, overrides: Mapping[str, str] | None = None
                    ) -> LogConfig:
        """A topic's log settings on a broker: its overrides (``/config/topics/<t>``) over
        the broker's effective defaults (``log.segment.bytes`` → ``segment.bytes``, ...)."""
        return cls.from_dict(topic_config(config, overrides))

    def merged(self, overrides: dict[str, Any]) -> LogConfig:
        """A copy with the given Kafka topic config keys overridden."""
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            name = self.KEYS.get(key)
            if name is None or value is None:
                continue
            changes[name] = _coerce(key, name, value)
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Kafka topic config keys → values."""
        values = asdict(self)
        return {key: values[name] for key, name in self.KEYS.items()}

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compact(self) -> bool:
        """``cleanup.policy`` includes ``compact``: the log cleaner compacts the log."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """``cleanup.policy`` includes ``delete``: retention by time and size applies."""
        return "delete" in self.cleanup_policy


_FIELD_NAMES = {f.name for f in fields(LogConfig)}


def _coerce(key: str, name: str, value: Any) -> Any:
    assert name in _FIELD_NAMES
    if name == "cleanup_policy":
        items = value.split(",") if isinstance(value, str) else list(value)
        policy = tuple(sorted({str(v).strip() for v in items if str(v).strip()}))
        if not policy or any(p not in CLEANUP_POLICIES for p in policy):
            raise KafkaError(ErrorCode.invalid_config,
                             f"{key} must be a list of {CLEANUP_POLICIES}, got {value!r}")
        return policy
    if name == "min_cleanable_dirty_ratio":
        try:
            return float(value)
        except (TypeError, ValueError) as exc:
            raise KafkaError(ErrorCode.invalid_config, f"{key} must be a number") from exc
    if name == "message_timestamp_type":
        if value not in TIMESTAMP_TYPES:
            raise KafkaError(
                ErrorCode.invalid_config, f"{key} must be one of {TIMESTAMP_TYPES}, got {value!r}"
            )
        return value
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise KafkaError(ErrorCode.invalid_config, f"{key} must be an integer") from exc

"""All logs of a broker across its log dirs, plus the log-dir level checkpoint files.

Each log dir holds ``<topic>-<partition>/`` directories and Kafka's checkpoint files
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``) and, after a clean shutdown, ``.kafka_cleanshutdown``.

A log dir that fails with an I/O error goes offline: its partitions answer
``KafkaError(kafka_storage_error)`` and the other dirs keep working.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    atomic_write,
    write_offset_checkpoint,
    write_partition_metadata,
)
from weir.storage.config import LogConfig
from weir.storage.integrity import read_checkpoint_or_reset
from weir.storage.log import Log, parse_topic_partition

__all__ = ["LogManager"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_SKIPPED_SUFFIXES = ("-delete", "-future", "-stray")


class LogManager:
    """Creates, loads, checkpoints and retires the logs of one broker."""

    def __init__(self, log_dirs: list[Path], default_config: LogConfig) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._offline: dict[Path, str] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._now_ms = 0
        # Called with (log dir, reason) when a dir goes offline (Kafka's LogDirFailureChannel).
        self.dir_failure_listeners: list[Callable[[Path, str], None]] = []

    # -- startup and shutdown ----------------------------------------------------------
    def startup(self, now_ms: int, configs: Mapping[str, LogConfig] | None = None) -> None:
        """Load every partition dir of every log dir (``configs``: per-topic overrides)."""
        self._now_ms = now_ms
        self._topic_configs.update(configs or {})
        for log_dir in self.log_dirs:
            self._guard(log_dir, lambda d=log_dir: self._load_dir(d, now_ms))

    def _load_dir(self, log_dir: Path, now_ms: int) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery, bad_recovery = read_checkpoint_or_reset(
            log_dir / RECOVERY_POINT_CHECKPOINT,
            "resetting the recovery points of its log dir to 0 (every segment is recovered)",
        )
        starts, bad_starts = read_checkpoint_or_reset(
            log_dir / LOG_START_OFFSET_CHECKPOINT,
            "each log starts at the base offset of its first segment",
        )
        hws, bad_hws = read_checkpoint_or_reset(
            log_dir / REPLICATION_OFFSET_CHECKPOINT,
            "high watermarks are unknown (each starts at its log start offset)",
        )
        for child in sorted(log_dir.iterdir()):
            tp = parse_topic_partition(child.name)
            if not child.is_dir() or tp is None or child.name.endswith(_SKIPPED_SUFFIXES):
                continue
            self._log_dir_of[tp] = log_dir  # known even if opening fails below
            self._logs[tp] = Log.open(
                child,
                self.config_for(tp.topic),
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp),
                clean_shutdown=clean,
                now_ms=now_ms,
                high_watermark=hws.get(tp),
            )
        marker.unlink(missing_ok=True)
        self._rewrite_checkpoints(log_dir, bad_recovery, bad_starts, bad_hws)
        log.info("loaded %s (clean shutdown: %s)", log_dir, clean)

    def _rewrite_checkpoints(self, log_dir: Path, recovery: bool, starts: bool, hws: bool) -> None:
        """Replace malformed checkpoint files with the values the logs were loaded with."""
        in_dir = {tp: lg for tp, lg in self._logs.items() if self._log_dir_of[tp] == log_dir}
        for bad, name, value in (
            (recovery, RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point),
            (starts, LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset),
            (hws, REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark),
        ):
            if bad:
                write_offset_checkpoint(
                    log_dir / name, {tp: value(lg) for tp, lg in in_dir.items()}
                )

    def shutdown(self) -> None:
        """Flush and close every log, write all checkpoints and the clean-shutdown marker."""
        for tp, lg in list(self.all_logs().items()):
            self._guard(self._log_dir_of[tp], lg.flush)
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        for tp, lg in list(self.all_logs().items()):
            self._guard(self._log_dir_of[tp], lg.close)
        for log_dir in self.online_dirs:
            self._guard(log_dir, lambda d=log_dir: atomic_write(d / CLEAN_SHUTDOWN_FILE, ""))

    # -- offline handling --------------------------------------------------------------
    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Failed log dirs → reason."""
        return dict(self._offline)

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self._offline]

    def _guard(self, log_dir: Path, action: Callable[[], _T]) -> _T | None:
        """Run ``action``; an I/O failure takes ``log_dir`` offline instead of raising."""
        if log_dir in self._offline:
            return None
        try:
            return action()
        except (OSError, KafkaError) as exc:
            if isinstance(exc, KafkaError) and exc.code != ErrorCode.kafka_storage_error:
                raise
            self._mark_offline(log_dir, str(exc))
            return None

    def _mark_offline(self, log_dir: Path, reason: str) -> None:
        log.error("log dir %s is offline: %s", log_dir, reason)
        self._offline[log_dir] = reason
        for tp, d in list(self._log_dir_of.items()):
            if d == log_dir and tp in self._logs:
                self._logs[tp].offline_reason = reason
        for listener in self.dir_failure_listeners:
            listener(log_dir, reason)

    def _storage_error(self, tp: TopicPartition) -> KafkaError:
        log_dir = self._log_dir_of[tp]
        return KafkaError(
            ErrorCode.kafka_storage_error,
            f"{tp} is in offline log dir {log_dir}: {self._offline[log_dir]}",
        )

    # -- lookup and lifecycle ----------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, tp: TopicPartition) -> Log | None:
        """The partition's log, None if absent; KafkaError(kafka_storage_error) if offline."""
        lg = self._logs.get(tp)
        if lg is not None and lg.offline_reason is not None:
            self._guard_failed(tp, lg.offline_reason)
        if self._log_dir_of.get(tp) in self._offline:
            raise self._storage_error(tp)
        return lg

    def _guard_failed(self, tp: TopicPartition, reason: str) -> None:
        log_dir = self._log_dir_of[tp]
        if log_dir not in self._offline:
            self._mark_offline(log_dir, reason)

    def all_logs(self) -> dict[TopicPartition, Log]:
        """Online logs by partition."""
        return {
            tp: lg for tp, lg in self._logs.items() if self._log_dir_of[tp] not in self._offline
        }

    def get_or_create_log(
        self,
        tp: TopicPartition,
        config: LogConfig | None = None,
        topic_id: str | None = None,
        *,
        now_ms: int | None = None,
    ) -> Log:
        """Existing log, or a new one in the online log dir holding the fewest partitions."""
        existing = self.get_log(tp)
        if existing is not None:
            return existing
        if config is not None:
            self._topic_configs[tp.topic] = config
        now = self._now_ms if now_ms is None else now_ms
        for log_dir in self._dirs_by_load():
            created = self._guard(log_dir, lambda d=log_dir: self._create(d, tp, topic_id, now))
            if created is not None:
                return created
        raise KafkaError(ErrorCode.kafka_storage_error, f"no online log dir can host {tp}")

    def _dirs_by_load(self) -> list[Path]:
        counts = {d: 0 for d in self.online_dirs}
        for tp in self._logs:
            d = self._log_dir_of[tp]
            if d in counts:
                counts[d] += 1
        return sorted(counts, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def _create(self, log_dir: Path, tp: TopicPartition, topic_id: str | None, now: int) -> Log:
        log_dir.mkdir(parents=True, exist_ok=True)
        lg = Log.open(log_dir / str(tp), self.config_for(tp.topic), clean_shutdown=True, now_ms=now)
        if topic_id is not None:
            write_partition_metadata(lg.dir, topic_id)
        self._logs[tp] = lg
        self._log_dir_of[tp] = log_dir
        return lg

    def delete_log(self, tp: TopicPartition) -> bool:
        """Remove the partition's log and directory; True if it existed."""
        lg = self._logs.pop(tp, None)
        log_dir = self._log_dir_of.pop(tp, None)
        if lg is None or log_dir is None:
            return False
        self._guard(log_dir, lg.delete)
        return True

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic's new config to its existing and future logs."""
        self._topic_configs[topic] = config
        for tp, lg in self._logs.items():
            if tp.topic == topic:
                lg.update_config(config)

    # -- checkpoints -------------------------------------------------------------------
    def _write_per_dir(self, file_name: str, value: Callable[[Log], int]) -> None:
        for log_dir in self.online_dirs:
            offsets = {
                tp: value(lg) for tp, lg in self._logs.items() if self._log_dir_of[tp] == log_dir
            }
            self._guard(
                log_dir,
                lambda d=log_dir, o=offsets: write_offset_checkpoint(d / file_name, o),
            )

    def checkpoint_recovery_points(self) -> None:
        self._write_per_dir(RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_per_dir(LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        """Write every log's own high watermark to ``replication-offset-checkpoint``."""
        self._write_per_dir(REPLICATION_OFFSET_CHECKPOINT, lambda lg: lg.high_watermark)

    def write_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Write the given high watermarks, each to its partition's log dir."""
        for log_dir in self.online_dirs:
            offsets = {
                tp: hw for tp, hw in high_watermarks.items() if self._log_dir_of.get(tp) == log_dir
            }
            self._guard(
                log_dir,
                lambda d=log_dir, o=offsets: write_offset_checkpoint(
                    d / REPLICATION_OFFSET_CHECKPOINT, o
                ),
            )

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """High watermarks from every online log dir's ``replication-offset-checkpoint``."""
        result: dict[TopicPartition, int] = {}
        for log_dir in self.online_dirs:
            found = self._guard(
                log_dir,
                lambda d=log_dir: read_checkpoint_or_reset(
                    d / REPLICATION_OFFSET_CHECKPOINT, "no high watermark is known from it"
                )[0],
            )
            result.update(found or {})
        return result

    # -- periodic work -----------------------------------------------------------------
    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every online log; returns segments deleted."""
        self._now_ms = now_ms
        deleted = 0
        for tp, lg in list(self.all_logs().items()):
            deleted += (
                self._guard(self._log_dir_of[tp], lambda lg=lg: lg.apply_retention(now_ms)) or 0
            )
        return deleted

    def flush_due(self, now_ms: int) -> None:
        """Flush logs whose ``flush.ms`` has elapsed."""
        self._now_ms = now_ms
        for tp, lg in list(self.all_logs().items()):
            self._guard(self._log_dir_of[tp], lambda lg=lg: lg.maybe_flush(now_ms))

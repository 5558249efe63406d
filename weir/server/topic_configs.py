"""The effective configuration of every topic this broker hosts: the broker's defaults under
each topic's overrides from ``/config/topics/<topic>`` (Kafka's LogManager topic configs kept
current by TopicConfigHandler, and DynamicLogConfig for changed broker defaults)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from weir.config import BrokerConfig, topic_config
from weir.storage.log import LogConfig

if TYPE_CHECKING:
    from weir.coordination.zk import ZkClient
    from weir.storage.log_cleaner import LogCleaner
    from weir.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class TopicConfigs:
    """Topic overrides read from ZooKeeper and the typed effective config of each topic
    (cached: the produce path reads it)."""

    def __init__(self, config: Callable[[], BrokerConfig], zk: ZkClient,
                 log_manager: LogManager, log_cleaner: LogCleaner | None = None) -> None:
        self._config = config  # the live broker config (dynamic configs replace it)
        self._zk = zk
        self._log_manager = log_manager
        self.log_cleaner = log_cleaner  # set once the cleaner exists (it reads our configs)
        self.overrides: dict[str, dict[str, str]] = {}
        self._effective: dict[str, dict[str, Any]] = {}

    def defaults(self) -> LogConfig:
        """The log config of a topic without overrides."""
        return LogConfig.from_config(self._config())

    def topic_config(self, topic: str) -> dict[str, Any]:
        """The effective typed config of ``topic``."""
        cached = self._effective.get(topic)
        if cached is None:
            cached = topic_config(self._config(), self.overrides.get(topic, {}))
            self._effective[topic] = cached
        return cached

    def log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_dict(self.topic_config(topic))

    def min_isr(self, topic: str) -> int:
        return int(self.topic_config(topic)["min.insync.replicas"])

    def set_overrides(self, topic: str, overrides: dict[str, str] | None) -> None:
        """Record a topic's overrides from ZooKeeper (None: the topic is gone)."""
        self._effective.pop(topic, None)
        if overrides is None:
            self.overrides.pop(topic, None)
        else:
            self.overrides[topic] = overrides

    async def load(self, topics: set[str]) -> None:
        """Read the overrides of the topics not known yet (LeaderAndIsr, replica moves)."""
        for topic in [t for t in topics if t not in self.overrides]:
            self.set_overrides(topic, await asyncio.to_thread(self._zk.get_topic_config, topic))

    def defaults_changed(self) -> None:
        """The broker defaults of topic configs changed (dynamic broker configs): topics
        without their own override take the new values, existing logs included (Kafka's
        DynamicLogConfig.reconfigure)."""
        self._effective.clear()
        self._log_manager.default_config = self.defaults()
        for topic in sorted({tp.topic for tp in self._log_manager.all_logs()}):
            self._log_manager.update_config(topic, self.log_config(topic))

    async def reload_overrides(self) -> None:
        """A config change notification: re-read the overrides of the topics we know and
        apply those that changed to their logs (Kafka's TopicConfigHandler)."""
        for topic in list(self.overrides):
            overrides = await asyncio.to_thread(self._zk.get_topic_config, topic)
            if overrides != self.overrides.get(topic):
                self.set_overrides(topic, overrides)
                self._log_manager.update_config(topic, self.log_config(topic))
                if self.log_cleaner is not None:
                    self.log_cleaner.wake()  # a new cleanup.policy takes effect now
                log.info("topic %s config updated: %s", topic, overrides)

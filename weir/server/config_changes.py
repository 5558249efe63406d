"""Dynamic config reload: the broker watches ``/config/changes`` (the sequential
``config_change_`` notifications every AlterConfigs/IncrementalAlterConfigs writes) and
re-reads what may have changed (Kafka's ZkConfigManager with its ConfigHandlers): SCRAM
credentials of users, the dynamic broker configs (``/config/brokers/<default>`` and
``/config/brokers/<id>``) and the overrides of the topics it hosts."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from weir.asyncutil import cancel_and_wait
from weir.coordination.paths import CONFIG_CHANGES

if TYPE_CHECKING:
    from weir.coordination.zk import ZkClient
    from weir.security.credentials import ScramCredentialStore
    from weir.server.dynamic_config import DynamicBrokerConfigs
    from weir.server.topic_configs import TopicConfigs

log = logging.getLogger(__name__)


class ConfigChangeListener:
    def __init__(self, zk: ZkClient, dynamic_configs: DynamicBrokerConfigs,
                 topic_configs: TopicConfigs, scram_credentials: ScramCredentialStore) -> None:
        self._zk = zk
        self._dynamic_configs = dynamic_configs
        self._topic_configs = topic_configs
        self._scram_credentials = scram_credentials
        self._tasks: set[asyncio.Task] = set()

    def start(self) -> None:
        """Watch the notifications; the watch fires on kazoo's thread and hands over to the
        event loop."""
        loop = asyncio.get_running_loop()
        self._zk.watch_children(
            CONFIG_CHANGES, lambda _children: loop.call_soon_threadsafe(self.on_change))

    def on_change(self) -> None:
        """A notification arrived (on the event loop)."""
        self._scram_credentials.invalidate()  # users/<user> changes too
        task = asyncio.ensure_future(self.reload())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def reload(self) -> None:
        try:
            await self._dynamic_configs.reload()
            await self._topic_configs.reload_overrides()
        except Exception:
            log.exception("reloading configs after a change notification failed")

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)

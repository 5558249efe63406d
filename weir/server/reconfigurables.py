"""The parts of a running broker that dynamic broker configs reconfigure (Kafka's
``BrokerReconfigurable`` implementations: DynamicLogConfig, DynamicReplicationConfig's
throttles, DynamicListenerConfig's connection quotas and advertised listeners, the log
cleaner, the log dir mover's quota and the controller's unclean election setting).

Each is a :class:`~weir.server.dynamic_config.BrokerReconfigurable` over the one
collaborator it changes, so :class:`~weir.server.dynamic_config.DynamicBrokerConfigs`
never sees the broker.  A collaborator that exists only once the broker has started (its
socket servers, its controller) is given as a function returning it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from weir.config import BROKER_CONFIG_DEFS, BrokerConfig
from weir.server.network import ConnectionLimits
from weir.storage.log_cleaner import CleanerConfig

__all__ = [
    "AdvertisedListeners",
    "AlterLogDirsQuota",
    "ConnectionQuotas",
    "LogCleanerConfig",
    "ReplicationThrottleRates",
    "TopicConfigDefaults",
    "UncleanLeaderElection",
    "broker_reconfigurables",
]

THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
CONNECTIONS = ("max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides")
UNCLEAN = "unclean.leader.election.enable"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"  # JBOD moves (KIP-113)
ADVERTISED = "advertised.listeners"


class _TopicDefaults(Protocol):
    def defaults_changed(self) -> None: ...


class _Throttles(Protocol):
    def configure(self, leader_rate: float | None, follower_rate: float | None) -> None: ...


class _LimitedServer(Protocol):
    def update_limits(self, limits: ConnectionLimits) -> None: ...


class _Quota(Protocol):
    rate: int


class _Cleaner(Protocol):
    def reconfigure(self, config: CleanerConfig) -> Awaitable[None]: ...


class _Controller(Protocol):
    def set_unclean_leader_election_enable(self, enabled: bool) -> None: ...


class _Registration(Protocol):
    async def update(self) -> None: ...


class TopicConfigDefaults:
    """Broker defaults of topic configs (Kafka's DynamicLogConfig): the effective configs of
    every topic without its own override are recomputed."""

    def __init__(self, topic_configs: _TopicDefaults) -> None:
        self.topic_configs = topic_configs

    def reconfigures(self, key: str) -> bool:
        return bool(BROKER_CONFIG_DEFS[key].topic_key)

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        self.topic_configs.defaults_changed()


class ReplicationThrottleRates:
    """``leader/follower.replication.throttled.rate`` (KIP-73 replication quotas)."""

    def __init__(self, throttles: _Throttles) -> None:
        self.throttles = throttles

    def reconfigures(self, key: str) -> bool:
        return key in THROTTLES

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        self.throttles.configure(*(new.get(k) for k in THROTTLES))


class ConnectionQuotas:
    """``max.connections``, ``max.connections.per.ip(.overrides)`` on every listener's
    socket server (Kafka's DynamicListenerConfig / ConnectionQuotas)."""

    def __init__(self, servers: Callable[[], Iterable[_LimitedServer]]) -> None:
        self.servers = servers

    def reconfigures(self, key: str) -> bool:
        return key in CONNECTIONS

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        limits = ConnectionLimits.from_config(new)
        for server in self.servers():
            server.update_limits(limits)


class AlterLogDirsQuota:
    """``replica.alter.log.dirs.io.max.bytes.per.second``: the log dir mover's copy rate."""

    def __init__(self, quota: _Quota) -> None:
        self.quota = quota

    def reconfigures(self, key: str) -> bool:
        return key == ALTER_LOG_DIRS_RATE

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        self.quota.rate = int(new.get(ALTER_LOG_DIRS_RATE))


class LogCleanerConfig:
    """``log.cleaner.*``: the cleaner restarts its threads with the new settings in the
    background (Kafka's LogCleaner.reconfigure)."""

    def __init__(self, cleaner: _Cleaner) -> None:
        self.cleaner = cleaner

    def reconfigures(self, key: str) -> bool:
        return key.startswith("log.cleaner.")

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> Awaitable[None]:
        return asyncio.ensure_future(self.cleaner.reconfigure(CleanerConfig.from_config(new)))


class UncleanLeaderElection:
    """``unclean.leader.election.enable``: this broker's controller, which elects the
    offline partitions at once when it becomes true (KafkaController's
    UncleanLeaderElectionEnable event)."""

    def __init__(self, controller: Callable[[], _Controller | None]) -> None:
        self.controller = controller

    def reconfigures(self, key: str) -> bool:
        return key == UNCLEAN

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        controller = self.controller()
        if controller is not None:
            controller.set_unclean_leader_election_enable(bool(new.get(UNCLEAN)))


class AdvertisedListeners:
    """``advertised.listeners`` (per broker): the broker rewrites its ``/brokers/ids/<id>``
    registration with the new endpoints, keeping its broker epoch; the controller's watch on
    the znode sends every broker UpdateMetadata, so Metadata from any broker shows them
    (Kafka's DynamicListenerConfig.reconfigure → KafkaZkClient.updateBrokerInfo)."""

    def __init__(self, registration: Callable[[], _Registration | None]) -> None:
        self.registration = registration

    def reconfigures(self, key: str) -> bool:
        return key == ADVERTISED

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> Awaitable[None] | None:
        registration = self.registration()
        if registration is None:
            return None
        return asyncio.ensure_future(registration.update())


Part = (TopicConfigDefaults | ReplicationThrottleRates | ConnectionQuotas | AlterLogDirsQuota
        | LogCleanerConfig | UncleanLeaderElection | AdvertisedListeners)


def broker_reconfigurables(*, topic_configs: _TopicDefaults, throttles: _Throttles,
                           servers: Callable[[], Iterable[_LimitedServer]],
                           alter_log_dirs_quota: _Quota | None, cleaner: _Cleaner | None,
                           controller: Callable[[], _Controller | None],
                           registration: Callable[[], _Registration | None] = lambda: None,
                           ) -> list[Part]:
    """A broker's parts, in the order Weir reconfigures them."""
    parts: list[Part] = [
        TopicConfigDefaults(topic_configs), ReplicationThrottleRates(throttles),
        ConnectionQuotas(servers)]
    if alter_log_dirs_quota is not None:
        parts.append(AlterLogDirsQuota(alter_log_dirs_quota))
    if cleaner is not None:
        parts.append(LogCleanerConfig(cleaner))
    parts.append(UncleanLeaderElection(controller))
    parts.append(AdvertisedListeners(registration))
    return parts

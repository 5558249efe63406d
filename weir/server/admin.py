"""The broker's asyncio shell over :class:`weir.server.topic_admin.TopicAdmin`.

CreateTopics, DeleteTopics, CreatePartitions, Metadata's auto-creation and the coordinators'
internal topics call these with the broker's parts (:class:`AdminServices`: the handlers'
``BrokerServices``, or the broker itself): each builds a ``TopicAdmin`` over the ZooKeeper
client with the broker's current settings, runs its rules and writes off the event loop
(``asyncio.to_thread``), and passes in what only the broker knows (its metadata cache).
Waiting for the controller's metadata to show the result (Kafka's delayed create/delete
operations) is :func:`wait_until`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from weir.protocol.errors import ErrorCode, KafkaError
from weir.server.topic_admin import (
    InternalTopic,
    TopicAdmin,
    TopicAdminSettings,
    TopicStore,
    offsets_topic,
    transaction_state_topic,
    validate_topic_name,
)

log = logging.getLogger(__name__)


class AdminServices(Protocol):
    """What topic administration needs of the broker."""

    broker_id: int
    zk: TopicStore
    metadata: Any  # the MetadataCache: .topics and .brokers are read

    @property
    def config(self) -> Any: ...  # the live BrokerConfig (dynamic configs replace it)


def topic_admin(services: AdminServices) -> TopicAdmin:
    """A TopicAdmin over ``services.zk`` with ``services.config``'s current settings (dynamic
    broker configs replace ``services.config``, so it is read on every request)."""
    return TopicAdmin(services.zk, TopicAdminSettings.from_config(services.config))


def live_broker_ids(services: AdminServices) -> list[int]:
    ids = sorted(services.metadata.brokers)
    return ids or [services.broker_id]


async def create_topic(services: AdminServices, name: str, num_partitions: int, replication_factor: int,
                       manual: dict[int, list[int]] | None, configs: Mapping[str, str],
                       validate_only: bool = False
                       ) -> tuple[uuid.UUID | None, dict[int, list[int]]]:
    """:meth:`TopicAdmin.create_topic`: the new topic's id (None if ``validate_only``) and
    assignment, or KafkaError."""
    return await asyncio.to_thread(
        topic_admin(services).create_topic, name, num_partitions, replication_factor, manual,
        dict(configs), validate_only=validate_only,
        in_metadata_cache=name in services.metadata.topics,
        fallback_brokers=live_broker_ids(services))


async def create_partitions(services: AdminServices, name: str, count: int,
                            assignments: Sequence[Sequence[int]] | None,
                            validate_only: bool) -> dict[int, list[int]]:
    """:meth:`TopicAdmin.create_partitions`: the new partitions' assignment, or KafkaError."""
    return await asyncio.to_thread(
        topic_admin(services).create_partitions, name, count, assignments,
        validate_only=validate_only, fallback_brokers=live_broker_ids(services))


async def delete_topic(services: AdminServices, name: str) -> None:
    """:meth:`TopicAdmin.delete_topic`: queue ``name`` for deletion, or KafkaError."""
    await asyncio.to_thread(topic_admin(services).delete_topic, name)


async def wait_until(predicate: Callable[[], bool], timeout_ms: int) -> bool:
    """Poll ``predicate`` on the event loop until true or the deadline (metadata arrives
    through UpdateMetadata requests handled on this same loop)."""
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def config_entries(configs: Any) -> dict[str, str]:
    """CreateTopics/AlterConfigs config lists → {name: value} (null values are refused)."""
    out = {}
    for c in configs or ():
        if c.value is None:
            raise KafkaError(ErrorCode.invalid_config, f"config {c.name} has a null value")
        out[c.name] = c.value
    return out


async def _create_internal_topic(services: AdminServices, topic: InternalTopic) -> None:
    try:
        await create_topic(services, topic.name, topic.num_partitions, topic.replication_factor,
                           None, topic.configs)
        log.info("created %s (%d partitions, RF %d)", topic.name, topic.num_partitions,
                 topic.replication_factor)
    except KafkaError as exc:
        if exc.code != ErrorCode.topic_already_exists:
            log.warning("cannot create %s: %s", topic.name, exc.message)


async def create_transaction_state_topic(services: AdminServices) -> None:
    """``__transaction_state`` for the transaction coordinator; an existing topic is not an
    error."""
    await _create_internal_topic(
        services, transaction_state_topic(services.config, len(live_broker_ids(services))))


async def create_offsets_topic(services: AdminServices) -> None:
    """``__consumer_offsets`` for the group coordinator; an existing topic is not an error."""
    await _create_internal_topic(
        services, offsets_topic(services.config, len(live_broker_ids(services))))


__all__ = [
    "AdminServices",
    "config_entries",
    "create_offsets_topic",
    "create_partitions",
    "create_topic",
    "create_transaction_state_topic",
    "delete_topic",
    "live_broker_ids",
    "topic_admin",
    "validate_topic_name",
    "wait_until",
]

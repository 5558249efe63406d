"""Topic administration shared by CreateTopics, DeleteTopics, CreatePartitions and Metadata's
auto-creation: validation, replica placement, ZooKeeper writes, and waiting for the
controller's metadata to show the result (Kafka's delayed create/delete operations).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from typing import Any

from weir.config import validate_topic_configs
from weir.controller.assignment import assign_replicas
from weir.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL.match(name):
        raise KafkaError(ErrorCode.invalid_topic_exception,
                         f"topic name {name!r} has characters other than ASCII "
                         "alphanumerics, '.', '_' and '-'")


def live_broker_ids(broker) -> list[int]:
    ids = sorted(broker.metadata.brokers)
    return ids or [broker.broker_id]


async def registered_broker_ids(broker) -> list[int]:
    """The brokers registered in ZooKeeper (``/brokers/ids``): what Kafka's ZooKeeper-mode
    topic admin assigns replicas over (``AdminZkClient.getBrokerMetadatas``), rather than
    this broker's metadata cache, which may not yet have heard of a broker that has just
    registered."""
    infos = await asyncio.to_thread(broker.zk.get_all_brokers)
    return sorted(infos) or live_broker_ids(broker)


# ZooKeeper refuses a znode over jute.maxbuffer (1 MiB less one byte by default), and a topic's
# whole assignment lives in one: /brokers/topics/<t>.
ZNODE_MAX_BYTES = 0xFFFFF


def check_assignment_fits(total_partitions: int, replication_factor: int) -> None:
    """Refuse an assignment that cannot be stored, before building it: each partition takes
    at least ``"p":[r],`` in the JSON (6 bytes and two per replica). Kafka fails the same
    request only after building the assignment in memory; a request for 2**31 partitions must
    not be able to exhaust the broker's memory first."""
    least = total_partitions * (5 + 2 * replication_factor)
    if least > ZNODE_MAX_BYTES:
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"{total_partitions} partitions with replication factor {replication_factor} "
            f"cannot be stored: the assignment would exceed ZooKeeper's {ZNODE_MAX_BYTES}-byte "
            f"znode limit (jute.maxbuffer)")


def plan_assignment(live_brokers: list[int], num_partitions: int, replication_factor: int,
                    manual: dict[int, list[int]] | None,
                    start_partition: int = 0) -> dict[int, list[int]]:
    """Replica assignment of new partitions over ``live_brokers`` (or checks a manual one)."""
    if manual:
        live = set(live_brokers)
        expected = list(range(start_partition, start_partition + len(manual)))
        if sorted(manual) != expected:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"partitions must be numbered {expected}, got {sorted(manual)}")
        sizes = {len(r) for r in manual.values()}
        for p, replicas in manual.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"partition {p}: replica list {replicas} is empty or repeats")
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"partition {p}: brokers {unknown} are not alive")
        if len(sizes) > 1:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             "all partitions must have the same replication factor")
        return {p: list(r) for p, r in manual.items()}
    if num_partitions < 1:
        raise KafkaError(ErrorCode.invalid_partitions,
                         f"number of partitions must be at least 1, got {num_partitions}")
    if replication_factor < 1:
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         f"replication factor must be at least 1, got {replication_factor}")
    check_assignment_fits(start_partition + num_partitions, replication_factor)
    return assign_replicas(live_brokers, num_partitions, replication_factor,
                           start_partition=start_partition)


async def create_topic(broker, name: str, num_partitions: int, replication_factor: int,
                       manual: dict[int, list[int]] | None, configs: dict[str, str],
                       validate_only: bool = False) -> tuple[uuid.UUID | None, dict[int, list[int]]]:
    validate_topic_name(name)
    if name in broker.metadata.topics:
        raise KafkaError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
    validate_topic_configs(configs)
    if num_partitions == -1:
        num_partitions = broker.config.num_partitions
    if replication_factor == -1:
        replication_factor = broker.config.default_replication_factor
    assignment = plan_assignment(await registered_broker_ids(broker), num_partitions,
                                 replication_factor, manual)
    if validate_only:
        return None, assignment
    topic_id = await asyncio.to_thread(broker.zk.create_topic, name, assignment, dict(configs))
    return topic_id, assignment


async def wait_until(predicate, timeout_ms: int) -> bool:
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


async def create_transaction_state_topic(broker) -> None:
    """``__transaction_state`` with Kafka's settings (``transaction.state.log.*``,
    compacted, unclean election off), for the transaction coordinator; an existing topic is
    not an error."""
    from weir.transactions.codec import TRANSACTION_STATE_TOPIC

    cfg = broker.config
    rf = min(cfg.transaction_state_log_replication_factor, len(live_broker_ids(broker)))
    configs = {"cleanup.policy": "compact", "retention.ms": "-1",
               "min.insync.replicas": str(cfg.transaction_state_log_min_isr),
               "segment.bytes": str(cfg.transaction_state_log_segment_bytes),
               "unclean.leader.election.enable": "false", "compression.type": "uncompressed"}
    try:
        await create_topic(broker, TRANSACTION_STATE_TOPIC,
                           cfg.transaction_state_log_num_partitions, rf, None, configs)
        log.info("created %s (%d partitions, RF %d)", TRANSACTION_STATE_TOPIC,
                 cfg.transaction_state_log_num_partitions, rf)
    except KafkaError as exc:
        if exc.code != ErrorCode.topic_already_exists:
            log.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc.message)


async def create_offsets_topic(broker) -> None:
    """``__consumer_offsets`` with Kafka's settings (``offsets.topic.*``), for the group
    coordinator; an existing topic is not an error."""
    from weir.groups.codec import OFFSETS_TOPIC

    cfg = broker.config
    rf = min(cfg.offsets_topic_replication_factor, len(live_broker_ids(broker)))
    configs = {"cleanup.policy": "compact", "retention.ms": "-1",
               "segment.bytes": str(cfg.offsets_topic_segment_bytes),
               "compression.type": "producer"}
    try:
        await create_topic(broker, OFFSETS_TOPIC, cfg.offsets_topic_num_partitions, rf, None,
                           configs)
        log.info("created %s (%d partitions, RF %d)", OFFSETS_TOPIC,
                 cfg.offsets_topic_num_partitions, rf)
    except KafkaError as exc:
        if exc.code != ErrorCode.topic_already_exists:
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc.message)

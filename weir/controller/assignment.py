"""Replica placement for new topics and partitions (Kafka's rack-unaware assignment).

Partition ``p``'s first replica goes to broker ``(p + start) % n`` of the sorted broker
list; the followers are placed at a shift that grows by one every ``n`` partitions, so that
leaders and followers both spread evenly over the brokers.  ``start`` and the initial shift
are random unless fixed.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from weir.protocol.errors import ErrorCode, KafkaError

__all__ = ["assign_replicas", "check_counts"]


def check_counts(num_partitions: int, replication_factor: int, available_brokers: int) -> None:
    """The counts a placement needs, checked in the order of Kafka's
    ``AdminUtils.assignReplicasToBrokers``: at least one partition
    (``KafkaError(invalid_partitions)``), a replication factor of at least one and at most
    ``available_brokers`` (``KafkaError(invalid_replication_factor)``)."""
    if num_partitions < 1:
        raise KafkaError(ErrorCode.invalid_partitions,
                         f"Number of partitions must be larger than 0, got {num_partitions}")
    if replication_factor < 1:
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         f"Replication factor must be larger than 0, got {replication_factor}")
    if replication_factor > available_brokers:
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{available_brokers}",
        )


def assign_replicas(broker_ids: Iterable[int], num_partitions: int,
                    replication_factor: int, start_partition: int = 0,
                    rng: random.Random | None = None, *,
                    fixed_start_index: int | None = None) -> dict[int, list[int]]:
    """Return ``{partition: [replica broker ids]}`` for partitions ``start_partition..``.

    Raises ``KafkaError(invalid_partitions)`` if ``num_partitions < 1`` and
    ``KafkaError(invalid_replication_factor)`` if the factor is < 1 or exceeds the number
    of brokers.
    """
    brokers = sorted(set(broker_ids))
    check_counts(num_partitions, replication_factor, len(brokers))
    n = len(brokers)
    rng = rng or random.Random()
    if fixed_start_index is not None:
        start_index = shift = fixed_start_index
    else:
        start_index = rng.randrange(n)
        shift = rng.randrange(n)
    result: dict[int, list[int]] = {}
    partition = max(0, start_partition)
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[_follower_index(first, shift, j, n)])
        result[partition] = replicas
        partition += 1
    return result


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    """Index of follower ``j``: never the first replica's index, distinct for each j."""
    return (first + 1 + (shift + j) % (n - 1)) % n

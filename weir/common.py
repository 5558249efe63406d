"""Small value types shared by every layer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:  # Kafka's on-disk and log spelling
        return f"{self.topic}-{self.partition}"


def partitions_by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition indexes grouped by topic, in first-seen order (the shape of Kafka's
    per-topic request and record arrays)."""
    grouped: dict[str, list[int]] = {}
    for tp in tps:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped

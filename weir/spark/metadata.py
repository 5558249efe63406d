"""Driver-side look-ups: which partitions a subscription covers and their offsets.

Uses confluent-kafka's AdminClient (Metadata and ListOffsets), so no consumer group is
ever involved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir.common import TopicPartition
from weir.spark.offsets import Offsets
from weir.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError, Subscription

REQUEST_TIMEOUT_S = 30.0


class PartitionMetadata:
    """Partitions and offsets of the topics a read is subscribed to."""

    def __init__(self, client_conf: Mapping[str, str], subscription: Subscription) -> None:
        self._conf = dict(client_conf)
        self._sub = subscription
        self._admin: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_admin": None}

    @property
    def admin(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(self._conf)
        return self._admin

    def partitions(self) -> list[TopicPartition]:
        """Partitions of the subscription that exist now (assign: as given)."""
        if self._sub.kind == "assign":
            return list(self._sub.assigned)
        md = self.admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        found = []
        for name, topic in md.topics.items():
            if topic.error is not None or not self._sub.matches(name):
                continue
            found += [TopicPartition(name, p) for p in topic.partitions]
        return sorted(found)

    def earliest(self, tps: list[TopicPartition]) -> Offsets:
        return self._list_offsets(tps, "earliest")

    def latest(self, tps: list[TopicPartition]) -> Offsets:
        """High watermarks: the offsets after the last records a consumer may read."""
        return self._list_offsets(tps, "latest")

    def for_timestamp(self, tps: list[TopicPartition], timestamp_ms: int) -> dict[
            TopicPartition, int | None]:
        """First offset with a timestamp >= ``timestamp_ms``; None where there is none."""
        from weir.spark.consume import first_at_or_after

        listed = self._list_offsets(tps, timestamp_ms)
        exact = first_at_or_after(self._conf, {tp: o for tp, o in listed.items() if o >= 0},
                                  timestamp_ms)
        return {tp: exact.get(tp) for tp in listed}

    def _list_offsets(self, tps: list[TopicPartition], what: str | int) -> Offsets:
        if not tps:
            return {}
        from confluent_kafka import TopicPartition as KafkaTP
        from confluent_kafka.admin import OffsetSpec as KafkaSpec

        if what == "earliest":
            spec = KafkaSpec.earliest()
        elif what == "latest":
            spec = KafkaSpec.latest()
        else:
            spec = KafkaSpec.for_timestamp(int(what))
        futures = self.admin.list_offsets({KafkaTP(tp.topic, tp.partition): spec for tp in tps},
                                          request_timeout=REQUEST_TIMEOUT_S)
        return {TopicPartition(k.topic, k.partition): int(f.result().offset)
                for k, f in futures.items()}

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], name: str,
                timestamp_strategy: str = "error") -> Offsets:
        """Offsets of ``tps`` for a starting/ending ``spec`` (-2/-1 resolved to real offsets)."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "timestamp":
            return self._resolve_timestamp(spec.timestamp_ms, tps, name, timestamp_strategy)
        missing = sorted(set(tps) - set(spec.offsets))
        if missing:
            raise OptionError(f"option '{name}' must give an offset for every partition of the"
                              f" subscription (use -2 for earliest, -1 for latest); missing:"
                              f" {', '.join(map(str, missing))}")
        wanted = {tp: spec.offsets[tp] for tp in tps}
        lows = self.earliest([tp for tp, o in wanted.items() if o == EARLIEST])
        highs = self.latest([tp for tp, o in wanted.items() if o == LATEST])
        return {tp: lows.get(tp, highs.get(tp, o)) for tp, o in wanted.items()}

    def _resolve_timestamp(self, timestamp_ms: int, tps: list[TopicPartition], name: str,
                           strategy: str) -> Offsets:
        found = self.for_timestamp(tps, timestamp_ms)
        none = sorted(tp for tp, o in found.items() if o is None)
        if none and name.startswith("starting") and strategy == "error":
            raise OptionError(f"no record at or after {name}={timestamp_ms} in {none[0]}; set"
                              " startingOffsetsByTimestampStrategy=latest to start there at"
                              " the latest offset")
        highs = self.latest(none)
        return {tp: (o if o is not None else highs[tp]) for tp, o in found.items()}

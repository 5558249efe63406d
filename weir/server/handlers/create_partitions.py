"""CreatePartitions (37): grow a topic's partition count; the controller brings the new
partitions online."""

from __future__ import annotations

import asyncio
from typing import Any

from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import admin, authz

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx, request) -> Any:
    broker = ctx.services  # admin calls take the broker's services
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    results = []
    grown: dict[str, int] = {}
    for topic in request.topics:
        entry: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none,
                                 "error_message": None}
        try:
            if not authz.authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                # Kafka's handleCreatePartitionsRequest: ALTER on the topic.
                raise KafkaError(ErrorCode.topic_authorization_failed,
                                 "The topic authorization is failed.")
            await _grow(ctx, topic, bool(request.validate_only))
            if not request.validate_only:
                grown[topic.name] = int(topic.count)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    if grown:
        ok = await admin.wait_until(
            lambda: all(broker.metadata.partitions_ready(t, n) for t, n in grown.items()),
            timeout_ms)
        if not ok:
            for entry in results:
                if entry["name"] in grown:
                    entry["error_code"] = ErrorCode.request_timed_out
    return ctx.respond(results=results)


async def _grow(ctx, topic, validate_only: bool) -> None:
    broker = ctx.services  # admin calls take the broker's services
    current = await asyncio.to_thread(broker.zk.get_topic, topic.name)
    if current is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {topic.name!r} not found")
    have = len(current.partitions)
    count = int(topic.count)
    if count <= have:
        raise KafkaError(ErrorCode.invalid_partitions,
                         f"topic {topic.name!r} has {have} partitions; "
                         f"the new count must be larger, got {count}")
    rf = len(current.partitions[0])
    manual = None
    if topic.assignments is not None:
        if len(topic.assignments) != count - have:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"{count - have} new partitions but "
                             f"{len(topic.assignments)} assignments")
        manual = {have + i: [int(b) for b in a.broker_ids]
                  for i, a in enumerate(topic.assignments)}
        if any(len(r) != rf for r in manual.values()):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"new partitions must have replication factor {rf}")
    added = admin.plan_assignment(await admin.registered_broker_ids(broker), count - have, rf,
                                  manual, start_partition=have)
    if not validate_only:
        await asyncio.to_thread(broker.zk.add_partitions, topic.name, added, current.zk_version)

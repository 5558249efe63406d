"""CreateTopics (19): validate, place replicas, write ZooKeeper, wait for leaders."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weir.config import describe_topic_config
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import admin, authz

if TYPE_CHECKING:
    from kio.schema.create_topics.v7.request import CreateTopicsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 19
MIN_VERSION = 0
MAX_VERSION = 7


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> Response:
    broker = ctx.services  # admin calls take the broker's services
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    validate_only = bool(getattr(request, "validate_only", False))  # v1+
    results: list[dict[str, Any]] = []
    created: dict[str, int] = {}
    seen: set[str] = set()
    # Kafka's handleCreateTopicsRequest: CREATE on the cluster, or on each topic.
    cluster = authz.authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False)
    for topic in request.topics:
        entry: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none,
                                 "error_message": None, "num_partitions": -1,
                                 "replication_factor": -1, "configs": None}
        try:
            if topic.name in seen:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"topic {topic.name!r} appears twice in the request")
            seen.add(topic.name)
            if not cluster and not authz.authorize(ctx, AclOperation.CREATE,
                                                   ResourceType.TOPIC, topic.name):
                raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            manual = {int(a.partition_index): [int(b) for b in a.broker_ids]
                      for a in topic.assignments}
            if manual and (topic.num_partitions != -1 or topic.replication_factor != -1):
                raise KafkaError(ErrorCode.invalid_request, "both assignments and "
                                 "num_partitions/replication_factor were given")
            configs = admin.config_entries(topic.configs)
            topic_id, assignment = await admin.create_topic(
                broker, topic.name, int(topic.num_partitions), int(topic.replication_factor),
                manual or None, configs, validate_only=validate_only,
            )
            entry.update(
                topic_id=topic_id,
                num_partitions=len(assignment),
                replication_factor=len(next(iter(assignment.values()))),
                configs=[
                    {"name": e.name, "value": e.value, "read_only": e.read_only,
                     "config_source": e.source, "is_sensitive": e.sensitive}
                    for e in describe_topic_config(broker.config, configs)
                ],
            )
            if not authz.authorize(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                   topic.name, log_if_denied=False):
                # Kafka: the configs are left out for a principal that may not see them.
                entry.update(configs=None,
                             topic_config_error_code=ErrorCode.topic_authorization_failed)
            if not validate_only:
                created[topic.name] = len(assignment)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    if created:
        ok = await admin.wait_until(
            lambda: all(broker.metadata.partitions_ready(t, n) for t, n in created.items()),
            timeout_ms,
        )
        if not ok:
            for entry in results:
                if entry["name"] in created and not broker.metadata.partitions_ready(
                        entry["name"], created[entry["name"]]):
                    entry.update(error_code=ErrorCode.request_timed_out,
                                 error_message="topic created; leaders not yet elected")
    return ctx.respond(topics=results)

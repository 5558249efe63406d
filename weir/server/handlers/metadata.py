"""Metadata (3): brokers, controller, topics with leaders, epochs, ISR and topic ids.

Unknown topics are created when ``auto.create.topics.enable`` is true and the client allows
it (v4+), answering LEADER_NOT_AVAILABLE until the controller has elected leaders, as Kafka.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from typing import TYPE_CHECKING, Any

from weir.protocol import codec
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation, ResourceType
from weir.server import admin, authz, metadata_encoding
from weir.server.context import RawResponse

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from kio.schema.metadata.v12.request import MetadataRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 12

_NO_OPERATIONS = -2147483648
_ZERO_UUID = uuid.UUID(int=0)


# At most this many encoded answers are kept per metadata update (one per distinct
# request shape: version, listener, topics named, flags).
MAX_ENCODED = 64


def _encoded_key(ctx, request) -> tuple[Any, ...] | None:
    """The key of this request's answer in ``MetadataCache.encoded``, or None if the answer
    may depend on more than the cache: with an authorizer (it depends on the principal),
    or topics named by id (Metadata v10+)."""
    if authz.enabled(ctx):
        return None
    if request.topics is None:
        names = None
    else:
        names = tuple(t.name for t in request.topics)
        if None in names:
            return None
    return (ctx.version, ctx.listener, names,
            bool(getattr(request, "include_topic_authorized_operations", False)),
            bool(getattr(request, "include_cluster_authorized_operations", False)))


async def handle(ctx: RequestContext, request: MetadataRequest) -> Response:
    """The answer; one with only known topics, its brokers and controller from the cache,
    is kept encoded until the next UpdateMetadata and sent again as it is (nothing in it
    changes until then; the correlation id is in the frame header)."""
    key = _encoded_key(ctx, request)
    if key is not None:
        body = ctx.metadata.encoded.get(key)
        if body is not None:
            return RawResponse(body)
    # Answers that may be kept are spliced from the partitions' kept encodings
    # (weir.server.metadata_encoding): their topics are built with no partitions here.
    spliced: set[str] | None = None if key is None else set()
    response, reusable = await _answer(ctx, request, spliced)
    if spliced and not reusable:
        response = _with_partitions(ctx, response, spliced)
    if key is None or not reusable:
        return response
    cache = ctx.metadata
    nested = ctx.nested("MetadataResponsePartition")
    encoded = [_partition_bytes(ctx, cache, nested, t.name) if t.name in spliced else ()
               for t in response.topics]
    body = metadata_encoding.encode_with_arrays(
        response, ctx.nested("MetadataResponseTopic"), nested, encoded)
    if len(cache.encoded) < MAX_ENCODED:
        cache.encoded[key] = body
    return RawResponse(body)


def _partition_bytes(ctx, cache, nested: type, name: str) -> list[bytes]:
    """The topic's partition entities encoded, each kept until an update changes it."""
    kept = cache.partition_bytes.setdefault((nested, ctx.version == 0), {}).setdefault(
        name, {})
    parts = cache.topics[name]
    out = []
    for index in sorted(parts):
        encoded = kept.get(index)
        if encoded is None:
            encoded = kept[index] = codec.encode_body(
                codec.build(nested, _partition(ctx, cache, index, parts[index])))
        out.append(encoded)
    return out


def _with_partitions(ctx, response, names: set[str]) -> Any:
    """``response`` with the partitions of the topics in ``names`` filled in."""
    cache = ctx.metadata
    topics = []
    for t in response.topics:
        if t.name in names and t.error_code == ErrorCode.none and t.name in cache.topics:
            key = (t.name, ctx.response_cls)
            memo = cache.described.get(key)
            if memo is None:
                memo = cache.described[key] = _partitions(ctx, cache, cache.topics[t.name])
            t = dataclasses.replace(t, partitions=memo)
        topics.append(t)
    return dataclasses.replace(response, topics=tuple(topics))


async def _answer(ctx, request, spliced: set[str] | None = None) -> tuple[Any, bool]:
    """The response, and whether it may be reused (see :func:`handle`); with ``spliced``,
    known topics are built with no partitions and their names added to it."""
    cache = ctx.metadata
    reusable = True
    version = ctx.version
    by_id: dict[str, Any] = {}  # names asked for by topic id (Metadata v10+)
    if request.topics is None or (version == 0 and not request.topics):
        # All topics: only those the principal may describe are listed (Kafka's
        # handleTopicMetadataRequest), the others are not even mentioned.
        names, _ = authz.filter_authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                           sorted(cache.topics), log_if_denied=False)
        requested_all = True
    else:
        names = []
        for t in request.topics:
            name = t.name
            if name is None:
                tid = getattr(t, "topic_id", None)
                name = cache.topic_by_id(tid) if tid else None
                if name is not None:
                    by_id[name] = tid
            if name is not None:
                names.append(name)
        requested_all = False
    auto_create = version < 4 or bool(getattr(request, "allow_auto_topic_creation", True))
    topics = []
    with_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    create_on_cluster = None
    for name in names:
        if not requested_all and not authz.authorize(ctx, AclOperation.DESCRIBE,
                                                     ResourceType.TOPIC, name):
            # Not revealed, whether it exists or not; asked by id, the name stays hidden.
            topics.append(_refused(None, by_id[name]) if name in by_id else _refused(name))
            continue
        may_create = auto_create and not requested_all
        if may_create and name not in cache.topics and authz.enabled(ctx) and \
                ctx.config.auto_create_topics_enable:
            if create_on_cluster is None:
                create_on_cluster = authz.authorize_cluster(ctx, AclOperation.CREATE,
                                                            log_if_denied=False)
            if not create_on_cluster and not authz.authorize(
                    ctx, AclOperation.CREATE, ResourceType.TOPIC, name):
                topics.append(_refused(name))
                continue
        topic = await _describe_topic(ctx, name, may_create, spliced)
        reusable = reusable and topic["error_code"] == ErrorCode.none
        if with_ops and topic["error_code"] == ErrorCode.none:
            topic["topic_authorized_operations"] = authz.authorized_operations(
                ctx, ResourceType.TOPIC, name)
        topics.append(topic)
    brokers = [  # each broker's endpoint on the listener this request came in on
        {"node_id": b.id, "host": b.host, "port": b.port, "rack": b.rack}
        for b in cache.brokers_on(ctx.listener)
    ]
    controller_id = cache.controller_id
    if not brokers or controller_id < 0:
        # No UpdateMetadata yet (the broker or the controller just started): answer from
        # ZooKeeper rather than with no brokers or controller -1, which leaves clients
        # such as librdkafka's admin client waiting for a refresh that may not come soon.
        registered, controller_id = await _from_zookeeper(ctx, ctx.listener)
        brokers = brokers or registered
        reusable = False
    cluster_ops = _NO_OPERATIONS
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_ops = (authz.authorized_operations(ctx, ResourceType.CLUSTER, "kafka-cluster")
                       if authz.authorize_cluster(ctx, AclOperation.DESCRIBE) else 0)
    return ctx.respond(
        brokers=brokers,
        cluster_id=ctx.cluster_id,
        controller_id=controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_ops,
    ), reusable


def _refused(name: str | None, topic_id: Any = _ZERO_UUID) -> dict[str, Any]:
    """TOPIC_AUTHORIZATION_FAILED, with no partitions (Kafka does not disclose whether an
    unauthorized topic exists)."""
    return {"name": name, "topic_id": topic_id, "is_internal": False,
            "error_code": ErrorCode.topic_authorization_failed, "partitions": [],
            "topic_authorized_operations": _NO_OPERATIONS}


async def _describe_topic(ctx, name: str, auto_create: bool,
                          spliced: set[str] | None = None) -> dict[str, Any]:
    cache = ctx.metadata
    base = {"name": name, "topic_id": cache.topic_ids.get(name, _ZERO_UUID),
            "is_internal": name.startswith("__"),
            "topic_authorized_operations": _NO_OPERATIONS}
    parts = cache.topics.get(name)
    if parts is None:
        code = ErrorCode.unknown_topic_or_partition
        if auto_create and ctx.config.auto_create_topics_enable:
            code = await _auto_create(ctx, name)
        return dict(base, error_code=code, partitions=[])
    if spliced is not None:
        spliced.add(name)
        return dict(base, error_code=ErrorCode.none, partitions=())
    key = (name, ctx.response_cls)
    memo = cache.described.get(key)
    if memo is None:
        memo = cache.described[key] = _partitions(ctx, cache, parts)
    return dict(base, error_code=ErrorCode.none, partitions=memo)


def _partitions(ctx, cache, parts) -> tuple[Any, ...]:
    """A topic's partition entities, built once per metadata update (the memo above)."""
    nested = ctx.nested("MetadataResponsePartition")
    return tuple(codec.build(nested, _partition(ctx, cache, index, parts[index]))
                 for index in sorted(parts))


def _partition(ctx, cache, index: int, p) -> dict[str, Any]:
    """One partition entity's fields: they depend on its state, on whether its leader and
    replicas are live brokers, and on the version (v0's REPLICA_NOT_AVAILABLE)."""
    error = ErrorCode.none
    if p.leader < 0 or not cache.alive(p.leader):
        error = ErrorCode.leader_not_available
    elif any(r not in cache.brokers for r in p.replicas):
        error = ErrorCode.replica_not_available if ctx.version == 0 else ErrorCode.none
    return {
        "error_code": error,
        "partition_index": index,
        "leader_id": p.leader if error != ErrorCode.leader_not_available else -1,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replicas),
        "isr_nodes": list(p.isr),
        "offline_replicas": list(p.offline_replicas),
    }


async def _auto_create(ctx, name: str) -> ErrorCode:
    try:
        admin.validate_topic_name(name)
        cfg = ctx.config
        await admin.create_topic(ctx.services, name, cfg.num_partitions,
                                 cfg.default_replication_factor, None, {})
        log.info("auto-created topic %s", name)
        return ErrorCode.leader_not_available
    except KafkaError as exc:
        if exc.code == ErrorCode.topic_already_exists:
            return ErrorCode.leader_not_available
        if exc.code == ErrorCode.invalid_topic_exception:
            return ErrorCode.invalid_topic_exception
        log.warning("auto-creating topic %s failed: %s", name, exc.message)
        return ErrorCode.leader_not_available


async def _from_zookeeper(ctx, listener: str = "PLAINTEXT"
                          ) -> tuple[list[dict[str, Any]], int]:
    infos = await asyncio.to_thread(ctx.zk.get_all_brokers)
    controller = await asyncio.to_thread(ctx.zk.get_controller_id)
    brokers = [{"node_id": b.id, "host": ep[0], "port": ep[1], "rack": b.rack}
               for b in sorted(infos.values(), key=lambda b: b.id)
               if (ep := b.endpoint(listener)) is not None]
    return brokers, -1 if controller is None else int(controller)

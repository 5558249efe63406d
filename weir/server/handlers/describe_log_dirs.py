"""DescribeLogDirs (35, v0-v4): this broker's log dirs, the logs in them (KIP-113), and the
volume sizes (v4, KIP-827).  Kafka's ``ReplicaManager.describeLogDirs``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from weir.common import TopicPartition
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation
from weir.server import authz
from weir.storage.log_dirs import DiskUsage, disk_usage

if TYPE_CHECKING:
    from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 35
MIN_VERSION = 0
MAX_VERSION = 4

INVALID_OFFSET_LAG = -1


async def handle(ctx: RequestContext, request: DescribeLogDirsRequest) -> Response:
    if not authz.authorize_cluster(ctx, AclOperation.DESCRIBE):
        # Kafka's handleDescribeLogDirsRequest: DESCRIBE on the cluster.
        return ctx.respond(error_code=ErrorCode.cluster_authorization_failed, results=[])
    lm = ctx.log_manager
    wanted: set[TopicPartition] | None = None
    if request.topics is not None:
        wanted = {TopicPartition(t.topic, int(p)) for t in request.topics for p in t.partitions}
    usage = await asyncio.gather(*(
        asyncio.to_thread(_usage, d) for d in lm.log_dirs), return_exceptions=True)
    by_dir = lm.logs_by_dir()
    results = []
    for log_dir, found in zip(lm.log_dirs, usage, strict=True):
        path = str(log_dir.absolute())
        if not lm.is_log_dir_online(log_dir) or not isinstance(found, DiskUsage):
            results.append({"log_dir": path, "error_code": ErrorCode.kafka_storage_error,
                            "topics": [], "total_bytes": -1, "usable_bytes": -1})
            continue
        topics: dict[str, list[dict[str, Any]]] = {}
        for lg, is_future in by_dir.get(log_dir, []):
            tp = lg.topic_partition
            if wanted is not None and tp not in wanted:
                continue
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition,
                "partition_size": lg.size_bytes,
                "offset_lag": _offset_lag(lm, tp, lg.log_end_offset, is_future),
                "is_future_key": is_future,
            })
        results.append({
            "log_dir": path, "error_code": ErrorCode.none,
            "topics": [{"name": t, "partitions": ps} for t, ps in sorted(topics.items())],
            "total_bytes": found.total_bytes, "usable_bytes": found.usable_bytes,
        })
    return ctx.respond(error_code=ErrorCode.none, results=results)


def _usage(log_dir) -> DiskUsage:
    return disk_usage(log_dir)


def _offset_lag(lm, tp: TopicPartition, log_end_offset: int, is_future: bool) -> int:
    """Kafka's ``getLogEndOffsetLag``: a future log's distance to the current log's end; a
    current log's distance to its high watermark; -1 if the current log is unavailable."""
    try:
        current = lm.get_log(tp)
    except KafkaError:  # its dir is offline
        current = None
    if current is None:
        return INVALID_OFFSET_LAG
    if is_future:
        return current.log_end_offset - log_end_offset
    return max(current.high_watermark - log_end_offset, 0)

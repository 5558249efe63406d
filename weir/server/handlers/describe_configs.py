"""DescribeConfigs (32): topic and broker configurations with their sources and synonyms
(ConfigHelper.describeConfigs), and the log levels of a BROKER_LOGGER."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from weir.config import describe_broker_config, describe_topic_config
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation
from weir.server import authz
from weir.server.dynamic_config import check_describe_name, describe_logger_resource

if TYPE_CHECKING:
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 32
MIN_VERSION = 0
MAX_VERSION = 4

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
DYNAMIC_BROKER_LOGGER_CONFIG = 6  # ConfigSource of a logger's level


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> Response:
    results = []
    for res in request.resources:
        entry: dict[str, Any] = {"resource_type": res.resource_type,
                                 "resource_name": res.resource_name,
                                 "error_code": ErrorCode.none, "error_message": None,
                                 "configs": []}
        refused = authz.config_refusal(ctx, int(res.resource_type), res.resource_name,
                                       AclOperation.DESCRIBE_CONFIGS)
        if refused is not None:
            entry.update(error_code=refused[0], error_message=refused[1])
        elif res.resource_type == TOPIC:
            if res.resource_name not in ctx.metadata.topics:
                entry.update(error_code=ErrorCode.unknown_topic_or_partition,
                             error_message=f"topic {res.resource_name!r} not found")
            else:
                overrides = await asyncio.to_thread(ctx.zk.get_topic_config,
                                                    res.resource_name)
                entries = describe_topic_config(ctx.config, overrides)
                entry["configs"] = _render(entries, res.configuration_keys, request)
        elif res.resource_type == BROKER:
            try:
                per_broker = check_describe_name(res.resource_name, ctx.broker_id)
            except KafkaError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
            else:
                entries = describe_broker_config(ctx.config, per_broker)
                entry["configs"] = _render(entries, res.configuration_keys, request)
        elif res.resource_type == BROKER_LOGGER:
            try:
                levels = describe_logger_resource(res.resource_name, ctx.broker_id)
            except KafkaError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
            else:
                entry["configs"] = _render_loggers(levels, res.configuration_keys)
        else:
            entry.update(error_code=ErrorCode.invalid_request,
                         error_message=f"Unsupported resource type: {res.resource_type}")
        results.append(entry)
    return ctx.respond(results=results)


def _render(entries, keys, request) -> list[dict[str, Any]]:
    wanted = set(keys) if keys else None
    docs = bool(getattr(request, "include_documentation", False))
    synonyms = bool(getattr(request, "include_synonyms", False))
    out = []
    for e in entries:
        if wanted is not None and e.name not in wanted:
            continue
        out.append({
            "name": e.name, "value": e.value, "read_only": e.read_only,
            "config_source": int(e.source), "is_default": e.is_default,
            "is_sensitive": e.sensitive,
            "synonyms": [{"name": s.name, "value": s.value, "source": int(s.source)}
                         for s in e.synonyms] if synonyms else [],
            # a custom key has no documentation: null, as Kafka's documentationOf
            "config_type": e.type, "documentation": (e.doc or None) if docs else None,
        })
    return out


def _render_loggers(levels: dict[str, str], keys) -> list[dict[str, Any]]:
    wanted = set(keys) if keys else None
    return [{"name": name, "value": level, "read_only": False,
             "config_source": DYNAMIC_BROKER_LOGGER_CONFIG, "is_default": False,
             "is_sensitive": False, "synonyms": [], "config_type": 0, "documentation": None}
            for name, level in levels.items() if wanted is None or name in wanted]

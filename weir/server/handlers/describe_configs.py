"""DescribeConfigs (32): topic and broker configurations with their sources."""

from __future__ import annotations

import asyncio
from typing import Any

from weir.config import describe_broker_config, describe_topic_config
from weir.protocol.errors import ErrorCode

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

TOPIC = 2
BROKER = 4


async def handle(ctx, request) -> Any:
    broker = ctx.broker
    results = []
    for res in request.resources:
        entry: dict[str, Any] = {"resource_type": res.resource_type,
                                 "resource_name": res.resource_name,
                                 "error_code": ErrorCode.none, "error_message": None,
                                 "configs": []}
        if res.resource_type == TOPIC:
            if res.resource_name not in broker.metadata.topics:
                entry.update(error_code=ErrorCode.unknown_topic_or_partition,
                             error_message=f"topic {res.resource_name!r} not found")
            else:
                overrides = await asyncio.to_thread(broker.zk.get_topic_config,
                                                    res.resource_name)
                entries = describe_topic_config(broker.config, overrides)
                entry["configs"] = _render(entries, res.configuration_keys, request)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.broker_id)):
                entry.update(error_code=ErrorCode.invalid_request,
                             error_message=f"broker {res.resource_name} is not this broker "
                                           f"({broker.broker_id})")
            else:
                entries = describe_broker_config(broker.config)
                entry["configs"] = _render(entries, res.configuration_keys, request)
        else:
            entry.update(error_code=ErrorCode.invalid_request,
                         error_message=f"resource type {res.resource_type} is not supported")
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
            "config_type": e.type, "documentation": e.doc if docs else None,
        })
    return out

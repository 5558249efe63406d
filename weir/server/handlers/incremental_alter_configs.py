"""IncrementalAlterConfigs (44, KIP-339): SET / DELETE / APPEND / SUBTRACT on the config
overrides of a topic or a broker, and log levels of a BROKER_LOGGER.

Kafka's ConfigAdminManager checks the request; topics are stored as
AdminZkClient.changeTopicConfig does: the whole override set in ``/config/topics/<t>`` and a
sequential ``/config/changes/config_change_`` notification that every broker watches, so the
new values apply live (retention, segment rolling, ``min.insync.replicas``, ...).  Topic
errors name the key: INVALID_CONFIG for an unknown key or a bad value, INVALID_REQUEST for a
malformed request.  Broker resources (``/config/brokers/<id>`` or ``<default>``) and
BROKER_LOGGER resources are :mod:`weir.server.dynamic_config`'s.  :func:`alter_resource` is
shared with AlterConfigs (33).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from weir.config import (
    BROKER_CONFIG_DEFS,
    TOPIC_CONFIGS,
    format_value,
    topic_config,
    validate_topic_configs,
)
from weir.protocol.errors import ErrorCode, KafkaError
from weir.security.acls import AclOperation
from weir.server import authz
from weir.server.dynamic_config import alter_loggers

if TYPE_CHECKING:
    from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest

    from weir.server.context import RequestContext
    from weir.server.handlers import Response

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# One read-modify-write of a topic's overrides at a time per broker.
_LOCKS: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()


def repeated_resources(resources: Any) -> set[tuple[int, str]]:
    """(type, name) of the resources named more than once in one request: each of them is
    answered INVALID_REQUEST (ConfigAdminManager.preprocess)."""
    seen: set[tuple[int, str]] = set()
    repeated = set()
    for res in resources:
        key = (int(res.resource_type), res.resource_name)
        (repeated if key in seen else seen).add(key)
    return repeated


REPEATED = (ErrorCode.invalid_request, "Each resource must appear at most once.")


async def handle(ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> Response:
    responses = []
    repeated = repeated_resources(request.resources)
    for res in request.resources:
        ops = [(c.name, int(c.config_operation), c.value) for c in res.configs]
        rtype = int(res.resource_type)
        refused = REPEATED if (rtype, res.resource_name) in repeated else \
            authz.config_refusal(ctx, rtype, res.resource_name, AclOperation.ALTER_CONFIGS)
        if refused is not None:
            code, message = refused
        elif rtype == BROKER_LOGGER:
            code, message = _alter_loggers(ctx.services, res.resource_name, ops,
                                           bool(request.validate_only))
        else:
            kind = "broker" if rtype == BROKER else "topic"
            code, message = await alter_resource(
                ctx.services, rtype, res.resource_name,
                lambda current, effective, ops=ops, kind=kind:
                    incremental(current, effective, ops, kind),
                bool(request.validate_only))
        responses.append({"error_code": code, "error_message": message,
                          "resource_type": res.resource_type,
                          "resource_name": res.resource_name})
    return ctx.respond(responses=responses)


async def alter_resource(services, resource_type: int, name: str,
                         change: Callable[[dict[str, str], dict[str, Any]], dict[str, str]],
                         validate_only: bool) -> tuple[ErrorCode, str | None]:
    """Apply ``change`` (current overrides, effective typed config → new overrides) to one
    resource; the error code and message for the response."""
    try:
        if resource_type == TOPIC:
            await alter_topic_configs(services, name, change, validate_only)
        elif resource_type == BROKER:
            await services.dynamic_configs.alter(name, change, validate_only)
        else:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Unknown resource type {resource_type}")
    except KafkaError as exc:
        return exc.code, exc.message
    return ErrorCode.none, None


def _alter_loggers(services, name: str, ops: list[tuple[str, int, str | None]],
                   validate_only: bool) -> tuple[ErrorCode, str | None]:
    try:
        alter_loggers(name, services.broker_id, ops, validate_only)
    except KafkaError as exc:
        return exc.code, exc.message
    return ErrorCode.none, None


async def alter_topic_configs(services, topic: str,
                              change: Callable[[dict[str, str], dict[str, Any]], dict[str, str]],
                              validate_only: bool) -> dict[str, str]:
    """Read the topic's overrides, compute and validate the new set, store it with a change
    notification (not when ``validate_only``); the new overrides."""
    if not topic:
        raise KafkaError(ErrorCode.invalid_request, "the topic name is empty")
    lock = _LOCKS.setdefault(services, asyncio.Lock())
    async with lock:
        if await asyncio.to_thread(services.zk.get_topic, topic) is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             f"topic {topic!r} not found")
        current = await asyncio.to_thread(services.zk.get_topic_config, topic)
        effective = topic_config(services.config, _valid_only(current))
        new = change(dict(current), effective)
        validate_topic_configs(new)
        if not validate_only and new != current:
            await asyncio.to_thread(services.zk.set_topic_config, topic, new)
    return new


def _valid_only(overrides: Mapping[str, str]) -> dict[str, str]:
    """Stored overrides that still validate (a bad stored value must not block a fix)."""
    out = {}
    for key, value in overrides.items():
        try:
            validate_topic_configs({key: value})
        except KafkaError:
            continue
        out[key] = value
    return out


def incremental(current: dict[str, str], effective: Mapping[str, Any],
                ops: list[tuple[str, int, str | None]], kind: str = "topic"
                ) -> dict[str, str]:
    """The overrides after ``ops`` (ConfigAdminManager.prepareIncrementalConfigs); ``kind``
    says whose keys they are: ``topic`` (topic-level names) or ``broker``."""
    defs: Mapping[str, Any] = TOPIC_CONFIGS if kind == "topic" else BROKER_CONFIG_DEFS
    names = [name for name, _, _ in ops]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise KafkaError(ErrorCode.invalid_request,
                         f"Error due to duplicate config keys: {', '.join(dup)}")
    new = dict(current)
    for name, op, value in ops:
        tdef = defs.get(name)
        # A broker resource also takes keys Weir does not know (custom configs, stored as
        # Kafka stores them); a topic does not (LogConfig.validateNames).
        if tdef is None and (kind == "topic" or op in (APPEND, SUBTRACT)):
            raise KafkaError(ErrorCode.invalid_config, f"Unknown {kind} config name: {name}")
        if op not in _OP_NAMES:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Unknown config operation {op} for config key {name}")
        if op != DELETE and value is None:
            raise KafkaError(ErrorCode.invalid_request,
                             f"Null value not supported for {_OP_NAMES[op]} of {name}")
        if op in (APPEND, SUBTRACT) and (tdef is None or tdef.type != "list"):
            raise KafkaError(ErrorCode.invalid_config,
                             f"Config value {_OP_NAMES[op].lower()} is not allowed for config "
                             f"key {name}: it is not a list")
        if op == SET:
            new[name] = value  # type: ignore[assignment]
        elif op == DELETE:
            new.pop(name, None)
        else:
            items = _list_of(name, current, effective)
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            new[name] = ",".join(items)
    return new


def _list_of(name: str, current: Mapping[str, str], effective: Mapping[str, Any]) -> list[str]:
    if name in current:
        return [v.strip() for v in current[name].split(",") if v.strip()]
    value = effective.get(name)
    return [str(v) for v in value] if isinstance(value, list) else \
        [v for v in (format_value(value) or "").split(",") if v]

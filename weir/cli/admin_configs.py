"""``weir config get|set|delete``: topic configs, dynamic broker configs (one broker or the
cluster default) and broker log levels, as kafka-configs.sh does over the Kafka protocol.

Targets (exactly one):

- ``--topic T``: the topic's overrides (``/config/topics/<t>``);
- ``--broker N``: broker N's dynamic configs (``/config/brokers/<N>``), sent to broker N;
- ``--broker-default``: the cluster-wide defaults (``/config/brokers/<default>``, an empty
  resource name);
- ``--broker-logger N``: broker N's log levels (BROKER_LOGGER; not stored).

librdkafka has no BROKER_LOGGER resource, refuses a BROKER resource with an empty name and
reports one synonym per key name, so broker requests (DescribeConfigs v4,
IncrementalAlterConfigs v1 for the last two targets) go through Weir's own protocol client:
to broker N, or to the first broker for the default.

``get`` prints the overrides (dynamic values) by default; named keys or ``--all`` print those
keys or every key with its source.  ``set`` and ``delete`` use IncrementalAlterConfigs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from weir.cli.admin_common import (
    AdminCliError,
    _key_value,
    admin_client,
    emit,
    kafka_error_text,
    table,
    wait,
)

SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
_OWN_TYPES = {"broker": 4, "broker-default": 4, "broker-logger": 8}
_OVERRIDES = {"topic": {1}, "broker": {2, 3}, "broker-default": {3}, "broker-logger": {6}}


def _target(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--topic", metavar="T", help="a topic's config overrides")
    group.add_argument("--broker", metavar="N", help="broker N's dynamic configs")
    group.add_argument("--broker-default", action="store_true",
                       help="the cluster-wide dynamic broker defaults")
    group.add_argument("--broker-logger", metavar="N", help="broker N's log levels")


def add_parsers(sub: Any, common: Callable[[argparse.ArgumentParser], Any]) -> None:
    """``config get|set|delete`` under the ``weir`` parser."""
    config = sub.add_parser("config", help="get, set and delete topic and broker configs")
    csub = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    p = common(csub.add_parser("get", help="overrides (KEY...: those keys; --all: every key)"))
    _target(p)
    p.add_argument("keys", nargs="*", metavar="KEY", help="only these keys")
    p.add_argument("--all", action="store_true", help="every key with its source")
    p = common(csub.add_parser("set", help="set config overrides or log levels"))
    _target(p)
    p.add_argument("pairs", nargs="+", type=_key_value, metavar="KEY=VALUE",
                   help="the values to set")
    p = common(csub.add_parser("delete", help="remove overrides (back to the next source)"))
    _target(p)
    p.add_argument("keys", nargs="+", metavar="KEY", help="the overrides to remove")


def _resource(args: argparse.Namespace) -> tuple[str, Any, str, str]:
    """(kind, confluent resource type or None for :data:`_OWN_TYPES`, resource name, words
    for messages)."""
    from confluent_kafka.admin import ConfigResource

    if args.topic is not None:
        return "topic", ConfigResource.Type.TOPIC, args.topic, f"topic {args.topic}"
    if args.broker_default:
        return "broker-default", None, "", "the broker default"
    if args.broker is not None:
        return "broker", ConfigResource.Type.BROKER, _broker_id(args.broker), \
            f"broker {args.broker}"
    return "broker-logger", None, _broker_id(args.broker_logger), \
        f"the loggers of broker {args.broker_logger}"


def _broker_id(text: str) -> str:
    if not text.strip().isdigit():
        raise AdminCliError(f"a broker id is a number, got {text!r}")
    return text.strip()


def _doc_head(kind: str, name: str) -> dict[str, Any]:
    if kind == "broker-default":
        return {"broker_default": True}
    return {kind.replace("-", "_"): name}


def cluster_broker(args: argparse.Namespace, broker_id: str | None) -> Any:
    """Broker ``broker_id`` of the cluster's metadata (None: the lowest id); a broker the
    cluster lacks is BROKER_NOT_AVAILABLE at once, for reads and writes alike (a request
    addressed to it would wait for the whole --timeout)."""
    from confluent_kafka import KafkaException

    try:
        brokers = admin_client(args).list_topics(timeout=args.timeout).brokers
    except KafkaException as exc:
        raise AdminCliError(f"reading the cluster metadata: {kafka_error_text(exc)}"
                            ) from None
    if not brokers:
        raise AdminCliError("the cluster metadata names no broker", name="BROKER_NOT_AVAILABLE")
    found = brokers.get(int(broker_id) if broker_id else min(brokers))
    if found is None:
        raise AdminCliError(f"broker {broker_id} is not in the cluster (brokers: "
                            f"{', '.join(map(str, sorted(brokers)))})",
                            name="BROKER_NOT_AVAILABLE")
    return found


def _broker_request(args: argparse.Namespace, broker_id: str | None, payload: Any) -> Any:
    """Send ``payload`` to broker ``broker_id`` (None: the first broker in the metadata)."""
    from weir.protocol.client import BrokerConnection

    found = cluster_broker(args, broker_id)

    async def send() -> Any:
        conn = BrokerConnection(found.host, int(found.port), client_id="weir-config")
        try:
            await conn.connect(timeout_s=args.timeout)
            return await conn.request(payload, timeout_s=args.timeout)
        finally:
            await conn.close()

    try:
        import asyncio  # not at the top: only these requests need it (start-up time)

        return asyncio.run(send())
    except (OSError, TimeoutError) as exc:
        raise AdminCliError(f"broker {found.id} at {found.host}:{found.port}: {exc}") from None


def _check(code: Any, message: str | None, what: str) -> None:
    from weir.protocol.errors import ErrorCode

    if int(code) != 0:
        name = ErrorCode(int(code)).name.upper()
        raise AdminCliError(f"{what}: {name}: {message or ''}".rstrip(": "))


def _own_alter(args: argparse.Namespace, rtype: int, name: str,
               entries: list[tuple[str, int, str | None]], what: str) -> None:
    """IncrementalAlterConfigs v1 through Weir's client (SET 0, DELETE 1)."""
    from kio.index import load_request_schema

    from weir.protocol import codec

    payload = codec.build(load_request_schema(44, 1), validate_only=False, resources=[{
        "resource_type": rtype, "resource_name": name,
        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in entries]}])
    result = _broker_request(args, name or None, payload).responses[0]
    _check(result.error_code, result.error_message, what)


def _own_describe(args: argparse.Namespace, rtype: int, name: str, what: str
                  ) -> dict[str, Any]:
    """DescribeConfigs v4 through Weir's client, as confluent-kafka's ConfigEntry fields."""
    from kio.index import load_request_schema

    from weir.protocol import codec

    payload = codec.build(load_request_schema(32, 4), include_synonyms=True, resources=[{
        "resource_type": rtype, "resource_name": name, "configuration_keys": None}])
    result = _broker_request(args, name or None, payload).results[0]
    _check(result.error_code, result.error_message, what)
    return {c.name: SimpleNamespace(
                value=c.value, source=int(c.config_source), is_sensitive=c.is_sensitive,
                is_read_only=c.read_only,
                synonyms=[(s.name, SimpleNamespace(source=int(s.source), value=s.value))
                          for s in c.synonyms])
            for c in result.configs}


def cmd_config(args: argparse.Namespace) -> int:
    if args.config_command == "set":
        return alter(args, list(args.pairs), [])
    if args.config_command == "delete":
        return alter(args, [], list(args.keys))
    return get(args)


def alter(args: argparse.Namespace, sets: list[tuple[str, str]], deletes: list[str]) -> int:
    """IncrementalAlterConfigs SET / DELETE on the target."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    kind, rtype, name, words = _resource(args)
    if rtype is None:
        _own_alter(args, _OWN_TYPES[kind], name,
                   [(k, 0, v) for k, v in sets] + [(k, 1, None) for k in deletes],
                   f"altering {words}")
    else:
        if kind == "broker":
            cluster_broker(args, name)
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in sets]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in deletes]
        res = ConfigResource(rtype, name, incremental_configs=entries)
        admin = admin_client(args)  # kept alive until its futures are answered
        futures = admin.incremental_alter_configs([res], request_timeout=args.timeout)
        wait(futures[res], args, f"altering configs of {words}")
    doc = {**_doc_head(kind, name), "set": dict(sets), "deleted": deletes}
    return emit(args, doc, lambda: f"Updated configs of {words}: " + ", ".join(
        [f"{k}={v}" for k, v in sets] + [f"-{k}" for k in deletes]))


def _pairs(synonyms: Any) -> list[tuple[str, Any]]:
    """(name, synonym) pairs of confluent-kafka's dict or :func:`_own_describe`'s list."""
    return list(synonyms.items()) if isinstance(synonyms, dict) else list(synonyms)


def get(args: argparse.Namespace) -> int:
    """DescribeConfigs of the target: one row per key with its value, source and synonyms."""
    from confluent_kafka.admin import ConfigResource

    kind, rtype, name, words = _resource(args)
    if kind != "topic":  # every synonym: confluent-kafka keeps one per key name
        configs = _own_describe(args, _OWN_TYPES[kind], name, f"describing {words}")
    else:
        res = ConfigResource(rtype, name)
        admin = admin_client(args)
        futures = admin.describe_configs([res], request_timeout=args.timeout)
        configs = wait(futures[res], args, f"describing configs of {words}")
    unknown = [k for k in args.keys if k not in configs]
    if unknown and kind != "broker-default":
        raise AdminCliError(f"unknown config key(s) of {words}: {', '.join(unknown)}")
    rows = []
    for key, entry in sorted(configs.items()):
        if args.keys and key not in args.keys:
            continue
        if not (args.all or args.keys) and int(entry.source) not in _OVERRIDES[kind]:
            continue
        rows.append({"name": key, "value": entry.value,
                     "source": SOURCE_NAMES.get(int(entry.source), str(entry.source)),
                     "sensitive": bool(entry.is_sensitive),
                     "read_only": bool(entry.is_read_only),
                     "synonyms": [f"{SOURCE_NAMES.get(int(s.source), s.source)}:{n}="
                                  f"{s.value}" for n, s in _pairs(entry.synonyms)]})
    doc = {**_doc_head(kind, name), "configs": rows}

    def text() -> str:
        if not rows:
            return f"{words[0].upper()}{words[1:]} has no config overrides " \
                   "(--all lists every key)."
        if kind in ("broker", "broker-default"):
            return table(("KEY", "VALUE", "SOURCE", "READ-ONLY"),
                         [(r["name"], r["value"], r["source"], "yes" if r["read_only"] else "")
                          for r in rows])
        if kind == "broker-logger":
            return table(("LOGGER", "LEVEL"), [(r["name"], r["value"]) for r in rows])
        return table(("KEY", "VALUE", "SOURCE"),
                     [(r["name"], r["value"], r["source"]) for r in rows])

    return emit(args, doc, text)

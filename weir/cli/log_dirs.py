"""``weir log-dirs``: the log dirs of the brokers (JBOD, KIP-113).

``weir log-dirs describe`` is kafka-log-dirs.sh ``--describe``: DescribeLogDirs (v4) to each
broker (``--broker-list``, default all), optionally for some topics (``--topic-list``); a
table, or with ``--json`` Kafka's document (``{"version":1,"brokers":[{"broker":1,
"logDirs":[{"logDir":..., "error":null, "partitions":[{"partition":"t-0", "size":...,
"offsetLag":..., "isFuture":false}]}]}]}``, plus Weir's ``totalBytes``/``usableBytes``).

``weir log-dirs move --topic T --partition P --broker B --dir PATH`` sends
AlterReplicaLogDirs to broker B: its replica moves to PATH while it is served (or is created
there, for a replica B does not host yet).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from weir.cli import int32
from weir.cli.admin_common import AdminCliError, _common, admin_client

DESCRIBE_LOG_DIRS_VERSION = 4
ALTER_REPLICA_LOG_DIRS_VERSION = 2


def add_parser(sub: Any) -> None:
    p = sub.add_parser("log-dirs", help="describe the brokers' log dirs, move a replica "
                                        "between them (kafka-log-dirs.sh)")
    actions = p.add_subparsers(dest="log_dirs_command", required=True, metavar="ACTION")
    describe = _common(actions.add_parser("describe", help="log dirs, sizes, offset lags"))
    describe.add_argument("--broker-list", default=None, metavar="ID[,ID...]",
                          help="brokers to ask (default: all)")
    describe.add_argument("--topic-list", default=None, metavar="TOPIC[,TOPIC...]",
                          help="topics to show (default: all)")
    move = _common(actions.add_parser("move", help="move a replica to another log dir of "
                                                   "its broker (AlterReplicaLogDirs)"))
    move.add_argument("--topic", required=True, help="the replica's topic")
    move.add_argument("--partition", type=int32, required=True, help="the replica's partition")
    move.add_argument("--broker", type=int, required=True, help="the broker holding it")
    move.add_argument("--dir", required=True, help="absolute path of one of its log.dirs")


def _ids(text: str | None, what: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise AdminCliError(f"{what} must be broker ids separated by commas: {text!r}") from None


def _brokers(args: argparse.Namespace) -> dict[int, tuple[str, int]]:
    found = admin_client(args).list_topics(timeout=args.timeout).brokers
    return {int(b): (m.host, int(m.port)) for b, m in found.items()}


def _send(args: argparse.Namespace, endpoints: dict[int, tuple[str, int]],
          payloads: dict[int, Any]) -> dict[int, Any]:
    """One request per broker, all at once; an unreachable broker is an error."""
    from weir.protocol.client import BrokerConnection

    async def one(broker_id: int, payload: Any) -> Any:
        host, port = endpoints[broker_id]
        conn = BrokerConnection(host, port, client_id="weir-log-dirs")
        try:
            await conn.connect(timeout_s=args.timeout)
            return await conn.request(payload, timeout_s=args.timeout)
        except (OSError, TimeoutError) as exc:
            raise AdminCliError(f"broker {broker_id} at {host}:{port}: {exc}") from None
        finally:
            await conn.close()

    async def run() -> dict[int, Any]:
        ids = sorted(payloads)
        answers = await asyncio.gather(*(one(b, payloads[b]) for b in ids))
        return dict(zip(ids, answers, strict=True))

    return asyncio.run(run())


def describe_document(responses: dict[int, Any], topics: set[str] | None) -> dict[str, Any]:
    """Kafka's kafka-log-dirs.sh JSON from DescribeLogDirs responses (broker id → response)."""
    from weir.protocol.errors import ErrorCode

    brokers = []
    for broker_id, response in sorted(responses.items()):
        dirs = []
        for result in response.results:
            code = int(result.error_code)
            parts = [{"partition": f"{t.name}-{int(p.partition_index)}",
                      "size": int(p.partition_size), "offsetLag": int(p.offset_lag),
                      "isFuture": bool(p.is_future_key)}
                     for t in result.topics if topics is None or t.name in topics
                     for p in t.partitions]
            parts.sort(key=lambda p: (p["partition"].rpartition("-")[0],
                                      int(p["partition"].rpartition("-")[2])))
            dirs.append({"logDir": result.log_dir,
                         "error": None if code == 0 else ErrorCode(code).name.upper(),
                         "partitions": parts,
                         "totalBytes": int(getattr(result, "total_bytes", -1)),
                         "usableBytes": int(getattr(result, "usable_bytes", -1))})
        dirs.sort(key=lambda d: d["logDir"])
        brokers.append({"broker": broker_id, "logDirs": dirs})
    return {"version": 1, "brokers": brokers}


def _table(doc: dict[str, Any]) -> str:
    lines = []
    for broker in doc["brokers"]:
        for d in broker["logDirs"]:
            state = d["error"] or "online"
            space = ""
            if d["totalBytes"] >= 0:
                space = (f"  {d['usableBytes'] / 2**30:.1f} of {d['totalBytes'] / 2**30:.1f} "
                         "GiB free")
            lines.append(f"broker {broker['broker']}  {d['logDir']}  {state}{space}")
            for p in d["partitions"]:
                future = "  (future)" if p["isFuture"] else ""
                lines.append(f"    {p['partition']:<40} {p['size']:>14} bytes  "
                             f"lag {p['offsetLag']}{future}")
    return "\n".join(lines) if lines else "no log dirs"


def cmd_log_dirs(args: argparse.Namespace) -> int:
    from kio.index import load_request_schema

    from weir.protocol import codec

    endpoints = _brokers(args)
    if args.log_dirs_command == "describe":
        wanted = _ids(args.broker_list, "--broker-list")
        ids = sorted(endpoints) if wanted is None else wanted
        missing = [b for b in ids if b not in endpoints]
        if missing:
            raise AdminCliError(f"brokers {missing} are not in the cluster (brokers: "
                                f"{', '.join(map(str, sorted(endpoints)))})",
                                name="BROKER_NOT_AVAILABLE")
        topics = None if args.topic_list is None else {
            t.strip() for t in args.topic_list.split(",") if t.strip()}
        cls = load_request_schema(35, DESCRIBE_LOG_DIRS_VERSION)
        payload = codec.build(cls, topics=None)
        doc = describe_document(_send(args, endpoints, {b: payload for b in ids}), topics)
        print(json.dumps(doc) if args.json else _table(doc))
        return 0
    if args.broker not in endpoints:
        raise AdminCliError(f"broker {args.broker} is not in the cluster",
                            name="BROKER_NOT_AVAILABLE")
    cls = load_request_schema(34, ALTER_REPLICA_LOG_DIRS_VERSION)
    payload = codec.build(cls, dirs=[{"path": args.dir, "topics": [
        {"name": args.topic, "partitions": [args.partition]}]}])
    response = _send(args, endpoints, {args.broker: payload})[args.broker]
    from weir.protocol.errors import ErrorCode

    codes = [int(p.error_code) for t in response.results for p in t.partitions]
    code = codes[0] if codes else int(ErrorCode.unknown_server_error)
    name = ErrorCode(code).name.upper()
    if args.json:
        print(json.dumps({"topic": args.topic, "partition": args.partition,
                          "broker": args.broker, "dir": args.dir,
                          "error": None if code == 0 else name}))
    elif code == 0:
        print(f"Moving {args.topic}-{args.partition} on broker {args.broker} to {args.dir} "
              "(weir log-dirs describe shows its future log until the move completes)")
    if code != 0:
        raise AdminCliError(f"{args.topic}-{args.partition} on broker {args.broker}: {name}: "
                            f"{ALTER_LOG_DIR_MESSAGES.get(name, 'the broker refused the move')}",
                            name=name)
    return 0


# AlterReplicaLogDirs answers carry a code only; these are the messages of Kafka's
# org.apache.kafka.common.protocol.Errors for the codes it returns.
ALTER_LOG_DIR_MESSAGES = {
    "LOG_DIR_NOT_FOUND": "The user-specified log directory is not found in the broker config.",
    "KAFKA_STORAGE_ERROR": "Disk error when trying to access log file on the disk.",
    "REPLICA_NOT_AVAILABLE": "The replica is not available for the requested topic-partition.",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "CLUSTER_AUTHORIZATION_FAILED": "Cluster authorization failed.",
}

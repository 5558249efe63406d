"""``weir reassign``: kafka-reassign-partitions.sh for Weir.

Same JSON plan format (``{"version": 1, "partitions": [{"topic", "partition",
"replicas"}]}``) and the same four actions:

* ``--generate``: from ``--topics-to-move-json-file`` (``{"topics": [{"topic": ...}]}``)
  and ``--broker-list``, print the current assignment and a proposed one;
* ``--execute``: start the plan through AlterPartitionReassignments (KIP-455), printing the
  current assignment first (the rollback plan); ``--throttle B`` (bytes/s) sets
  ``leader/follower.replication.throttled.rate`` on the brokers and the
  ``*.replication.throttled.replicas`` of the moving topics (needs ``--zookeeper``);
* ``--verify``: per-partition status and, per replica being added, how far it caught up
  (log end offsets and bytes from the brokers' metrics endpoints, or bytes on disk with
  ``--data-dir`` of a local cluster; ``weir/cli/reassign_progress.py``); ``--wait`` follows
  the move until done, redrawing in place on a terminal; throttles are removed when every
  move completed;
* ``--cancel``: cancel the plan's moves.

A plan entry's optional ``log_dirs`` (one per replica, ``"any"`` or an absolute log dir of
that broker) also moves replicas between log dirs (KIP-113): ``--execute`` sends
AlterReplicaLogDirs after starting the partition moves and ``--verify`` reports each
replica's log dir move (``weir/cli/reassign_log_dirs.py``).

Requests go to the controller, found through Metadata.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.index import load_request_schema

from weir.cli import bootstrap_servers, no_cluster_in, reassign_log_dirs, reassign_progress
from weir.common import TopicPartition
from weir.controller.assignment import assign_replicas
from weir.protocol import codec
from weir.protocol.client import BrokerConnection
from weir.protocol.errors import ErrorCode, KafkaError

PLAN_VERSION = 1
METADATA_VERSION = 1
THROTTLE_RATE_KEYS = ("leader.replication.throttled.rate",
                      "follower.replication.throttled.rate")
THROTTLED_REPLICAS_KEYS = ("leader.replication.throttled.replicas",
                           "follower.replication.throttled.replicas")

Plan = dict[TopicPartition, list[int]]


class ReassignError(RuntimeError):
    """A user-facing failure (bad plan file, unreachable cluster, refused request)."""


# -- plans ---------------------------------------------------------------------------------------


def parse_plan(text: str) -> Plan:
    """A reassignment plan (kafka-reassign-partitions JSON) as ``{tp: replicas}``."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ReassignError(f"not a reassignment plan: {exc}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ReassignError('not a reassignment plan: expected {"version": 1, "partitions": '
                            '[{"topic": T, "partition": P, "replicas": [B, ...]}, ...]}')
    try:
        plan = {TopicPartition(str(p["topic"]), int(p["partition"])):
                [int(r) for r in p["replicas"]] for p in entries}
    except KeyError as exc:
        raise ReassignError(f"not a reassignment plan: a partition entry has no {exc}"
                            ) from None
    except (ValueError, TypeError) as exc:
        raise ReassignError(f"not a reassignment plan: {exc}") from None
    if not plan:
        raise ReassignError("the plan names no partitions")
    return plan


def format_plan(plan: Mapping[TopicPartition, Iterable[int]]) -> str:
    parts = [{"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
              "log_dirs": ["any"] * len(list(replicas))}
             for tp, replicas in sorted(plan.items())]
    return json.dumps({"version": PLAN_VERSION, "partitions": parts})


def parse_topics_to_move(text: str) -> list[str]:
    try:
        return [str(t["topic"]) for t in json.loads(text)["topics"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ReassignError(f"not a topics-to-move file: {exc}") from None


def generate(current: Plan, topics: Iterable[str], brokers: Iterable[int]) -> Plan:
    """A proposed assignment of ``topics`` over ``brokers`` (same partitions and factor)."""
    brokers = sorted(set(brokers))
    proposed: Plan = {}
    for topic in sorted(set(topics)):
        mine = {tp.partition: r for tp, r in current.items() if tp.topic == topic}
        if not mine:
            raise ReassignError(f"topic {topic} does not exist")
        rf = len(next(iter(mine.values())))
        try:
            placed = assign_replicas(brokers, len(mine), rf)
        except KafkaError as exc:  # more replicas than --broker-list names (AdminUtils)
            raise ReassignError(f"topic {topic}: {exc.code.name.upper()}: {exc}") from None
        proposed.update({TopicPartition(topic, p): placed[p] for p in sorted(mine)})
    return proposed


def throttled_replicas(plan: Plan, current: Plan) -> dict[str, tuple[str, str]]:
    """Per topic: (leader throttled replicas = current ones, follower = the moving ones)."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for tp, target in sorted(plan.items()):
        now = current.get(tp, [])
        leaders, followers = out.setdefault(tp.topic, ([], []))
        leaders.extend(f"{tp.partition}:{b}" for b in now)
        followers.extend(f"{tp.partition}:{b}" for b in target if b not in now)
    return {t: (",".join(lead), ",".join(follow)) for t, (lead, follow) in out.items()}


# -- talking to the cluster ----------------------------------------------------------------------


@dataclass
class ClusterView:
    """What Metadata says: brokers, the controller, replicas and ISRs of the topics asked."""

    brokers: dict[int, tuple[str, int]]
    controller_id: int
    replicas: Plan
    isrs: Plan
    leaders: dict[TopicPartition, int] = field(default_factory=dict)


class AdminSession:
    """Metadata from any broker, reassignment requests to the controller."""

    def __init__(self, bootstrap: str, timeout_s: float = 30.0) -> None:
        self._bootstrap = [b.strip() for b in bootstrap.split(",") if b.strip()]
        self._timeout_s = timeout_s
        self._metrics_ports: dict[int, int | None] = {}

    async def _connect(self, host: str, port: int) -> BrokerConnection:
        conn = BrokerConnection(host, port, client_id="weir-reassign")
        await conn.connect(timeout_s=self._timeout_s)
        return conn

    async def _any(self) -> BrokerConnection:
        errors = []
        for entry in self._bootstrap:
            host, _, port = entry.rpartition(":")
            try:
                return await self._connect(host or "127.0.0.1", int(port))
            except (OSError, TimeoutError, ValueError) as exc:
                errors.append(f"{entry}: {exc}")
        raise ReassignError(f"no broker reachable: {'; '.join(errors)}")

    async def describe(self, topics: Iterable[str] | None = None) -> ClusterView:
        conn = await self._any()
        try:
            cls = load_request_schema(3, METADATA_VERSION)
            names = None if topics is None else [{"name": t} for t in sorted(set(topics))]
            response = await conn.request(codec.build(cls, topics=names), self._timeout_s)
        finally:
            await conn.close()
        replicas: Plan = {}
        isrs: Plan = {}
        leaders: dict[TopicPartition, int] = {}
        for topic in response.topics:
            if topic.error_code != ErrorCode.none:
                continue
            for part in topic.partitions:
                tp = TopicPartition(topic.name, int(part.partition_index))
                replicas[tp] = [int(r) for r in part.replica_nodes]
                isrs[tp] = [int(r) for r in part.isr_nodes]
                leaders[tp] = int(part.leader_id)
        return ClusterView({int(b.node_id): (b.host, int(b.port)) for b in response.brokers},
                           int(response.controller_id), replicas, isrs, leaders)

    async def broker_request(self, broker_id: int, request: Any) -> Any:
        """One request to one broker (found through Metadata); OSError if unreachable."""
        endpoint = (await self.describe(())).brokers.get(broker_id)
        if endpoint is None:
            raise OSError(f"broker {broker_id} is not alive")
        conn = await self._connect(*endpoint)
        try:
            return await conn.request(request, self._timeout_s)
        finally:
            await conn.close()

    async def describe_log_dirs(self, brokers: Iterable[int]) -> dict[int, Any]:
        """DescribeLogDirs of each reachable broker (KIP-113)."""
        found = {}
        for broker_id in sorted(set(brokers)):
            try:
                found[broker_id] = await self.broker_request(
                    broker_id, reassign_log_dirs.describe_request())
            except (OSError, TimeoutError):
                continue
        return found

    async def metrics_port(self, broker_id: int, endpoint: tuple[str, int]) -> int | None:
        """The broker's ``metrics.http.port`` (DescribeConfigs to the broker itself), or None
        when it serves no metrics or chose a free port we cannot know."""
        cls = load_request_schema(32, 1)
        request = codec.build(cls, include_synonyms=False, resources=[
            {"resource_type": 4, "resource_name": str(broker_id),
             "configuration_keys": ["metrics.http.port"]}])
        try:
            conn = await self._connect(*endpoint)
            try:
                response = await conn.request(request, self._timeout_s)
            finally:
                await conn.close()
        except (OSError, TimeoutError):
            return None
        for result in response.results:
            for entry in result.configs if result.error_code == ErrorCode.none else ():
                if entry.name == "metrics.http.port" and entry.value:
                    port = int(entry.value)
                    return port if port > 0 else None
        return None

    async def log_figures(self, view: ClusterView, brokers: Iterable[int]
                          ) -> dict[int, reassign_progress.LogFigures]:
        """Log end offsets and sizes per broker, from the metrics endpoints that answer."""
        out = {}
        for broker_id in sorted(set(brokers)):
            endpoint = view.brokers.get(broker_id)
            if endpoint is None:
                continue
            if broker_id not in self._metrics_ports:
                self._metrics_ports[broker_id] = await self.metrics_port(broker_id, endpoint)
            port = self._metrics_ports[broker_id]
            if port is None:
                continue
            try:
                text = await asyncio.to_thread(_scrape, endpoint[0], port, self._timeout_s)
            except (OSError, ValueError):
                continue
            out[broker_id] = reassign_progress.parse_log_metrics(text)
        return out

    async def _controller_request(self, payload: Any) -> Any:
        for _ in range(5):
            view = await self.describe([])
            endpoint = view.brokers.get(view.controller_id)
            if endpoint is None:
                await asyncio.sleep(0.5)
                continue
            conn = await self._connect(*endpoint)
            try:
                response = await conn.request(payload, self._timeout_s)
            finally:
                await conn.close()
            if response.error_code != ErrorCode.not_controller:
                return response
            await asyncio.sleep(0.5)
        raise ReassignError("could not reach the controller")

    async def alter(self, targets: Mapping[TopicPartition, list[int] | None]
                    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, replicas in sorted(targets.items()):
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "replicas": replicas})
        cls = load_request_schema(45, 0)
        request = codec.build(cls, timeout=datetime.timedelta(seconds=self._timeout_s), topics=[
            {"name": t, "partitions": parts} for t, parts in by_topic.items()])
        response = await self._controller_request(request)
        if response.error_code != ErrorCode.none:
            raise ReassignError(f"{response.error_code.name}: {response.error_message}")
        return {TopicPartition(t.name, int(p.partition_index)): (p.error_code, p.error_message)
                for t in response.responses for p in t.partitions}

    async def list(self) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Moves in progress: (replicas, adding, removing)."""
        cls = load_request_schema(46, 0)
        response = await self._controller_request(
            codec.build(cls, timeout=datetime.timedelta(seconds=self._timeout_s), topics=None))
        if response.error_code != ErrorCode.none:
            raise ReassignError(f"{response.error_code.name}: {response.error_message}")
        return {TopicPartition(t.name, int(p.partition_index)):
                (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in response.topics for p in t.partitions}


# -- throttles (written to ZooKeeper, as the ZooKeeper-era tool did) -----------------------------


def set_throttles(zk: Any, rate: int, brokers: Iterable[int],
                  replicas: Mapping[str, tuple[str, str]]) -> None:
    for broker_id in sorted(set(brokers)):
        config = zk.get_entity_config("brokers", str(broker_id))
        config.update({key: str(rate) for key in THROTTLE_RATE_KEYS})
        zk.set_entity_config("brokers", str(broker_id), config)
    for topic, (leaders, followers) in replicas.items():
        config = zk.get_topic_config(topic)
        config.update(zip(THROTTLED_REPLICAS_KEYS, (leaders, followers), strict=True))
        zk.set_topic_config(topic, config)


def clear_throttles(zk: Any, brokers: Iterable[int], topics: Iterable[str]) -> bool:
    """Remove the throttle keys; True if any was set."""
    removed = False
    for entity, names, keys in (("brokers", [str(b) for b in brokers], THROTTLE_RATE_KEYS),
                                ("topics", list(topics), THROTTLED_REPLICAS_KEYS)):
        for name in sorted(set(names)):
            config = zk.get_entity_config(entity, name)
            kept = {k: v for k, v in config.items() if k not in keys}
            if kept != config:
                zk.set_entity_config(entity, name, kept)
                removed = True
    return removed


def _with_zk(connect: str | None, fn: Any) -> Any:
    if connect is None:
        raise ReassignError("--zookeeper is needed to set or remove replication throttles")
    from weir.ops.zkview import close_zk, open_zk

    zk = open_zk(connect)
    try:
        return fn(zk)
    finally:
        close_zk(zk)


def _scrape(host: str, port: int, timeout_s: float) -> str:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics",
                                timeout=min(timeout_s, 5)) as response:
        return response.read().decode("utf-8", errors="replace")


def replica_bytes(data_dir: Path, tp: TopicPartition) -> dict[int, int]:
    """Bytes of ``tp``'s log on each broker of a local cluster (``broker-<id>/logs``)."""
    out = {}
    for broker_dir in data_dir.glob("broker-*"):
        pdir = broker_dir / "logs" / str(tp)
        if pdir.is_dir():
            out[int(broker_dir.name.split("-", 1)[1])] = sum(
                f.stat().st_size for f in pdir.glob("*.log"))
    return out


# -- the actions ---------------------------------------------------------------------------------


async def run_generate(session: AdminSession, args: argparse.Namespace) -> int:
    topics = parse_topics_to_move(await asyncio.to_thread(Path(args.topics_to_move_json_file).read_text))
    try:
        brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
    except ValueError:
        raise ReassignError(f"--broker-list: expected broker ids separated by commas, got "
                            f"{args.broker_list!r}") from None
    view = await session.describe(topics)
    missing = sorted(set(brokers) - set(view.brokers))
    if missing:  # Kafka: "Unable to find broker metadata for ..."
        raise ReassignError(f"BROKER_NOT_AVAILABLE: --broker-list names brokers the cluster "
                            f"lacks: {', '.join(map(str, missing))} (brokers: "
                            f"{', '.join(map(str, sorted(view.brokers)))})")
    current = {tp: r for tp, r in view.replicas.items() if tp.topic in topics}
    proposed = generate(current, topics, brokers)  # a failure prints no half of the answer
    print("Current partition replica assignment")
    print(format_plan(current))
    print("\nProposed partition reassignment configuration")
    print(format_plan(proposed))
    return 0


def _log_dir_moves(text: str) -> dict[reassign_log_dirs.Replica, str]:
    """The plan's ``log_dirs`` (KIP-113): replicas to place in a named log dir."""
    try:
        return reassign_log_dirs.parse_log_dirs(text)
    except (ValueError, KeyError, TypeError) as exc:
        raise ReassignError(str(exc)) from None


async def run_execute(session: AdminSession, args: argparse.Namespace) -> int:
    text = await asyncio.to_thread(Path(args.reassignment_json_file).read_text)
    plan = parse_plan(text)
    moves = _log_dir_moves(text)
    view = await session.describe({tp.topic for tp in plan})
    current = {tp: view.replicas[tp] for tp in plan if tp in view.replicas}
    print("Current partition replica assignment\n")
    print(format_plan(current))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None and args.throttle >= 0:
        involved = set(view.brokers) | {b for r in plan.values() for b in r}
        _with_zk(args.zookeeper, lambda zk: set_throttles(
            zk, args.throttle, involved, throttled_replicas(plan, current)))
        print(f"Warning: You must run --verify periodically, until the reassignment "
              f"completes, to ensure the throttle is removed.\n"
              f"The inter-broker throttle limit was set to {args.throttle} B/s")
    results = await session.alter(dict(plan))
    failed = {tp: r for tp, r in results.items() if r[0] != ErrorCode.none}
    for tp, (code, message) in sorted(failed.items()):
        print(f"Error reassigning partition {tp}: {code.name.upper()}: {message}",
              file=sys.stderr)
    if failed:
        return 1
    print(f"Successfully started partition reassignment{'s' if len(plan) > 1 else ''} for "
          + ",".join(str(tp) for tp in sorted(plan)))
    if moves:  # Kafka's executeMoves: after the partition moves have started
        lines, errors = await reassign_log_dirs.execute_moves(
            session.broker_request, moves, args.timeout)
        print("\n".join(lines))
        for error in errors:
            print(f"Error moving a replica to its log dir: {error}", file=sys.stderr)
        if errors:
            return 1
    return 0


def _statuses(plan: Plan, view: ClusterView, moving: Mapping[TopicPartition, Any]
              ) -> list[tuple[TopicPartition, str, str]]:
    """(partition, in_progress | completed | mismatch, Kafka's status line) per plan entry."""
    out = []
    for tp, target in sorted(plan.items()):
        if tp in moving:
            status, line = "in_progress", f"Reassignment of partition {tp} is still in progress."
        elif view.replicas.get(tp) == target:
            status, line = "completed", f"Reassignment of partition {tp} is completed."
        else:
            status = "mismatch"
            line = (f"There is no active reassignment of partition {tp}, but replica set is "
                    f"{view.replicas.get(tp)} rather than {target}.")
        out.append((tp, status, line))
    return out


async def _progress(session: AdminSession, plan: Plan, view: ClusterView,
                    moving: Mapping[TopicPartition, Any], data_dir: Path | None
                    ) -> list[reassign_progress.ReplicaProgress]:
    """Per adding replica: how far it caught up (see reassign_progress)."""
    mine = {tp: m for tp, m in moving.items() if tp in plan}
    if not mine:
        return []
    involved = {view.leaders.get(tp, -1) for tp in mine} | {
        b for _, adding, _ in mine.values() for b in adding}
    logs = await session.log_figures(view, involved)
    local = {tp: replica_bytes(data_dir, tp) for tp in mine} if data_dir else None
    return reassign_progress.measure(mine, view.leaders, view.isrs, logs, local)


def _verify_doc(plan: Plan, view: ClusterView, statuses: list[tuple[TopicPartition, str, str]],
                progress: list[reassign_progress.ReplicaProgress]) -> dict[str, Any]:
    return {"done": all(status == "completed" for _, status, _ in statuses),
            "partitions": [{"topic": tp.topic, "partition": tp.partition, "status": status,
                            "replicas": view.replicas.get(tp), "target": plan[tp]}
                           for tp, status, _ in statuses],
            "progress": [{"topic": r.tp.topic, "partition": r.tp.partition,
                          "broker": r.broker, "in_isr": r.in_isr, "share": r.share(),
                          "offsets": list(r.offsets) if r.offsets else None,
                          "bytes": list(r.size) if r.size else None} for r in progress]}


async def run_verify(session: AdminSession, args: argparse.Namespace) -> int:
    text = await asyncio.to_thread(Path(args.reassignment_json_file).read_text)
    plan = parse_plan(text)
    moves = _log_dir_moves(text)
    data_dir = Path(args.data_dir) if args.data_dir else None
    deadline = time.monotonic() + args.wait
    live = reassign_progress.LiveView(stamp=args.wait > 0)
    while True:
        moving = await session.list()
        view = await session.describe({tp.topic for tp in plan})
        statuses = _statuses(plan, view, moving)
        progress = await _progress(session, plan, view, moving, data_dir)
        done = all(status == "completed" for _, status, _ in statuses)
        dir_lines: list[str] = []
        if moves:  # KIP-113: where each named replica's log is (Kafka's findLogDirMoveStates)
            described = await session.describe_log_dirs({r[2] for r in moves})
            dir_lines, dirs_done = reassign_log_dirs.move_states(described, moves)
            done = done and dirs_done
        if not args.json:
            lines = ["Status of partition reassignment:", *(line for *_, line in statuses)]
            if progress:
                lines += ["Progress of the replicas being added:",
                          *reassign_progress.render(progress)]
            if dir_lines:
                lines += ["", *dir_lines]
            live.show(lines)
        if done or time.monotonic() >= deadline:
            break
        await asyncio.sleep(args.interval)
    removed = False
    if done and args.zookeeper is not None:
        removed = _with_zk(args.zookeeper, lambda zk: clear_throttles(
            zk, view.brokers, {tp.topic for tp in plan}))
    if args.json:
        print(json.dumps({**_verify_doc(plan, view, statuses, progress), "done": done,
                          **({"log_dir_moves": dir_lines} if moves else {}),
                          "throttle_removed": removed}, indent=2))
    elif removed:
        print("Throttle was removed.")
    return 0 if done else 1


async def run_cancel(session: AdminSession, args: argparse.Namespace) -> int:
    plan = parse_plan(await asyncio.to_thread(Path(args.reassignment_json_file).read_text))
    results = await session.alter({tp: None for tp in plan})
    cancelled = sorted(tp for tp, (code, _) in results.items() if code == ErrorCode.none)
    for tp, (code, message) in sorted(results.items()):
        if code not in (ErrorCode.none, ErrorCode.no_reassignment_in_progress):
            print(f"Error cancelling {tp}: {code.name}: {message}", file=sys.stderr)
            return 1
    print("Successfully cancelled partition reassignment(s) for: "
          + (",".join(map(str, cancelled)) or "(none in progress)"))
    if args.zookeeper is not None:
        view = await session.describe({tp.topic for tp in plan})
        _with_zk(args.zookeeper, lambda zk: clear_throttles(
            zk, view.brokers, {tp.topic for tp in plan}))
    return 0


# -- argparse ------------------------------------------------------------------------------------


def add_parser(sub: Any) -> None:
    """The ``reassign`` subcommand (kafka-reassign-partitions.sh options)."""
    p = sub.add_parser("reassign", help="move partition replicas between brokers")
    p.add_argument("--bootstrap-server", default=None, type=bootstrap_servers,
                   help="host:port[,host:port...] (default: the cluster of --data-dir, or of "
                        "./weir-data)")
    action = p.add_mutually_exclusive_group(required=True)
    for name, text in (("generate", "propose a plan moving --topics-to-move-json-file"),
                       ("execute", "start the moves of --reassignment-json-file"),
                       ("verify", "show whether the moves completed, and their progress"),
                       ("cancel", "stop the moves of --reassignment-json-file")):
        action.add_argument(f"--{name}", action="store_true", help=text)
    p.add_argument("--topics-to-move-json-file", help="for --generate")
    p.add_argument("--broker-list", help="for --generate: comma-separated broker ids")
    p.add_argument("--reassignment-json-file", help="the plan (execute, verify, cancel)")
    p.add_argument("--throttle", type=int, default=None,
                   help="replication throttle in B/s for the move (with --execute)")
    p.add_argument("--zookeeper", default=None,
                   help="ZooKeeper connect string (with chroot), to set/remove throttles")
    p.add_argument("--data-dir", default=None,
                   help="local cluster directory: bytes on disk per replica in --verify "
                        "(where the brokers serve no metrics.http.port)")
    p.add_argument("--wait", type=float, default=0,
                   help="--verify: keep checking up to this many seconds")
    p.add_argument("--interval", type=float, default=1.0, help="--verify --wait period")
    p.add_argument("--timeout", type=float, default=30.0, help="request timeout, seconds")
    p.add_argument("--json", action="store_true",
                   help="--verify: one JSON document (statuses and per-replica progress)")


def _local_cluster(args: argparse.Namespace) -> None:
    """Without --bootstrap-server: the brokers (and ZooKeeper, for throttles) that ``weir up``
    recorded in --data-dir (default ./weir-data)."""
    from weir.ops.cluster import read_cluster_file

    data_dir = args.data_dir or "./weir-data"
    state = read_cluster_file(data_dir)
    if not state or not state.get("bootstrap"):
        raise ReassignError(no_cluster_in(data_dir))
    args.bootstrap_server = state["bootstrap"]
    if args.zookeeper is None:
        args.zookeeper = state.get("zookeeper")


def cmd_reassign(args: argparse.Namespace) -> int:
    if args.bootstrap_server is None:
        _local_cluster(args)
    session = AdminSession(args.bootstrap_server, args.timeout)
    if args.generate:
        if not (args.topics_to_move_json_file and args.broker_list):
            raise ReassignError("--generate needs --topics-to-move-json-file and --broker-list")
        action = run_generate
    else:
        if not args.reassignment_json_file:
            raise ReassignError("--reassignment-json-file is required")
        action = (run_execute if args.execute else run_verify if args.verify
                  else run_cancel)
    return asyncio.run(action(session, args))  # a ReassignError: one line (weir/cli/errors.py)

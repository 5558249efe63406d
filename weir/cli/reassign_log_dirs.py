"""The ``log_dirs`` of a reassignment plan (kafka-reassign-partitions.sh, KIP-113).

A plan entry may name a log dir per replica (``"log_dirs": ["/disks/b", "any"]``, one per
entry of ``replicas``; ``"any"`` leaves the choice to the broker).  ``--execute`` starts the
partition moves, then sends AlterReplicaLogDirs to each named broker until every replica
has started moving: a replica that does not exist yet on its new broker answers
REPLICA_NOT_AVAILABLE (the broker remembers the dir for it) and is asked again until
``--timeout`` (Kafka's ``executeMoves``).  ``--verify`` reports each replica's log dir move
from DescribeLogDirs, with Kafka's lines (``findLogDirMoveStates``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from kio.index import load_request_schema

from weir.protocol import codec
from weir.protocol.errors import ErrorCode

ANY_LOG_DIR = "any"
RETRY_S = 0.1

Replica = tuple[str, int, int]
"""(topic, partition, broker): Kafka's TopicPartitionReplica, printed ``t-0-1``."""


class LogDirPlanError(ValueError):
    """A plan whose log_dirs cannot be used (the message is Kafka's)."""


def parse_log_dirs(text: str) -> dict[Replica, str]:
    """The replicas a plan places in a named log dir → that dir."""
    doc = json.loads(text)
    moves: dict[Replica, str] = {}
    for entry in doc.get("partitions", []):
        topic, partition = str(entry["topic"]), int(entry["partition"])
        replicas = [int(r) for r in entry["replicas"]]
        dirs = entry.get("log_dirs")
        if dirs is None:
            continue
        if not isinstance(dirs, list) or len(dirs) != len(replicas):
            raise LogDirPlanError(
                f"Size of replicas list {replicas} is different from size of log dirs list "
                f"{dirs} for partition {topic}-{partition}")
        for broker, log_dir in zip(replicas, dirs, strict=True):
            if str(log_dir) != ANY_LOG_DIR:
                moves[(topic, partition, broker)] = str(log_dir)
    return moves


def name(replica: Replica) -> str:
    return f"{replica[0]}-{replica[1]}-{replica[2]}"


def _request(moves: Mapping[Replica, str]) -> Any:
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (topic, partition, _broker), log_dir in sorted(moves.items()):
        by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(partition)
    return codec.build(load_request_schema(34, 2), dirs=[
        {"path": d, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        for d, topics in by_dir.items()])


async def execute_moves(send: Any, moves: Mapping[Replica, str], timeout_s: float
                        ) -> tuple[list[str], list[str]]:
    """AlterReplicaLogDirs per broker until every move started; (printed lines, errors).

    ``send(broker_id, request)`` answers the broker's response (or raises OSError)."""
    pending = dict(moves)
    lines: list[str] = []
    errors: list[str] = []
    deadline = time.monotonic() + timeout_s
    while pending:
        brokers = sorted({r[2] for r in pending})
        for broker in brokers:
            mine = {r: d for r, d in pending.items() if r[2] == broker}
            try:
                response = await send(broker, _request(mine))
            except (OSError, TimeoutError):
                continue  # unreachable for now: asked again until the deadline
            for topic in response.results:
                for part in topic.partitions:
                    replica = (topic.topic_name, int(part.partition_index), broker)
                    if replica not in pending:
                        continue
                    code = ErrorCode(int(part.error_code))
                    if code == ErrorCode.none:
                        lines.append(f"Successfully started moving log directory to "
                                     f"{pending.pop(replica)} for replica {replica[0]}-"
                                     f"{replica[1]} with broker {broker}")
                    elif code != ErrorCode.replica_not_available:
                        errors.append(f"{name(replica)}: {code.name.upper()}")
                        del pending[replica]
        if not pending:
            break
        if time.monotonic() >= deadline:
            plural = "" if len(pending) == 1 else "s"
            errors.append(f"Timed out before log directory move{plural} could be started "
                          f"for: {','.join(name(r) for r in sorted(pending))}")
            break
        await asyncio.sleep(RETRY_S)
    return lines, errors


def move_states(described: Mapping[int, Any], moves: Mapping[Replica, str]
                ) -> tuple[list[str], bool]:
    """Kafka's verify lines for the log dir moves, and whether all completed.

    ``described``: broker id → its DescribeLogDirs response (absent: unreachable)."""
    lines, done = [], True
    for replica, target in sorted(moves.items()):
        topic, partition, broker = replica
        current = future = None
        found = described.get(broker)
        for result in (found.results if found is not None else ()):
            for t in result.topics:
                for p in t.partitions:
                    if t.name == topic and int(p.partition_index) == partition:
                        if p.is_future_key:
                            future = result.log_dir
                        else:
                            current = result.log_dir
        tp = f"{topic}-{partition}"
        if current is None and future is None:
            done = False
            lines.append(f"Partition {tp} cannot be found in any live log directory on "
                         f"broker {broker}.")
        elif current is None:
            done = False
            lines.append(f"Partition {tp} is not found in any live log dir on broker {broker}. "
                         "There is likely an offline log directory on the broker.")
        elif future is not None:
            done = False
            if future == target:
                lines.append(f"Reassignment of replica {name(replica)} is still in progress.")
            else:
                lines.append(f"Partition {tp} on broker {broker} is being moved to log dir "
                             f"{future} instead of {target}.")
        elif current == target:
            lines.append(f"Reassignment of replica {name(replica)} completed successfully.")
        else:
            done = False
            lines.append(f"Partition {tp} on broker {broker} is not being moved from log dir "
                         f"{current} to {target}.")
    return lines, done


def describe_request() -> Any:
    return codec.build(load_request_schema(35, 4), topics=None)

"""The ``log_dirs`` of a reassignment plan: parsing, Kafka's verify lines, and the retries
of AlterReplicaLogDirs while a replica does not exist yet on its new broker."""

from __future__ import annotations

import asyncio
import json

import pytest
from kio.index import load_response_schema

from weir.cli.reassign_log_dirs import (
    LogDirPlanError,
    execute_moves,
    move_states,
    parse_log_dirs,
)
from weir.protocol import codec
from weir.protocol.errors import ErrorCode


def test_parse_keeps_named_dirs_only():
    plan = {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["/a", "any"]},
        {"topic": "t", "partition": 1, "replicas": [2]}]}
    assert parse_log_dirs(json.dumps(plan)) == {("t", 0, 1): "/a"}
    plan["partitions"][0]["log_dirs"] = ["/a"]
    with pytest.raises(LogDirPlanError, match=r"Size of replicas list \[1, 2\] is different"):
        parse_log_dirs(json.dumps(plan))


def _described(dirs: dict[str, list[tuple[str, int, bool]]]):
    return codec.build(load_response_schema(35, 4), results=[
        {"log_dir": d, "topics": [{"name": t, "partitions": [
            {"partition_index": p, "is_future_key": f}]} for t, p, f in entries]}
        for d, entries in dirs.items()])


def test_verify_lines_are_kafkas():
    moves = {("t", 0, 1): "/b", ("t", 1, 1): "/b", ("t", 2, 1): "/b", ("t", 3, 1): "/b",
             ("t", 4, 2): "/b"}
    described = {1: _described({"/a": [("t", 0, False), ("t", 1, False), ("t", 2, False)],
                                "/b": [("t", 1, True), ("t", 3, False)],
                                "/c": [("t", 2, True)]})}
    lines, done = move_states(described, moves)
    assert not done
    assert lines == [
        "Partition t-0 on broker 1 is not being moved from log dir /a to /b.",
        "Reassignment of replica t-1-1 is still in progress.",
        "Partition t-2 on broker 1 is being moved to log dir /c instead of /b.",
        "Reassignment of replica t-3-1 completed successfully.",
        "Partition t-4 cannot be found in any live log directory on broker 2.",
    ]
    assert move_states(described, {("t", 3, 1): "/b"}) == (
        ["Reassignment of replica t-3-1 completed successfully."], True)


def _answer(request, codes):
    return codec.build(load_response_schema(34, 2), results=[
        {"topic_name": t.name, "partitions": [
            {"partition_index": p, "error_code": codes.get((t.name, p), 0)}
            for p in t.partitions]}
        for d in request.dirs for t in d.topics])


def test_execute_retries_until_the_replica_exists_then_reports():
    calls = []

    async def send(broker, request):
        calls.append(broker)
        missing = ErrorCode.replica_not_available if len(calls) < 3 else ErrorCode.none
        return _answer(request, {("t", 0): missing, ("u", 0): ErrorCode.log_dir_not_found})

    lines, errors = asyncio.run(execute_moves(
        send, {("t", 0, 2): "/b", ("u", 0, 1): "/nope"}, timeout_s=10))
    assert lines == [("Successfully started moving log directory to /b for replica t-0 "
                      "with broker 2")]
    assert errors == ["u-0-1: LOG_DIR_NOT_FOUND"]
    assert calls.count(2) == 2 and calls.count(1) == 1


def test_execute_gives_up_at_the_timeout():
    async def send(broker, request):
        return _answer(request, {("t", 0): ErrorCode.replica_not_available})

    lines, errors = asyncio.run(execute_moves(send, {("t", 0, 2): "/b"}, timeout_s=0.2))
    assert lines == []
    assert errors == ["Timed out before log directory move could be started for: t-0-2"]

"""Every `weir` subcommand given bad input against a real one-broker cluster (no authorizer):
one line on stderr naming Kafka's error, a non-zero exit code, never a traceback; the same as
one JSON object under --json; no traceback when stdout's reader goes away (`| head`); an
unreachable cluster and a missing broker id fail fast."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.clients import create_topic
from tests.integration.conftest import serve_cluster
from weir.ports import free_port

pytestmark = pytest.mark.integration

WEIR = [sys.executable, "-m", "weir"]
TOPIC = "bad-input"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    for cluster in serve_cluster(tmp_path_factory, 1, {"auto.create.topics.enable": "false"}):
        create_topic(cluster.bootstrap, TOPIC, partitions=2)
        yield cluster


def weir(cluster, *args: str, stdin: str = "", where: bool = True
         ) -> subprocess.CompletedProcess:
    extra = ["--data-dir", str(cluster.data_dir)] if where else []
    return subprocess.run([*WEIR, *args, *extra], input=stdin, capture_output=True,
                          text=True, timeout=60, check=False)


def assert_one_named_line(done: subprocess.CompletedProcess, name: str) -> str:
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert re.search(rf"\b{name}\b", lines[0]), lines[0]
    return lines[0]


CASES = [
    (["produce", "--topic", TOPIC, "--partition", "99"], "a\n", "UNKNOWN_TOPIC_OR_PARTITION"),
    (["produce", "--topic", "nope", "--timeout", "5"], "a\n", "UNKNOWN_TOPIC_OR_PARTITION"),
    (["topic", "describe", "nope"], "", "UNKNOWN_TOPIC_OR_PARTITION"),
    (["topic", "create", "bad topic!"], "", "INVALID_TOPIC_EXCEPTION"),
    (["topic", "create", TOPIC], "", "TOPIC_ALREADY_EXISTS"),
    (["topic", "create", "zero", "--partitions", "0"], "", "INVALID_PARTITIONS"),
    (["topic", "create", "rf", "--replication-factor", "3"], "",
     "INVALID_REPLICATION_FACTOR"),
    (["topic", "delete", "nope"], "", "UNKNOWN_TOPIC_OR_PARTITION"),
    (["topic", "add-partitions", TOPIC, "--partitions", "1"], "", "INVALID_PARTITIONS"),
    (["topic", "alter-config", TOPIC, "--set", "no.such.key=1"], "", "INVALID_CONFIG"),
    (["topic", "alter-config", TOPIC], "", "INVALID_ARGUMENT"),
    (["config", "get", "--broker", "99"], "", "BROKER_NOT_AVAILABLE"),
    (["config", "set", "--broker", "99", "log.cleaner.threads=2"], "",
     "BROKER_NOT_AVAILABLE"),
    (["config", "get", "--topic", "nope"], "", "UNKNOWN_TOPIC_OR_PARTITION"),
    (["config", "set", "--topic", TOPIC, "retention.ms=abc"], "", "INVALID_CONFIG"),
    (["config", "get", "--broker", "x"], "", "INVALID_ARGUMENT"),
    (["group", "describe", "nope"], "", "GROUP_ID_NOT_FOUND"),
    (["group", "delete", "nope"], "", "GROUP_ID_NOT_FOUND"),
    (["group", "list", "--state", "Bogus"], "", "INVALID_ARGUMENT"),
    (["group", "reset-offsets", "g", "--topic", "nope", "--to-earliest"], "",
     "UNKNOWN_TOPIC_OR_PARTITION"),
    (["consume", "--topic", "nope", "--timeout-ms", "1000"], "",
     "UNKNOWN_TOPIC_OR_PARTITION"),
    (["consume", "--topic", TOPIC, "--partition", "99"], "", "UNKNOWN_TOPIC_OR_PARTITION"),
    (["consume", "--topic", TOPIC, "--consumer-property", "auto.offset.reset=bogus"], "",
     "INVALID_CONFIG"),
    (["consume", "--topic", TOPIC, "--consumer-property", "no.such.key=1"], "",
     "INVALID_CONFIG"),
    (["produce", "--topic", TOPIC, "--property", "no.such.key=1"], "a\n", "INVALID_ARGUMENT"),
    (["elect", "--type", "preferred", "--topic", "nope", "--partition", "0"], "",
     "UNKNOWN_TOPIC_OR_PARTITION"),
    (["acl", "list"], "", "SECURITY_DISABLED"),
    (["acl", "add", "--topic", TOPIC, "--allow-principal", "User:a", "--operation", "Read"],
     "", "SECURITY_DISABLED"),
    (["log-dirs", "describe", "--broker-list", "99"], "", "BROKER_NOT_AVAILABLE"),
    (["log-dirs", "move", "--topic", TOPIC, "--partition", "0", "--broker", "1", "--dir",
      "/no/such/dir"], "", "LOG_DIR_NOT_FOUND"),
    (["user", "remove", "nobody"], "", "RESOURCE_NOT_FOUND"),
    (["user", "add", "alice", "--password", ""], "", "INVALID_ARGUMENT"),
    (["reassign", "--verify", "--reassignment-json-file", "/no/such/plan.json"], "",
     "IO_ERROR"),
    (["topic", "create", "t", "--partitions", "many"], "", "error"),  # usage: exit 2
    # numbers past Kafka's INT32 / INT64 fields (they were INTERNAL_ERROR: OverflowError)
    (["topic", "create", "t", "--partitions", "99999999999"], "", "error"),
    (["consume", "--topic", TOPIC, "--partition", "0", "--offset", "99999999999999999999"],
     "", "INVALID_ARGUMENT"),
    (["consume", "--topic", TOPIC, "--from-timestamp", "99999999999999999999"], "",
     "INVALID_ARGUMENT"),
    (["produce", "--topic", TOPIC, "--format", "json"],
     '{"value": "v", "timestamp": 99999999999999999999}\n', "INVALID_ARGUMENT"),
    (["produce", "--topic", TOPIC, "--format", "json"],
     '{"value": "v", "partition": 99999999999999999999}\n', "INVALID_ARGUMENT"),
]


@pytest.mark.parametrize(("args", "stdin", "name"), CASES, ids=[" ".join(c[0][:3])
                                                                 for c in CASES])
def test_bad_input_is_one_named_line(cluster, args, stdin, name) -> None:
    done = weir(cluster, *args, stdin=stdin)
    line = assert_one_named_line(done, name)
    assert line.startswith(("weir: ", "weir topic create: error: ")), line


@pytest.mark.parametrize(("args", "name"), [
    (["topic", "describe", "nope"], "UNKNOWN_TOPIC_OR_PARTITION"),
    (["config", "set", "--broker", "99", "a=b"], "BROKER_NOT_AVAILABLE"),
    (["acl", "list"], "SECURITY_DISABLED"),
    (["topic", "create", "t", "--partitions", "many"], "INVALID_ARGUMENT"),
])
def test_errors_are_json_under_json(cluster, args, name) -> None:
    done = weir(cluster, *args, "--json")
    doc = json.loads(assert_one_named_line(done, name))
    assert doc["error"] == name and doc["message"] and doc["command"].startswith("weir ")


def test_status_through_a_broker_hides_internal_topics(cluster) -> None:
    create_topic(cluster.bootstrap, "__internal_like")  # shown only with --include-internal
    doc = json.loads(weir(cluster, "status", "--bootstrap-server", cluster.bootstrap, "--json",
                          where=False).stdout)
    assert {p["topic"] for p in doc["partitions"]} == {TOPIC}
    assert [b["id"] for b in doc["brokers"]] == [1] and doc["controller"] == 1
    doc = json.loads(weir(cluster, "status", "--json", "--include-internal").stdout)
    assert {p["topic"] for p in doc["partitions"]} >= {TOPIC, "__internal_like"}
    assert doc["partitions"][0]["leader_epoch"] is not None  # from ZooKeeper
    done = weir(cluster, "status", "--under-replicated-partitions")
    assert done.returncode == 0 and done.stdout.strip() == "No partitions match."


def test_status_errors_are_named(cluster, tmp_path) -> None:
    assert_one_named_line(weir(cluster, "status", "--data-dir", str(tmp_path), where=False),
                          "INVALID_ARGUMENT")
    port = free_port()
    assert_one_named_line(weir(cluster, "status", "--bootstrap-server", f"127.0.0.1:{port}",
                               where=False), "NETWORK_EXCEPTION")


@pytest.mark.parametrize("args", [["topic", "describe"], ["config", "get", "--broker", "1",
                                                         "--all"],
                                  ["group", "list", "--json"], ["status", "--json"]])
def test_closed_pipe_is_no_traceback(cluster, args) -> None:
    """`weir ... | head`: stdout's reader is gone before the first line is written."""
    proc = subprocess.Popen([*WEIR, *args, "--data-dir", str(cluster.data_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    try:
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert err == "" and code == 141, (code, err)


def test_unreachable_cluster_and_missing_broker_fail_fast(cluster) -> None:
    port = free_port()
    started = time.monotonic()
    done = weir(cluster, "topic", "list", "--bootstrap-server", f"127.0.0.1:{port}",
                where=False)
    assert time.monotonic() - started < 10
    assert "cannot reach the cluster" in assert_one_named_line(done, "NETWORK_EXCEPTION")
    for action in (["get", "--broker", "99"], ["set", "--broker", "99", "a=b"]):
        started = time.monotonic()
        done = weir(cluster, "config", *action)
        assert time.monotonic() - started < 10, action
        assert "broker 99 is not in the cluster" in assert_one_named_line(
            done, "BROKER_NOT_AVAILABLE")


def test_sigterm_stops_the_console_consumer_as_ctrl_c_does(cluster) -> None:
    """`kill PID` of `weir consume --group g`: it closes its consumer (commits what it
    printed, leaves the group) and prints its count, as Kafka's console consumer's shutdown
    hook does, instead of dying at once with the offsets uncommitted."""
    create_topic(cluster.bootstrap, "stopped-by-kill", partitions=1)
    produced = weir(cluster, "produce", "--topic", "stopped-by-kill", stdin="a\nb\nc\n")
    assert produced.returncode == 0, produced.stderr
    consumer = subprocess.Popen(
        [*WEIR, "consume", "--topic", "stopped-by-kill", "--group", "killed",
         "--from-beginning", "--consumer-property", "enable.auto.commit=true",
         "--consumer-property", "auto.commit.interval.ms=600000",  # only close() commits
         "--data-dir", str(cluster.data_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert [consumer.stdout.readline() for _ in range(3)] == ["a\n", "b\n", "c\n"]
        consumer.send_signal(signal.SIGTERM)
        code = consumer.wait(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    err = consumer.stderr.read()
    assert code == 0 and "Processed a total of 3 messages" in err, (code, err)
    described = weir(cluster, "group", "describe", "killed", "--json")
    assert described.returncode == 0, described.stderr
    assert [p["current_offset"] for p in json.loads(described.stdout)["partitions"]] == [3]


def test_removing_a_user_that_does_not_exist_names_the_deletion(cluster) -> None:
    """Without --mechanism the command describes the user's credentials first; the error is
    still Kafka's answer to a deletion, not one about describing."""
    for extra in ([], ["--mechanism", "SCRAM-SHA-256"]):
        line = assert_one_named_line(weir(cluster, "user", "remove", "nobody", *extra),
                                     "RESOURCE_NOT_FOUND")
        assert line == ("weir: user nobody: RESOURCE_NOT_FOUND: Attempt to delete a user "
                        "credential that does not exist"), extra


def test_a_log_dir_move_refused_says_why(cluster) -> None:
    """AlterReplicaLogDirs answers a code only: the line adds Kafka's message for it."""
    line = assert_one_named_line(weir(cluster, "log-dirs", "move", "--topic", TOPIC,
                                      "--partition", "0", "--broker", "1", "--dir",
                                      "/no/such/dir"), "LOG_DIR_NOT_FOUND")
    assert line == (f"weir: {TOPIC}-0 on broker 1: LOG_DIR_NOT_FOUND: The user-specified log "
                    "directory is not found in the broker config.")


def test_reassign_generate_bad_broker_lists(cluster, tmp_path) -> None:
    """--broker-list with a word or with a broker the cluster lacks: a named line, no plan
    half printed (they were INTERNAL_ERROR with a ValueError, and a RF error for 99)."""
    move = tmp_path / "move.json"
    move.write_text(f'{{"version": 1, "topics": [{{"topic": "{TOPIC}"}}]}}')
    for brokers, name, said in (
            ("1,x", "INVALID_ARGUMENT",
             "--broker-list: expected broker ids separated by commas, got '1,x'"),
            ("1,99", "BROKER_NOT_AVAILABLE",
             "--broker-list names brokers the cluster lacks: 99 (brokers: 1)")):
        done = weir(cluster, "reassign", "--generate", "--topics-to-move-json-file",
                    str(move), "--broker-list", brokers)
        assert said in assert_one_named_line(done, name)
        assert done.stdout == ""

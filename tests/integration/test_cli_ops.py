"""The operator CLI run as a subprocess against real brokers: ``weir group reset-offsets`` and
``delete`` with a real confluent-kafka consumer group, ``weir produce``/``consume`` with keys
and headers, ``weir elect`` after a preferred leader came back, ``weir up --first-broker-id 0``.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.conftest import wait_for
from tests.integration.clients import create_topic, produce
from tests.integration.conftest import serve_cluster
from weir.ops.cluster import free_port

pytestmark = pytest.mark.integration

WEIR = [sys.executable, "-m", "weir"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two brokers; leaders stay where an election puts them (no automatic rebalance)."""
    served = serve_cluster(tmp_path_factory, 2, {"auto.leader.rebalance.enable": "false"})
    with contextlib.closing(served):  # the cluster stops even if a wait below fails
        for c in served:
            # registered in ZooKeeper is not yet known everywhere: wait until every broker's
            # metadata (the controller's UpdateMetadata) lists both, or RF 2 is refused
            for slot in c.brokers:
                admin = AdminClient({"bootstrap.servers": f"{slot.host}:{slot.port}"})
                wait_for(lambda a=admin: len(a.list_topics(timeout=5).brokers) == 2, 30,
                         what=f"broker {slot.id} knowing both brokers")
            yield c


def weir(cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*WEIR, *args, "--bootstrap-server", cluster.bootstrap,
                           "--timeout", "20"], input=stdin, capture_output=True, text=True,
                          timeout=120, check=False)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def ok_json(result: subprocess.CompletedProcess):
    return json.loads(ok(result).stdout)


def _consumer(cluster, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 6000})


def _poll(consumer: Consumer, count: int, timeout_s: float = 60) -> list:
    got: list = []
    wait_for(lambda: _poll_once(consumer, got) >= count, timeout_s, interval_s=0,
             what=f"{count} records")
    return got


def _poll_once(consumer: Consumer, got: list) -> int:
    msg = consumer.poll(0.5)
    if msg is not None and msg.error() is None:
        got.append(msg)
    return len(got)


def _committed(cluster, group: str) -> dict[int, int]:
    doc = ok_json(weir(cluster, "group", "describe", group, "--json"))
    return {r["partition"]: r["current_offset"] for r in doc["partitions"]}


# -- group reset-offsets / delete -------------------------------------------------------------


def test_reset_offsets_round_trip_with_a_real_consumer_group(cluster, topic_name):
    group = f"g-{topic_name}"
    create_topic(cluster.bootstrap, topic_name, partitions=2, replication=2)
    for p in (0, 1):
        produce(cluster.bootstrap, topic_name, [b"%d-%d" % (p, i) for i in range(6)],
                partition=p)
    consumer = _consumer(cluster, group)
    try:
        consumer.subscribe([topic_name])
        _poll(consumer, 12)
        consumer.commit(asynchronous=False)
        # an active member: refused with Kafka's message, nothing changed
        busy = weir(cluster, "group", "reset-offsets", group, "--topic", topic_name,
                    "--to-earliest", "--execute")
        assert busy.returncode == 1
        assert (f"Assignments can only be reset if the group '{group}' is inactive, but the "
                f"current state is Stable.") in busy.stderr
    finally:
        consumer.close()
    assert _committed(cluster, group) == {0: 6, 1: 6}

    # the default is a dry run: the plan is printed, the offsets stay
    plan = ok(weir(cluster, "group", "reset-offsets", group, "--topic", topic_name,
                   "--to-earliest"))
    assert "NEW-OFFSET" in plan.stdout and "dry run" in plan.stdout
    assert _committed(cluster, group) == {0: 6, 1: 6}

    done = ok_json(weir(cluster, "group", "reset-offsets", "--group", group, "--topic",
                        f"{topic_name}:0", "--to-offset", "2", "--execute", "--json"))
    assert done["executed"] and [(r["partition"], r["new_offset"]) for r in
                                 done["partitions"]] == [(0, 2)]
    shifted = ok_json(weir(cluster, "group", "reset-offsets", group, "--topic",
                           f"{topic_name}:1", "--shift-by", "-10", "--execute", "--json"))
    assert shifted["partitions"][0]["new_offset"] == 0  # clamped to the log start
    assert shifted["warnings"] and "lower than earliest offset" in shifted["warnings"][0]
    assert _committed(cluster, group) == {0: 2, 1: 0}

    # a consumer of the group resumes from the reset offsets
    again = _consumer(cluster, group)
    try:
        again.subscribe([topic_name])
        got = _poll(again, 10)
        first = {}
        for msg in got:
            first.setdefault(msg.partition(), msg.offset())
        assert first == {0: 2, 1: 0}
        assert sorted(m.value() for m in got if m.partition() == 0) == [
            b"0-%d" % i for i in range(2, 6)]
    finally:
        again.close()

    latest = ok_json(weir(cluster, "group", "reset-offsets", group, "--all-topics",
                          "--to-latest", "--execute", "--json"))
    assert {r["partition"]: r["new_offset"] for r in latest["partitions"]} == {0: 6, 1: 6}
    # --export saves a plan, --from-file applies it later (Kafka's CSV)
    saved = ok(weir(cluster, "group", "reset-offsets", group, "--topic", f"{topic_name}:1",
                    "--to-offset", "4", "--export")).stdout
    assert saved.strip() == f"{topic_name},1,4"
    plan_file = cluster.data_dir / f"{group}.csv"
    plan_file.write_text(saved)
    ok(weir(cluster, "group", "reset-offsets", group, "--from-file", str(plan_file),
            "--execute"))
    assert _committed(cluster, group) == {0: 6, 1: 4}
    bad = weir(cluster, "group", "reset-offsets", group, "--topic", "no-such-topic",
               "--to-latest")
    assert bad.returncode == 1 and "no-such-topic" in bad.stderr
    neither = weir(cluster, "group", "reset-offsets", group, "--to-latest")
    assert neither.returncode == 1 and "--all-topics, --topic" in neither.stderr


def test_group_delete_refuses_a_group_with_members(cluster, topic_name):
    group = f"g-{topic_name}"
    create_topic(cluster.bootstrap, topic_name)
    produce(cluster.bootstrap, topic_name, [b"x"])
    consumer = _consumer(cluster, group)
    try:
        consumer.subscribe([topic_name])
        consumer.commit(message=_poll(consumer, 1)[0], asynchronous=False)
        members = ok(weir(cluster, "group", "describe", group, "--members", "--verbose"))
        [row] = members.stdout.splitlines()[3:]
        assert row.split()[-2:] == ["1", f"{topic_name}(0)"]  # #PARTITIONS, ASSIGNMENT
        state = ok(weir(cluster, "group", "describe", group, "--state")).stdout.splitlines()
        assert state[0].split()[:2] == ["GROUP", "COORDINATOR"]
        assert state[1].split()[-2:] == ["Stable", "1"]
        busy = weir(cluster, "group", "delete", group)
        assert busy.returncode == 1
        assert f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP" in busy.stdout
        assert busy.stderr.startswith("weir: deleting consumer groups: NON_EMPTY_GROUP: ")
    finally:
        consumer.close()
    deleted = ok(weir(cluster, "group", "delete", group))
    assert f"Deletion of requested consumer groups ('{group}') was successful." in (
        deleted.stdout)
    assert group not in [g["group"] for g in ok_json(weir(cluster, "group", "list", "--json"))]
    gone = weir(cluster, "group", "delete", group, "--json")
    assert gone.returncode == 1 and "GROUP_ID_NOT_FOUND" in json.loads(gone.stdout)[
        "failed"][group]


# -- produce / consume --------------------------------------------------------------------------


def test_produce_consume_round_trip_with_keys_and_headers(cluster, topic_name):
    create_topic(cluster.bootstrap, topic_name, partitions=2, replication=2)
    lines = "trace:1,app:web\tuser-1\thello\ntrace:2\tuser-2\tworld\n"
    produced = ok(weir(cluster, "produce", "--topic", topic_name, "--partition", "0",
                       "--property", "parse.key=true", "--property", "parse.headers=true",
                       stdin=lines))
    assert "Produced 2 of 2" in produced.stderr
    binary = json.dumps({"key": "AAE=", "value": "/wD+", "partition": 1,
                         "headers": [{"key": "h", "value": "Ag=="}]}) + "\n"
    report = ok(weir(cluster, "produce", "--topic", topic_name, "--format", "json",
                     "--encoding", "base64", "--json", stdin=binary))
    assert json.loads(report.stdout)["partition"] == 1

    text = ok(weir(cluster, "consume", "--topic", topic_name, "--partition", "0",
                   "--offset", "earliest", "--max-messages", "2", "--timeout-ms", "20000",
                   "--property", "print.key=true", "--property", "print.headers=true",
                   "--property", "print.offset=true", "--property", "key.separator=|"))
    assert text.stdout.splitlines() == ["Offset:0|trace:1,app:web|user-1|hello",
                                        "Offset:1|trace:2|user-2|world"]
    assert "Processed a total of 2 messages" in text.stderr

    group = f"g-{topic_name}"
    docs = [json.loads(line) for line in ok(weir(
        cluster, "consume", "--topic", topic_name, "--group", group, "--from-beginning",
        "--max-messages", "3", "--timeout-ms", "20000", "--json", "--encoding",
        "base64")).stdout.splitlines()]
    by_partition = {(d["partition"], d["offset"]): d for d in docs}
    assert by_partition[(1, 0)]["key"] == "AAE=" and by_partition[(1, 0)]["value"] == "/wD+"
    assert by_partition[(1, 0)]["headers"] == [{"key": "h", "value": "Ag=="}]
    assert by_partition[(0, 0)]["headers"][1] == {"key": "app", "value": "d2Vi"}  # b"web"
    assert _committed(cluster, group) == {0: 2, 1: 1}  # the --group committed what it read

    # a third-party client sees the same keys and headers
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused"})
    try:
        reader.assign([TopicPartition(topic_name, 0, 0)])
        [msg] = _poll(reader, 1)
        assert (msg.key(), msg.value(), msg.headers()) == (
            b"user-1", b"hello", [("trace", b"1"), ("app", b"web")])
    finally:
        reader.close()

    # nothing newer than a future time: the consumer waits at the end and times out
    later = ok(weir(cluster, "consume", "--topic", topic_name, "--from-timestamp",
                    "2999-01-01T00:00:00", "--timeout-ms", "1500"))
    assert later.stdout == "" and "Processed a total of 0 messages" in later.stderr
    earlier = ok(weir(cluster, "consume", "--topic", topic_name, "--from-timestamp", "0",
                      "--partition", "0", "--max-messages", "2", "--timeout-ms", "20000"))
    assert earlier.stdout.splitlines() == ["hello", "world"]


def test_produce_and_consume_fail_clearly(cluster, topic_name):
    bad_line = weir(cluster, "produce", "--topic", topic_name, "--property", "parse.key=true",
                    stdin="no separator here\n")
    assert bad_line.returncode == 1 and "No key separator found on line number 1" in (
        bad_line.stderr)
    missing = weir(cluster, "consume", "--topic", "no-such-topic", "--timeout-ms", "1000")
    assert missing.returncode == 1 and "unknown topic 'no-such-topic'" in missing.stderr
    port = free_port()
    down = subprocess.run([*WEIR, "consume", "--topic", "t", "--bootstrap-server",
                           f"127.0.0.1:{port}", "--timeout", "2"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert down.returncode == 1 and "cannot reach the cluster" in down.stderr
    unreachable = subprocess.run([*WEIR, "group", "delete", "g", "--bootstrap-server",
                                  f"127.0.0.1:{port}", "--timeout", "2"], capture_output=True,
                                 text=True, timeout=60, check=False)
    assert unreachable.returncode == 1 and "NETWORK_EXCEPTION" in unreachable.stderr


# -- elect ---------------------------------------------------------------------------------------


def test_preferred_election_after_the_preferred_leader_came_back(cluster, topic_name):
    create_topic(cluster.bootstrap, topic_name, partitions=1, replication=2)
    [desc] = ok_json(weir(cluster, "topic", "describe", topic_name, "--json"))
    preferred = desc["partition_details"][0]["replicas"][0]
    assert desc["partition_details"][0]["leader"] == preferred
    noop = ok(weir(cluster, "elect", "--type", "preferred", "--topic", topic_name,
                   "--partition", "0"))
    assert noop.stdout.strip() == f"Valid replica already elected for partitions {topic_name}-0"

    cluster.stop_broker(preferred)  # controlled shutdown moves the leadership away
    try:
        def leader_and_isr():
            [d] = ok_json(weir(cluster, "topic", "describe", topic_name, "--json"))
            return d["partition_details"][0]["leader"], d["partition_details"][0]["isr"]

        wait_for(lambda: leader_and_isr()[0] not in (preferred, -1), 60,
                 what="leadership moved off the preferred replica")
    finally:
        cluster.start_broker(preferred)
    cluster.wait_for_brokers([preferred], 60)
    wait_for(lambda: preferred in leader_and_isr()[1], 60, interval_s=0.5,
             what="the preferred replica back in the ISR")
    assert leader_and_isr()[0] != preferred  # auto.leader.rebalance.enable=false

    elected = ok_json(weir(cluster, "elect", "--type", "preferred", "--topic", topic_name,
                           "--partition", "0", "--json"))
    assert elected == {"election_type": "PREFERRED", "results": [
        {"topic": topic_name, "partition": 0, "result": "ELECTED", "message": None}]}
    wait_for(lambda: leader_and_isr()[0] == preferred, 30, what="the preferred leader back")

    plan = cluster.data_dir / f"{topic_name}-election.json"
    plan.write_text(json.dumps({"partitions": [{"topic": topic_name, "partition": 0},
                                               {"topic": "no-such-topic", "partition": 0}]}))
    mixed = weir(cluster, "elect", "--election-type", "PREFERRED", "--path-to-json-file",
                 str(plan))
    assert mixed.returncode == 1
    assert f"Valid replica already elected for partitions {topic_name}-0" in mixed.stdout
    assert ("Error completing leader election (PREFERRED) for partition: no-such-topic-0: "
            "UNKNOWN_TOPIC_OR_PARTITION") in mixed.stdout
    lone = weir(cluster, "elect", "--type", "preferred", "--topic", topic_name)
    assert lone.returncode == 1 and "--partition is required" in lone.stderr


# -- up --first-broker-id ------------------------------------------------------------------------


def test_up_with_broker_ids_from_zero(tmp_path):
    data = tmp_path / "data"

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*WEIR, *args], input=stdin, capture_output=True, text=True,
                              timeout=120, check=False)

    up = run("up", "--brokers", "2", "--first-broker-id", "0", "--port-base", "0",
             "--detach", "--data-dir", str(data))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        doc = json.loads((data / "cluster.json").read_text())
        assert doc["first_broker_id"] == 0 and [b["id"] for b in doc["brokers"]] == [0, 1]
        status = ok(run("status", "--data-dir", str(data)))
        assert status.stdout.splitlines()[2].split()[:1] == ["0"]
        where = ["--data-dir", str(data), "--timeout", "20"]
        ok(run("topic", "create", "zero", "--partitions", "2", "--replication-factor", "2",
               *where))
        ok(run("produce", "--topic", "zero", "--partition", "0", *where, stdin="a\nb\n"))
        got = ok(run("consume", "--topic", "zero", "--partition", "0", "--offset", "0",
                     "--max-messages", "2", "--timeout-ms", "20000", *where))
        assert got.stdout.split() == ["a", "b"]
        [desc] = ok_json(run("topic", "describe", "zero", "--json", *where))
        assert sorted(desc["partition_details"][0]["replicas"]) == [0, 1]

        ok(run("broker", "stop", "--id", "0", "--data-dir", str(data)))
        wait_for(lambda: "0" not in [line.split()[0] for line in run(
            "status", "--data-dir", str(data)).stdout.splitlines()[2:4]
            if "yes" in line], 60, interval_s=0.5, what="broker 0 deregistered")
        again = run("up", "--brokers", "2", "--port-base", "0", "--detach", "--data-dir",
                    str(data))  # no --first-broker-id: the data dir's numbering is kept
        assert again.returncode == 0, again.stdout + again.stderr
        doc = json.loads((data / "cluster.json").read_text())
        assert [b["id"] for b in doc["brokers"]] == [0, 1]
        assert not (data / "broker-2").exists()
    finally:
        down = run("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
